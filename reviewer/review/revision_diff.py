"""Reads for the revision diff: two revisions of a session's doc, the findings placed
on each, and "changes since my last review".

Nothing here writes. The session must already be one the user may see
(:func:`reviewer.selectors.sessions_visible_to`); the page and the API answer
404 otherwise.

Where a finding is on a revision: a finding stores one anchor, on the revision
it was made on or last moved to. On that revision it is *anchored*; on any
other one its quote is placed by :func:`reviewer.text.anchoring.reanchor` (the rule
that moves findings when a doc is revised) and it is *re-anchored*; when the
quote cannot be placed there, the finding is not on that side.

"Your last review" is the revision that was the doc's latest when you last
filed a finding or a reply in the session. Someone who has filed nothing yet
gets the revision that was the latest when the session was opened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Max, Q

from reviewer.errors import Invalid
from reviewer.models.review import DocRevision, Finding, FindingReply, ReviewSession
from reviewer.text.anchoring import Anchor, reanchor
from reviewer.text.diffing import Row, Segment, TextDiff, diff_texts


@dataclass
class Placed:
    """Where a finding is on one revision, and how it got there."""

    start: int
    end: int
    how: str  # "anchored" or "re-anchored"

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "how": self.how}


def diff_url(session_id: int, from_number: int, to_number: int) -> str:
    """The page that shows the diff of two revisions: stable, so other records may link to it."""
    return f"/sessions/{session_id}/diff/?from={from_number}&to={to_number}"


def last_review_revision(session: ReviewSession, user: Any) -> DocRevision | None:
    """The revision that was latest when ``user`` last filed a finding or reply in ``session``.

    With nothing filed yet, the one that was latest when the session was opened
    (or the first revision, for a session older than every revision).
    """
    revisions = session.doc.revisions.order_by("-number")
    last_finding = Finding.objects.filter(session=session, author=user).aggregate(t=Max("created_at"))["t"]
    last_reply = FindingReply.objects.filter(finding__session=session, author=user).aggregate(
        t=Max("created_at"))["t"]
    moments = [t for t in (last_finding, last_reply) if t is not None]
    at = max(moments) if moments else session.created_at
    return revisions.filter(created_at__lte=at).first() or session.doc.revisions.order_by("number").first()


def revision_numbers(session: ReviewSession) -> list[int]:
    """The doc's revision numbers, oldest first."""
    return list(session.doc.revisions.order_by("number").values_list("number", flat=True))


def _revision(session: ReviewSession, number: Any, name: str, numbers: list[int]) -> DocRevision:
    try:
        value = int(number)
    except (TypeError, ValueError):
        raise Invalid(name, f"{name}: give a revision number, e.g. {name}=1.") from None
    if value not in numbers:
        span = f"revisions {numbers[0]} to {numbers[-1]}" if numbers else "no revisions"
        raise Invalid(name, f"{name}: the doc has no revision {value}; it has {span}.")
    return session.doc.revisions.get(number=value)


def resolve_revisions(
    session: ReviewSession, user: Any, from_number: Any, to_number: Any
) -> tuple[DocRevision, DocRevision, str]:
    """The two revisions asked for; without ``from``, the user's last review; without ``to``, the latest.

    The third value says how ``from`` was chosen: ``given`` or ``last_review``.
    """
    numbers = revision_numbers(session)
    if not numbers:
        raise Invalid("from", "from: the doc has no revisions to compare.")
    new = _revision(session, numbers[-1] if to_number in (None, "") else to_number, "to", numbers)
    if from_number in (None, ""):
        old = last_review_revision(session, user)
        assert old is not None  # the doc has revisions
        return old, new, "last_review"
    return _revision(session, from_number, "from", numbers), new, "given"


def _place(finding: Finding, revision: DocRevision) -> Placed | None:
    """Where ``finding`` is on ``revision`` (see the module's docstring)."""
    if not finding.anchor_exact or finding.revision is None or finding.anchor_start is None:
        return None
    if finding.revision_id == revision.pk:
        return Placed(finding.anchor_start, finding.anchor_end or finding.anchor_start, "anchored")
    anchor = Anchor(
        exact=finding.anchor_exact,
        prefix=finding.anchor_prefix,
        suffix=finding.anchor_suffix,
        start=finding.anchor_start,
        end=finding.anchor_end or finding.anchor_start,
    )
    # A quote found exactly once is where reanchor would put it too; the search
    # for the likeliest of several, or for a reworded quote, needs a line diff
    # of the two revisions, which costs seconds on a megabyte doc.
    text = revision.body
    first = text.find(anchor.exact)
    if first >= 0 and text.find(anchor.exact, first + 1) < 0:
        return Placed(first, first + len(anchor.exact), "re-anchored")
    placed = reanchor(anchor, finding.revision.body, text)
    if placed is None:
        return None
    return Placed(placed.anchor.start, placed.anchor.end, "re-anchored")


def _segment_dict(segment: Segment | None, changes: list[tuple[int, int]], ids: list[int]) -> dict[str, Any] | None:
    if segment is None:
        return None
    return {"start": segment.start, "end": segment.end, "text": segment.text, "kind": segment.kind,
            "changes": [list(c) for c in changes], "findings": ids}


