"""Finding workflows: record, change, delete and rank findings; reply to them.

Part of the review services (``reviewer.review.services`` re-exports these
names). Every change is published to the session's live viewers after the
transaction commits.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from reviewer.errors import Conflict, Invalid, OverLimit
from reviewer.models.review import (
    SEVERITY_ORDER,
    DesignDoc,
    DocRevision,
    Finding,
    FindingReply,
    FindingStatus,
    ReviewSession,
    Severity,
)
from reviewer.models.runs import EmulatorRun
from reviewer.realtime import groups as realtime
from reviewer.representations import finding_representation
from reviewer.review import notifications
from reviewer.text.anchoring import (
    Anchor,
    Selection,
    anchor_at,
    locate_fuzzy,
    locate_quote,
    place_selection,
)
from reviewer.text.markdown import rendered_text


def _check_evidence_run(
    session: ReviewSession, author_id: int, run_id: int | None, field: str = "evidence_run_id"
) -> None:
    """Evidence must name a run of this session, or a session-less run the finding's author started.

    One message answers a run that does not exist and one the author may not
    use, so the error does not tell which run ids exist.
    """
    if run_id is None:
        return
    usable = EmulatorRun.objects.filter(
        Q(session=session) | Q(session__isnull=True, started_by_id=author_id), pk=run_id
    )
    if not usable.exists():
        raise Invalid(
            field,
            f"Run {run_id} is not one of this session's runs or of your own runs; pick one of those.",
        )


def _next_position(session: ReviewSession, severity: str) -> int:
    top = Finding.objects.filter(session=session, severity=severity).aggregate(m=Max("position"))["m"]
    return 0 if top is None else top + 1


def set_anchor(finding: Finding, revision: DocRevision, anchor: Anchor) -> None:
    """Put ``anchor`` (a place in ``revision``) on ``finding``; the caller saves."""
    finding.revision = revision
    finding.anchor_exact = anchor.exact
    finding.anchor_prefix = anchor.prefix
    finding.anchor_suffix = anchor.suffix
    finding.anchor_start = anchor.start
    finding.anchor_end = anchor.end


def resolve_anchor(
    *,
    revision: DocRevision,
    exact: str = "",
    prefix: str = "",
    suffix: str = "",
    start: int | None = None,
    end: int | None = None,
    selection: Selection | None = None,
) -> Anchor | None:
    """An anchor in ``revision`` from a reader's selection, or from the selectors a client gave.

    A ``selection`` (text selected in the rendered page, with its context and
    position) is placed by :func:`reviewer.text.anchoring.place_selection`: the page
    never matches text itself. Otherwise offsets alone cut the quote from the
    text; a quote alone is searched for verbatim (context picks among
    repeats), then approximately; both must agree. Errors name the field
    (:class:`Invalid`).
    """
    text = revision.body
    if selection is not None:
        if exact or start is not None or end is not None:
            raise Invalid("selection", "Give a selection or the anchor_* fields, not both.")
        placed = place_selection(text, rendered_text(text), selection)
        if placed is None:
            raise Invalid(
                "selection",
                f"{selection.quote[:80]!r} is not in revision {revision.number} of the doc; "
                "select the passage again (reload the page if the doc was revised meanwhile).",
            )
        return placed
    if start is None and end is None and not exact:
        return None
    if (start is None) != (end is None):
        raise Invalid("anchor_end" if end is None else "anchor_start", "Give both anchor_start and anchor_end.")
    if start is not None and end is not None:
        if not 0 <= start <= end <= len(text):
            raise Invalid(
                "anchor_end", f"Offsets {start}..{end} are outside revision {revision.number} (0..{len(text)})."
            )
        anchor = anchor_at(text, start, end)
        if exact and anchor.exact != exact:
            raise Invalid(
                "anchor_exact", f"The quote does not match revision {revision.number} at {start}..{end}."
            )
        return anchor
    # Verbatim first; a quote copied from the rendered page may have lost
    # Markdown markup, so a close match of the source comes next.
    found = locate_quote(text, exact, prefix, suffix) or locate_fuzzy(text, exact, prefix, suffix)
    if found is None:
        raise Invalid("anchor_exact", f"The quote does not occur in revision {revision.number}.")
    return found


def _check_compared_run(session: ReviewSession, author_id: int, run_id: int | None, compare_id: int | None) -> None:
    """A compared run needs a first run, differs from it, and is one the author may use."""
    if compare_id is None:
        return
    if run_id is None:
        raise Invalid("evidence_compare_run_id", "A compared run needs evidence_run_id, the run it is compared with.")
    if compare_id == run_id:
        raise Invalid("evidence_compare_run_id", "The compared run is the evidence run itself; pick another run or leave it out.")
    _check_evidence_run(session, author_id, compare_id, "evidence_compare_run_id")


FINDING_FIELDS = (
    "review_pass",
    "title",
    "body",
    "severity",
    "status",
    "trace_hop",
    "evidence_run_id",
    "evidence_t_from_s",
    "evidence_t_to_s",
    "evidence_metric",
    "evidence_compare_run_id",
)
ANCHOR_FIELDS = ("anchor_exact", "anchor_prefix", "anchor_suffix", "anchor_start", "anchor_end")


@transaction.atomic
def finding_create(
    *,
    session: ReviewSession,
    author: User,
    review_pass: str,
    title: str,
    body: str = "",
    severity: str = Severity.MENTION,
    position: int | None = None,
    status: str = FindingStatus.OPEN,
    anchor_exact: str = "",
    anchor_prefix: str = "",
    anchor_suffix: str = "",
    anchor_start: int | None = None,
    anchor_end: int | None = None,
    selection: Selection | None = None,
    trace_hop: str = "",
    evidence_run_id: int | None = None,
    evidence_t_from_s: float | None = None,
    evidence_t_to_s: float | None = None,
    evidence_metric: str = "",
    evidence_compare_run_id: int | None = None,
) -> Finding:
    """Record a finding; a quote (or a reader's selection) is anchored on the doc's latest revision.

    It is a draft, seen by its author alone until they publish their review
    (:func:`reviewer.review.publishing.review_publish`), unless the session
    files findings directly.
    """
    if not session.is_open:
        raise Invalid("session", "The session is closed; reopen it to add findings.")
    _check_evidence_run(session, author.pk, evidence_run_id)
    _check_compared_run(session, author.pk, evidence_run_id, evidence_compare_run_id)
    on_doc = Finding.objects.filter(session__doc_id=session.doc_id).count()
    if on_doc >= settings.DOC_FINDINGS_MAX:
        raise OverLimit("DOC_FINDINGS_MAX", f"the doc has {on_doc:,} findings, the most a doc takes "
                                            "(DOC_FINDINGS_MAX); resolve or drop some, or start a new doc")
    finding = Finding(
        session=session,
        author=author,
        review_pass=review_pass,
        title=title,
        body=body,
        severity=severity,
        status=status,
        trace_hop=trace_hop,
        evidence_run_id=evidence_run_id,
        evidence_t_from_s=evidence_t_from_s,
        evidence_t_to_s=evidence_t_to_s,
        evidence_metric=evidence_metric,
        evidence_compare_run_id=evidence_compare_run_id,
        published_at=timezone.now() if session.file_directly else None,
    )
    # The doc's row lock orders this against doc_revise, which takes it too: a
    # revision committed meanwhile would otherwise leave the new finding on the
    # old revision, neither moved nor orphaned.
    revision = DesignDoc.objects.select_for_update().get(pk=session.doc_id).latest_revision()
    if revision is not None:
        anchor = resolve_anchor(
            revision=revision,
            exact=anchor_exact,
            prefix=anchor_prefix,
            suffix=anchor_suffix,
            start=anchor_start,
            end=anchor_end,
            selection=selection,
        )
        if anchor is not None:
            set_anchor(finding, revision, anchor)
    elif anchor_exact or anchor_start is not None or selection is not None:
        raise Invalid("anchor_exact", "The doc has no revision to anchor to.")
    finding.position = _next_position(session, severity) if position is None else position
    finding.full_clean(exclude=["session", "author", "revision"])
    finding.save()
    if not finding.is_draft:
        notifications.notify_mentions(session=session, actor=author, finding=finding,
                                      text=f"{finding.title}\n{finding.body}")
    publish_finding(finding, "finding.created")
    return finding


@transaction.atomic
def finding_update(*, finding: Finding, version: int, **changes: Any) -> Finding:
    """Change a finding if ``version`` is still its current version.

    Raises :class:`Conflict` carrying the current version otherwise. Moving
    a finding to another bucket puts it last there unless ``position`` is
    given. Changing the anchor re-anchors on the doc's latest revision.
    """
    finding = Finding.objects.select_for_update().select_related("session__doc").get(pk=finding.pk)
    if version != finding.version:
        raise Conflict(
            f"The finding was changed meanwhile (version {finding.version}, you sent {version}).",
            current=finding.version,
        )
    selection: Selection | None = changes.pop("selection", None)
    unknown = set(changes) - set(FINDING_FIELDS) - set(ANCHOR_FIELDS) - {"position"}
    if unknown:
        names = sorted(unknown)
        raise Invalid(names[0], f"{', '.join(names)}: cannot be changed; leave them out.")
    if "evidence_run_id" in changes and changes["evidence_run_id"] != finding.evidence_run_id:
        _check_evidence_run(finding.session, finding.author_id, changes["evidence_run_id"])
    if "evidence_run_id" in changes or "evidence_compare_run_id" in changes:
        _check_compared_run(
            finding.session, finding.author_id,
            changes.get("evidence_run_id", finding.evidence_run_id),
            changes.get("evidence_compare_run_id", finding.evidence_compare_run_id),
        )
    old_severity = finding.severity
    for name in FINDING_FIELDS:
        if name in changes:
            setattr(finding, name, changes[name])
    if "position" in changes and changes["position"] is not None:
        finding.position = changes["position"]
    elif finding.severity != old_severity:
        finding.position = _next_position(finding.session, finding.severity)
    # A full PUT repeats the anchor as read; only a changed anchor is re-placed
    # (an orphan's anchor belongs to its old revision and would not resolve).
    if selection is not None or any(
        name in changes and changes[name] != getattr(finding, name) for name in ANCHOR_FIELDS
    ):
        revision = finding.session.doc.latest_revision()
        if revision is None:
            raise Invalid("anchor_exact", "The doc has no revision to anchor to.")
        if selection is not None:
            # A new selection replaces the anchor whatever anchor_* fields came with it.
            anchor = resolve_anchor(revision=revision, selection=selection)
        else:
            anchor = resolve_anchor(
                revision=revision,
                exact=changes.get("anchor_exact", ""),
                prefix=changes.get("anchor_prefix", ""),
                suffix=changes.get("anchor_suffix", ""),
                start=changes.get("anchor_start"),
                end=changes.get("anchor_end"),
            )
        if anchor is None:
            finding.revision = None
            finding.anchor_exact = finding.anchor_prefix = finding.anchor_suffix = ""
            finding.anchor_start = finding.anchor_end = None
        else:
            set_anchor(finding, revision, anchor)
        finding.orphaned = False
    finding.full_clean(exclude=["session", "author", "revision"])
    finding.version += 1
    finding.save()
    if not finding.is_draft and ("title" in changes or "body" in changes):
        # A name already notified about this finding is not notified again.
        notifications.notify_mentions(session=finding.session, actor=finding.author, finding=finding,
                                      text=f"{finding.title}\n{finding.body}")
    publish_finding(finding, "finding.updated")
    return finding


@transaction.atomic
def finding_delete(*, finding: Finding, version: int | None = None) -> None:
    """Delete a finding (and its replies); with ``version``, only if it is current."""
    finding = Finding.objects.select_for_update().get(pk=finding.pk)
    if version is not None and version != finding.version:
        raise Conflict(
            f"The finding was changed meanwhile (version {finding.version}, you sent {version}).",
            current=finding.version,
        )
    session_id, finding_id, draft = finding.session_id, finding.pk, finding.is_draft
    finding.delete()
    if draft:  # nobody else ever heard of it; whose turn it is may have changed
        realtime.session_event(session_id, "turn.changed", {})
        return
    realtime.session_event(session_id, "finding.deleted", {"finding": {"id": finding_id, "session": session_id}})


@transaction.atomic
def findings_reorder(
    *, session: ReviewSession, severity: str, ordered_ids: Sequence[int], user: Any = None
) -> list[Finding]:
    """Put the findings of one bucket in the given order (the rank pass).

    ``ordered_ids`` may move findings into the bucket from another one; the
    bucket's findings left out keep their relative order after the listed ones.
    With ``user``, only the findings they may see take part: published ones and
    their own drafts. Someone else's draft is neither moved nor answered; its id
    gets the same 400 as an id of no finding.
    """
    if severity not in SEVERITY_ORDER:
        raise Invalid("severity", f"Unknown bucket {severity!r}; use one of {', '.join(SEVERITY_ORDER)}.")
    if len(set(ordered_ids)) != len(ordered_ids):
        raise Invalid("ids", "An id is listed twice.")
    findings = Finding.objects.filter(session=session)
    if user is not None:
        findings = findings.filter(Q(published_at__isnull=False) | Q(author_id=user.pk))
    listed = {f.pk: f for f in findings.select_for_update().filter(pk__in=ordered_ids)}
    missing = [i for i in ordered_ids if i not in listed]
    if missing:
        raise Invalid("ids", f"Not findings of this session: {', '.join(map(str, missing))}.")
    rest = findings.filter(severity=severity).exclude(pk__in=ordered_ids).order_by("position", "id")
    ordered = [listed[i] for i in ordered_ids] + list(rest)
    changed: list[Finding] = []
    for position, finding in enumerate(ordered):
        if finding.position != position or finding.severity != severity:
            finding.position = position
            finding.severity = severity
            finding.version += 1
            finding.save(update_fields=["position", "severity", "version", "updated_at"])
            publish_finding(finding, "finding.updated")
            changed.append(finding)
    return ordered


@transaction.atomic
def reply_create(*, finding: Finding, author: User, body: str) -> FindingReply:
    """Add a reply to a finding's thread; viewers see the finding updated.

    A reviewer's reply is a draft until they publish their review; the doc's
    authors answer at once, and so does everyone in a session that files
    directly.
    """
    if not body.strip():
        raise Invalid("body", "A reply needs some text.")
    if finding.merged_into_id is not None:
        raise Invalid("finding", f"This finding was merged into finding {finding.merged_into_id}; reply there.")
    session = finding.session
    direct = session.file_directly or session.is_author(author)
    reply = FindingReply.objects.create(
        finding=finding, author=author, body=body, published_at=timezone.now() if direct else None
    )
    if direct:
        notifications.notify_mentions(session=session, actor=author, finding=finding, reply=reply, text=body)
        publish_finding(finding, "finding.updated")
    else:
        realtime.session_event(session.pk, "turn.changed", {})
    return reply


def publish_finding(finding: Finding, event: str) -> None:
    """Tell the session's viewers that ``finding`` was created or updated (after commit).

    Drafts are nobody else's business: their changes are not announced (only
    ``turn.changed``, with nothing in it, since who holds drafts is shown as
    whose turn it is), and the review that publishes them announces them all at once.
    """
    if finding.is_draft:
        realtime.session_event(finding.session_id, "turn.changed", {})
        return
    realtime.session_event(finding.session_id, event, {"finding": finding_representation(finding)})
