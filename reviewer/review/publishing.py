"""Publishing a review, and the author's side of a finding.

A reviewer's findings and replies are drafts until :func:`review_publish`
publishes all of theirs in the session at once, with a verdict; the session's
viewers then hear one ``review.published`` event carrying the verdict and the
findings. The doc's authors then answer each finding with a state
(:func:`finding_set_state`).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from reviewer import permissions
from reviewer.errors import Forbidden, Invalid
from reviewer.models.collaboration import FindingState, NotificationKind, Review, Verdict
from reviewer.models.review import DocRevision, Finding, FindingReply, ReviewSession
from reviewer.realtime import groups as realtime
from reviewer.representations import finding_representation, review_representation
from reviewer.review import notifications
from reviewer.review.findings import publish_finding

SUMMARY_MAX_CHARS = 20_000


@transaction.atomic
def review_publish(*, session: ReviewSession, reviewer: User, verdict: str, summary: str = "") -> Review:
    """Publish every draft finding and reply ``reviewer`` holds in ``session``, with a verdict.

    Mentions in what is published notify now (a draft notifies nobody), the
    session's authors hear of the review, and viewers get one event with the
    verdict and the published findings.
    """
    if verdict not in Verdict.values:
        raise Invalid("verdict", f"verdict: use one of {', '.join(Verdict.values)}.")
    if len(summary) > SUMMARY_MAX_CHARS:
        raise Invalid("summary", f"summary: at most {SUMMARY_MAX_CHARS:,} characters; shorten it.")
    now = timezone.now()
    findings = list(
        Finding.objects.select_for_update().filter(session=session, author=reviewer, published_at__isnull=True)
    )
    replies = list(
        FindingReply.objects.select_for_update()
        .select_related("finding")
        .filter(finding__session=session, author=reviewer, published_at__isnull=True)
    )
    review = Review.objects.create(
        session=session, reviewer=reviewer, verdict=verdict, summary=summary,
        findings_published=len(findings), replies_published=len(replies),
    )
    Finding.objects.filter(pk__in=[f.pk for f in findings]).update(published_at=now, publication=review)
    FindingReply.objects.filter(pk__in=[r.pk for r in replies]).update(published_at=now, publication=review)
    # Reply counts in the same query, not one per finding of the event.
    counted = Count("replies", filter=Q(replies__published_at__isnull=False))
    published = list(
        Finding.objects.filter(pk__in=[f.pk for f in findings])
        .select_related("author", "revision", "publication")
        .annotate(reply_total=counted)
    )
    for finding in published:
        notifications.notify_mentions(session=session, actor=reviewer, finding=finding,
                                      text=f"{finding.title}\n{finding.body}")
    for reply in replies:
        notifications.notify_mentions(session=session, actor=reviewer, finding=reply.finding, reply=reply,
                                      text=reply.body)
    label = Verdict(verdict).label.lower()
    notifications.notify_many(
        session.authors.all(), kind=NotificationKind.PUBLISHED, session=session, actor=reviewer, review=review,
        text=f"{reviewer.get_username()} published a review of \u201c{session}\u201d: {label}, "
        f"{len(findings)} finding{'s' if len(findings) != 1 else ''}",
    )
    # Findings that only got replies are shown again with their new reply counts.
    replied = {r.finding_id for r in replies} - {f.pk for f in findings}
    touched = list(
        Finding.objects.filter(pk__in=replied, published_at__isnull=False)
        .select_related("author", "revision", "publication")
        .annotate(reply_total=counted)
    )
    realtime.session_event(session.pk, "review.published", {
        "review": review_representation(review),
        "findings": [finding_representation(f) for f in published + touched],
    })
    return review


# The states an author's answer or a reviewer's resolve sets; "reopened" undoes one.
AUTHOR_STATES = (FindingState.OPEN, FindingState.FIXED, FindingState.WONT_FIX)
REASON_MAX_CHARS = 5_000


@transaction.atomic
def finding_set_state(
    *, finding: Finding, user: Any, state: str, fixed_revision: int | None = None, reason: str = ""
) -> Finding:
    """Set a published finding's state.

    As on a code review, the session's reviewers (its owner included) and the
    doc's authors resolve a thread: ``open``, ``fixed`` (optionally naming the
    doc revision that fixes it) and ``wont_fix`` (with a reason); any of them
    sets ``reopened`` on one fixed or dropped. The finding's reviewer is
    notified of a change made by someone else.
    """
    finding = Finding.objects.select_for_update().select_related("session", "author").get(pk=finding.pk)
    session = finding.session
    if state not in FindingState.values:
        raise Invalid("state", f"state: use one of {', '.join(FindingState.values)}.")
    if finding.is_draft:
        raise Invalid("state", "state: the finding is a draft; publish your review first.")
    if not permissions.can_set_finding_state(user, session):
        raise Forbidden("Only the session's reviewers and the doc's authors resolve or reopen a finding.",
                        field="state")
    if state == FindingState.REOPENED and finding.state not in (FindingState.FIXED, FindingState.WONT_FIX):
        raise Invalid("state", "state: only a fixed or won't-fix finding can be reopened.")
    reason = (reason or "").strip()
    if len(reason) > REASON_MAX_CHARS:
        raise Invalid("reason", f"reason: at most {REASON_MAX_CHARS:,} characters; shorten it.")
    if state == FindingState.WONT_FIX and not reason:
        raise Invalid("reason", "reason: say why the finding will not be fixed.")
    if fixed_revision is not None:
        if state != FindingState.FIXED:
            raise Invalid("fixed_revision", "fixed_revision: only a fixed finding names the revision that fixes it.")
        if not DocRevision.objects.filter(doc_id=session.doc_id, number=fixed_revision).exists():
            raise Invalid("fixed_revision",
                          f"fixed_revision: the doc has no revision {fixed_revision}; name one of its revisions.")
    finding.state = state
    finding.state_reason = reason
    finding.fixed_revision = fixed_revision if state == FindingState.FIXED else None
    finding.state_changed_at = timezone.now()
    finding.version += 1
    finding.save(update_fields=["state", "state_reason", "fixed_revision", "state_changed_at", "version",
                                "updated_at"])
    label = FindingState(state).label.lower()
    if state == FindingState.FIXED and fixed_revision is not None:
        label += f" in revision {fixed_revision}"
    notifications.notify(
        recipient=finding.author, kind=NotificationKind.STATE_CHANGED, session=session, actor=user,
        finding=finding, text=f"{user.get_username()} marked \u201c{finding.title}\u201d {label}",
    )
    publish_finding(finding, "finding.updated")
    return finding
