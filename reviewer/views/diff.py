"""The revision diff page: /sessions/<id>/diff/?from=<rev>&to=<rev>[&view=inline].

Rendered on the server from the same data the API answers
(:func:`reviewer.review.revision_diff.session_diff`); the page needs no script. The
URL is stable: other records link to the diff that fixed something.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from reviewer.errors import Invalid
from reviewer.review import revision_diff
from reviewer.text.diffing import Segment, pieces
from reviewer.views.pages import get_session_for_user

VIEWS = ("side", "inline")


def _side(cell: dict[str, Any] | None, placements: dict[int, dict[str, Any]], side: str) -> dict[str, Any] | None:
    """One side of a row as the template draws it: pieces of text and the findings there."""
    if cell is None:
        return None
    segment = Segment(cell["start"], cell["end"], cell["text"])
    marks: list[tuple[int, int, Any]] = [(s, e, "changed") for s, e in cell["changes"]]
    for fid in cell["findings"]:
        where = placements[fid][side]
        marks.append((where["start"], where["end"], fid))
    parts = []
    for text, labels in pieces(segment, marks):
        ids = [label for label in labels if label != "changed"]
        parts.append({"text": text, "changed": "changed" in labels, "findings": " ".join(map(str, ids))})
    findings = [{**placements[fid], "how": placements[fid][side]["how"]} for fid in cell["findings"]]
    return {"parts": parts, "findings": findings}


@login_required
@require_GET
def session_diff_page(request: HttpRequest, session_id: int) -> HttpResponse:
    """Two revisions of the session's doc, side by side or inline, with the findings on each."""
    session = get_session_for_user(request.user, session_id)
    view = request.GET.get("view") or "side"
    numbers = revision_diff.revision_numbers(session)
    context: dict[str, Any] = {"session": session, "revisions": numbers, "view": view, "views": VIEWS}
    if view not in VIEWS:
        context["error"] = f"view: use side or inline, not {view!r}."
        return render(request, "reviewer/diff.html", context, status=400)
    try:
        old, new, how = revision_diff.resolve_revisions(session, request.user, request.GET.get("from"),
                                                        request.GET.get("to"))
    except Invalid as exc:
        context["error"] = exc.message
        return render(request, "reviewer/diff.html", context, status=400)
    data = revision_diff.session_diff(session, old, new, how_from=how, viewer=request.user)
    placements = {f["id"]: f for f in data["findings"]}
    rows = []
    for row in data["rows"]:
        if row["op"] == "skip":
            rows.append(row)
            continue
        rows.append({"op": row["op"], "old": _side(row.get("old"), placements, "old"),
                     "new": _side(row.get("new"), placements, "new")})
    context.update({
        "diff": data,
        "rows": rows,
        "changed": any(r["op"] not in ("equal", "skip") for r in rows),
        "other_view": "inline" if view == "side" else "side",
        "from_at": old.created_at,
        "to_at": new.created_at,
    })
    return render(request, "reviewer/diff.html", context)
