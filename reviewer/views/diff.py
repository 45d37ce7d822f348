"""The revision diff page: /sessions/<id>/diff/?from=<rev>&to=<rev>[&view=inline].

Rendered on the server from the same data the API answers
(:func:`reviewer.review.revision_diff.session_diff`); the page needs no script. The
URL is stable: other records link to the diff that fixed something.
"""

from __future__ import annotations

import re
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


# The block marker a segment starts with ("## ", "- ", "> "), drawn as the block's style instead.
_MARKER = re.compile(r"^(?:#{1,6}\s+|[-*+]\s+|>\s?)")
# Inline Markdown drawn as plain text: emphasis and code marks dropped, a link shown as its text.
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_EMPHASIS = re.compile(r"\*\*|__|`|(?<![\w*])[*_](?=\S)|(?<=\S)[*_](?![\w*])")


def _plain(text: str) -> str:
    return _EMPHASIS.sub("", _LINK.sub(r"\1", text))


def _rendered(parts: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The parts of a cell as the rendered Markdown reads: no block marker (but a code
    line's text as written), no inline marks."""
    if kind == "code":
        return parts
    marker = _MARKER.match("".join(p["text"] for p in parts)[:12])
    drop = len(marker.group()) if marker and kind != "p" else 0
    out = []
    for part in parts:
        text = part["text"]
        cut = min(drop, len(text))
        text, drop = text[cut:], drop - cut
        if text:
            out.append({**part, "text": _plain(text)})
    return out


def _side(cell: dict[str, Any] | None, placements: dict[int, dict[str, Any]], side: str) -> dict[str, Any] | None:
    """One side of a row as the template draws it: pieces of text and the findings there."""
    if cell is None:
        return None
    segment = Segment(cell["start"], cell["end"], cell["text"], cell.get("kind", "p"))
    marks: list[tuple[int, int, Any]] = [(s, e, "changed") for s, e in cell["changes"]]
    for fid in cell["findings"]:
        where = placements[fid][side]
        marks.append((where["start"], where["end"], fid))
    parts = []
    for text, labels in pieces(segment, marks):
        ids = [label for label in labels if label != "changed"]
        parts.append({"text": text, "changed": "changed" in labels, "findings": " ".join(map(str, ids))})
    findings = [{**placements[fid], "how": placements[fid][side]["how"]} for fid in cell["findings"]]
    return {"parts": _rendered(parts, segment.kind), "findings": findings, "kind": segment.kind}


def diff_rows(data: dict[str, Any], placements: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """The diff's rows as the templates draw them (see ``_side``)."""
    rows = []
    for row in data["rows"]:
        if row["op"] == "skip":
            rows.append(row)
            continue
        rows.append({"op": row["op"], "old": _side(row.get("old"), placements, "old"),
                     "new": _side(row.get("new"), placements, "new")})
    return rows


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
    rows = diff_rows(data, {f["id"]: f for f in data["findings"]})
    context.update({
        "diff": data,
        "rows": rows,
        "changed": any(r["op"] not in ("equal", "skip") for r in rows),
        "other_view": "inline" if view == "side" else "side",
        "from_at": old.created_at,
        "to_at": new.created_at,
    })
    return render(request, "reviewer/diff.html", context)