def _ids_on(segment: Segment | None, spans: list[tuple[int, int, int]]) -> list[int]:
    if segment is None:
        return []
    return [fid for start, end, fid in spans
            if start < segment.end and (end > segment.start or (start == end and start >= segment.start))]


def _row_dict(row: Row, old_spans: list[tuple[int, int, int]], new_spans: list[tuple[int, int, int]]) -> dict[str, Any]:
    data: dict[str, Any] = {"op": row.op}
    if row.op == "skip":
        data["skipped"] = row.skipped
        return data
    data["old"] = _segment_dict(row.old, row.old_changes, _ids_on(row.old, old_spans))
    data["new"] = _segment_dict(row.new, row.new_changes, _ids_on(row.new, new_spans))
    return data


def doc_diff(old: DocRevision, new: DocRevision) -> dict[str, Any]:
    """The diff of two revisions of a doc, sentence by sentence, without any session's findings
    (the doc page's diff)."""
    text_diff, notices = _text_diff(old, new)
    return {
        "doc": old.doc_id,
        "from": _revision_dict(old),
        "to": _revision_dict(new),
        "stats": text_diff.stats(),
        "truncated": bool(notices),
        "notices": notices,
        "rows": [_row_dict(row, [], []) for row in text_diff.rows],
    }


def _text_diff(old: DocRevision, new: DocRevision) -> tuple[TextDiff, list[str]]:
    """The sentence diff of two revisions, within the size caps, and the notices of any cap hit."""
    max_chars = settings.DIFF_MAX_CHARS
    notices = []
    old_text, new_text = old.body, new.body
    if len(old_text) > max_chars or len(new_text) > max_chars:
        notices.append(
            f"The revisions are longer than {max_chars:,} characters (DIFF_MAX_CHARS); "
            f"only their first {max_chars:,} characters are compared."
        )
        old_text, new_text = old_text[:max_chars], new_text[:max_chars]
    text_diff: TextDiff = diff_texts(old_text, new_text, max_segments=settings.DIFF_MAX_SEGMENTS)
    if text_diff.truncated:
        notices.append(
            f"A stretch of more than {settings.DIFF_MAX_SEGMENTS:,} sentences (DIFF_MAX_SEGMENTS) has no sentence "
            "in common between the revisions; it is shown sentence by sentence as removed and added, "
            "without looking for sentences that match or moved."
        )
    return text_diff, notices


def session_diff(session: ReviewSession, old: DocRevision, new: DocRevision, *, how_from: str = "given",
                 viewer: Any = None) -> dict[str, Any]:
    """The diff of two revisions of the session's doc with the session's findings on each side."""
    text_diff, notices = _text_diff(old, new)
    limit = settings.DIFF_MAX_FINDINGS
    # Published findings, and the viewer's own drafts: nobody else's drafts.
    visible = Q(published_at__isnull=False) | Q(author=viewer) if viewer is not None else Q(published_at__isnull=False)
    qs = (Finding.objects.filter(visible, session=session, merged_into__isnull=True)
          .select_related("author", "revision").order_by("id"))
    total = qs.count()
    findings = list(qs[:limit])
    if total > limit:
        notices.append(
            f"The session has {total:,} findings; the first {limit:,} are placed on the diff (DIFF_MAX_FINDINGS)."
        )
    placed: list[dict[str, Any]] = []
    old_spans: list[tuple[int, int, int]] = []
    new_spans: list[tuple[int, int, int]] = []
    for finding in findings:
        on_old = _place(finding, old)
        on_new = _place(finding, new)
        if on_old is not None:
            old_spans.append((on_old.start, on_old.end, finding.pk))
        if on_new is not None:
            new_spans.append((on_new.start, on_new.end, finding.pk))
        placed.append({
            "id": finding.pk,
            "title": finding.title,
            "pass": finding.review_pass,
            "severity": finding.severity,
            "severity_label": finding.get_severity_display(),
            "status": finding.status,
            "author": finding.author.get_username(),
            "anchor_exact": finding.anchor_exact,
            "revision": finding.revision.number if finding.revision else None,
            "old": on_old.to_dict() if on_old else None,
            "new": on_new.to_dict() if on_new else None,
        })
    return {
        "session": session.pk,
        "doc": session.doc_id,
        "from": _revision_dict(old),
        "to": _revision_dict(new),
        "from_chosen": how_from,
        "revisions": revision_numbers(session),
        "url": diff_url(session.pk, old.number, new.number),
        "stats": text_diff.stats(),
        "truncated": bool(notices),
        "notices": notices,
        "rows": [_row_dict(row, old_spans, new_spans) for row in text_diff.rows],
        "findings": placed,
    }


def _revision_dict(revision: DocRevision) -> dict[str, Any]:
    return {
        "number": revision.number,
        "title": revision.title,
        "created_at": revision.created_at.isoformat(),
        "author": revision.author.get_username() if revision.author else None,
        "chars": len(revision.body),
    }
