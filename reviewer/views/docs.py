"""A design doc's own pages: /docs/<id>/ reads a revision (the latest unless
``?revision=N``), lists every revision with the diff of each against the one
before, shows the reviews of the doc, and lets its owner upload or paste a new
revision; /docs/<id>/diff/?from=N&to=M shows two revisions sentence by sentence.

Rendered on the server; the pages need no script. A new revision goes through
:func:`reviewer.review.services.doc_revise`, as the API's does, so the open
findings move to it.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models.functions import Length
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from reviewer import permissions, selectors
from reviewer.errors import Conflict, Invalid, ServiceError
from reviewer.models import DesignDoc, DocRevision
from reviewer.review import revision_diff, services
from reviewer.text.markdown import render_markdown
from reviewer.views.diff import VIEWS, diff_rows

#: Files a new revision may be uploaded as (Markdown or plain text).
UPLOAD_SUFFIXES = (".md", ".markdown", ".txt")
#: The longest doc accepted from the page's form or upload.
MAX_DOC_BYTES = 4 * 2**20


def _doc_for(user: Any, doc_id: int) -> DesignDoc:
    """The doc if the user may see it; 404 otherwise."""
    return get_object_or_404(selectors.docs_visible_to(user).select_related("owner"), pk=doc_id)


def _revisions(doc: DesignDoc) -> list[DocRevision]:
    return list(doc.revisions.select_related("author").defer("body")
                .annotate(body_chars=Length("body")).order_by("number"))


def _read_upload(request: HttpRequest) -> str | None:
    """The text of the uploaded file, if one was sent; Invalid names what is wrong with it."""
    upload = request.FILES.get("file")
    if upload is None:
        return None
    name = upload.name or "the file"
    if not name.lower().endswith(UPLOAD_SUFFIXES):
        raise Invalid("file", f"file: {name} is not a Markdown or text file; upload a .md or .txt file.")
    if upload.size and upload.size > MAX_DOC_BYTES:
        raise Invalid("file", f"file: {name} is {upload.size / 2**20:.1f} MB; a doc may be at most "
                              f"{MAX_DOC_BYTES / 2**20:g} MB.")
    try:
        return upload.read().decode("utf-8")
    except UnicodeDecodeError:
        raise Invalid("file", f"file: {name} is not UTF-8 text; save it as UTF-8 and upload it again.") from None


@login_required
@require_http_methods(["GET", "POST"])
def doc_page(request: HttpRequest, doc_id: int) -> HttpResponse:
    """Read a revision of the doc, see its revisions and reviews; its owner adds a revision."""
    doc = _doc_for(request.user, doc_id)
    can_revise = permissions.can_edit_owned(request.user, doc)
    revisions = _revisions(doc)
    latest = revisions[-1] if revisions else None
    form = {"title": doc.title, "body": "", "base_revision": latest.number if latest else ""}
    errors: list[str] = []
    status = 200
    if request.method == "POST":
        if not can_revise:
            return render(request, "reviewer/doc.html", {"doc": doc, "errors": [
                "Only the doc's owner can add a revision; ask them, or reply on a finding."]}, status=403)
        form = {"title": (request.POST.get("title") or "").strip()[:200] or doc.title,
                "body": request.POST.get("body") or "", "base_revision": request.POST.get("base_revision") or ""}
        try:
            uploaded = _read_upload(request)
            body = uploaded if uploaded is not None else form["body"]
            if not body.strip():
                raise Invalid("body", "body: paste the new revision's text or choose a file to upload.")
            if len(body.encode("utf-8")) > MAX_DOC_BYTES:
                raise Invalid("body", f"body: a doc may be at most {MAX_DOC_BYTES / 2**20:g} MB.")
            base = int(form["base_revision"]) if str(form["base_revision"]).isdigit() else None
            result = services.doc_revise(doc=doc, author=request.user, title=form["title"], body=body,
                                         base_revision=base)
        except Conflict:
            errors.append("Someone saved a newer revision while you were editing; your text is kept below. "
                          "Read the latest revision, then save yours again.")
            form["base_revision"] = latest.number if latest else ""
            status = 409
        except ServiceError as exc:
            errors.append(exc.message)
            status = 400
        else:
            revision = result.revision
            note = f"Saved revision {revision.number}."
            if result.pending:
                note += " The open findings are being moved to it."
            elif result.moved or result.orphaned:
                note += f" {len(result.moved)} open finding(s) moved to it"
                note += f", {len(result.orphaned)} could not be placed." if result.orphaned else "."
            messages.success(request, note)
            return redirect("doc", doc_id=doc.pk)
    number = request.GET.get("revision")
    shown = latest
    if number not in (None, ""):
        shown = next((r for r in revisions if str(r.number) == number), None)
        if shown is None:
            errors.append(f"revision: the doc has no revision {number}; it has revisions 1 to "
                          f"{latest.number if latest else 0}.")
            status = 404
            shown = latest
    body = DocRevision.objects.get(pk=shown.pk).body if shown else ""
    context = {
        "doc": doc,
        "revisions": revisions,
        "shown": shown,
        "latest": latest,
        "html": render_markdown(body),
        "sessions": selectors.sessions_visible_to(request.user).filter(doc=doc).order_by("-pk")[:50],
        "can_revise": can_revise,
        "form": form,
        "errors": errors,
        "upload_suffixes": ", ".join(UPLOAD_SUFFIXES),
        "max_mb": f"{MAX_DOC_BYTES / 2**20:g}",
        "upload_max_mb": f"{settings.UPLOAD_MAX_BYTES / 2**20:g}",
    }
    return render(request, "reviewer/doc.html", context, status=status)


@login_required
@require_GET
def doc_diff_page(request: HttpRequest, doc_id: int) -> HttpResponse:
    """Two revisions of the doc, side by side or inline, sentence by sentence."""
    doc = _doc_for(request.user, doc_id)
    numbers = list(doc.revisions.order_by("number").values_list("number", flat=True))
    view = request.GET.get("view") or "side"
    context: dict[str, Any] = {"doc": doc, "revisions": numbers, "view": view, "views": VIEWS,
                               "action": reverse("doc-diff", args=[doc.pk])}
    try:
        if view not in VIEWS:
            raise Invalid("view", f"view: use side or inline, not {view!r}.")
        if not numbers:
            raise Invalid("from", "from: the doc has no revisions to compare.")
        to_number = _number(request.GET.get("to"), numbers[-1], "to", numbers)
        from_number = _number(request.GET.get("from"), max(numbers[0], to_number - 1), "from", numbers)
    except Invalid as exc:
        context["error"] = exc.message
        return render(request, "reviewer/doc_diff.html", context, status=400)
    old, new = doc.revisions.get(number=from_number), doc.revisions.get(number=to_number)
    data = revision_diff.doc_diff(old, new)
    rows = diff_rows(data, {})
    context.update({"diff": data, "rows": rows, "changed": any(r["op"] not in ("equal", "skip") for r in rows),
                    "from_at": old.created_at, "to_at": new.created_at})
    return render(request, "reviewer/doc_diff.html", context)


def _number(value: str | None, default: int, name: str, numbers: list[int]) -> int:
    if value in (None, ""):
        return default
    if not str(value).isdigit() or int(value) not in numbers:
        raise Invalid(name, f"{name}: the doc has no revision {value}; it has revisions {numbers[0]} to {numbers[-1]}.")
    return int(value)
