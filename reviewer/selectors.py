"""Shared reads: who may see what, and the queries more than one entry point makes.

Views, the REST API, the websocket consumers, the exports and the tasks read
through these functions, so each visibility rule is written once:

- a review session is visible to its owner, its reviewers and staff;
- a doc or a fleet config to its owner, the participants of sessions that use
  it, and staff;
- a finding or a reply to whoever may see its session once it is published,
  and to its author alone while it is a draft;
- a notification to its recipient alone;
- a run or a sweep to the participants of its session, or, when it belongs to
  no session, to the user who started it; staff see all.

Anything a user may not see answers 404 wherever it is asked for, so an
outsider cannot learn that it exists. Nothing here writes.
"""

from __future__ import annotations

from typing import Any, TypeVar

from django.db.models import (
    Case,
    Exists,
    F,
    IntegerField,
    Model,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    TextField,
    Value,
    When,
)
from django.db.models.functions import Cast, Coalesce, Greatest

from reviewer.models.collaboration import FindingState, Notification
from reviewer.models.review import (
    SEVERITY_ORDER,
    DesignDoc,
    DocRevision,
    Finding,
    FindingReply,
    FindingStatus,
    FleetConfig,
    ReanchorStatus,
    ReviewSession,
)
from reviewer.models.runs import FINAL_STATUSES, EmulatorRun, RunFrame, RunStatus, Sweep
from reviewer.runs.fair_order import queue_positions

M = TypeVar("M", bound=Model)

# Frames a consumer sends per database read when it catches a viewer up.
FRAMES_PER_READ = 500


def _signed_in(user: Any) -> bool:
    return bool(getattr(user, "is_authenticated", False))


# --- visibility -------------------------------------------------------------


def sessions_visible_to(user: Any) -> QuerySet[ReviewSession]:
    """Review sessions ``user`` takes part in (all of them for staff)."""
    qs = ReviewSession.objects.all()
    if not _signed_in(user):
        return qs.none()
    if user.is_staff:
        return qs
    return qs.filter(Q(owner=user) | Q(reviewers=user) | Q(authors=user)).distinct()


def participant_ids(session: ReviewSession) -> set[int]:
    """Ids of the users who take part in ``session``: owner, reviewers and authors."""
    ids = {session.owner_id}
    ids.update(session.reviewers.values_list("pk", flat=True))
    ids.update(session.authors.values_list("pk", flat=True))
    return ids


def _owned_or_in_a_session(qs: QuerySet[M], user: Any) -> QuerySet[M]:
    """Rows of ``qs`` (docs or fleet configs) that ``user`` owns or meets in a session."""
    if not _signed_in(user):
        return qs.none()
    if user.is_staff:
        return qs
    return qs.filter(
        Q(owner=user) | Q(sessions__owner=user) | Q(sessions__reviewers=user) | Q(sessions__authors=user)
    ).distinct()


def docs_visible_to(user: Any) -> QuerySet[DesignDoc]:
    """Docs ``user`` owns or reviews in a session (all of them for staff)."""
    return _owned_or_in_a_session(DesignDoc.objects.all(), user)


def fleet_configs_visible_to(user: Any) -> QuerySet[FleetConfig]:
    """Fleet configs ``user`` owns or that a session of theirs uses (all for staff)."""
    return _owned_or_in_a_session(FleetConfig.objects.all(), user)


def linked_doc(config: FleetConfig, user: Any) -> DesignDoc | None:
    """The doc a fleet config names, if ``user`` may see it; None otherwise.

    The link outlives the user's sight of the doc (a reviewer removed from the
    doc's session keeps their own config that names it), so every reader of
    the link goes through here: a doc ``user`` no longer sees is no doc at all,
    its title, its id and its text alike.
    """
    if config.doc_id is None:
        return None
    return docs_visible_to(user).filter(pk=config.doc_id).first()


def findings_visible_to(user: Any) -> QuerySet[Finding]:
    """Findings of the sessions ``user`` may see: published ones, and their own drafts."""
    return published_or_own(Finding.objects.filter(session__in=sessions_visible_to(user)), user)


def published_or_own(qs: QuerySet[M], user: Any) -> QuerySet[M]:
    """Rows of ``qs`` (findings or replies) that are published or that ``user`` wrote.

    A draft is its author's alone, staff included: nobody reads a review
    before its reviewer publishes it.
    """
    if not _signed_in(user):
        return qs.none()
    return qs.filter(Q(published_at__isnull=False) | Q(author=user))


def _in_a_visible_session_or_started(qs: QuerySet[M], user: Any) -> QuerySet[M]:
    """Runs or sweeps of sessions ``user`` may see, and session-less ones they started.

    A run in a session belongs to the session: its starter loses sight of it
    with the session, as every other participant does.
    """
    if not _signed_in(user):
        return qs.none()
    if user.is_staff:
        return qs
    return qs.filter(
        Q(session__in=sessions_visible_to(user).values("pk")) | Q(session__isnull=True, started_by=user)
    )


def runs_visible_to(user: Any) -> QuerySet[EmulatorRun]:
    """Emulator runs ``user`` may watch (all of them for staff)."""
    return _in_a_visible_session_or_started(EmulatorRun.objects.all(), user)


def sweeps_visible_to(user: Any) -> QuerySet[Sweep]:
    """Sweeps ``user`` may watch: the rule for runs."""
    return _in_a_visible_session_or_started(Sweep.objects.all(), user)


# --- reads shared by several entry points ----------------------------------


def recent_runs_for(user: Any, *, limit: int = 10) -> list[EmulatorRun]:
    """The latest single runs (not sweep points) ``user`` may watch, newest first,
    each queued one with its ``queue_position`` (None for the others)."""
    runs = list(
        runs_visible_to(user)
        .filter(sweep__isnull=True)
        .select_related("session", "session__doc")
        .order_by("-id")[:limit]
    )
    places = run_queue_positions() if any(r.status == RunStatus.QUEUED for r in runs) else {}
    for run in runs:
        run.queue_position = places.get(run.pk) if run.status == RunStatus.QUEUED else None  # type: ignore[attr-defined]
    return runs


def frame_texts_after(run_id: int, after: int, *, limit: int = FRAMES_PER_READ) -> list[tuple[int, str]]:
    """Stored frames of a run with index > ``after``, in order, at most ``limit``, as
    (index, the frame's JSON text as the database holds it).

    A viewer catching up sends the text on as it is: no decoding and encoding
    of every stored frame again for every viewer that joins a long run.
    """
    rows = (RunFrame.objects.filter(run_id=run_id, i__gt=after).order_by("i")
            .annotate(text=Cast("data", TextField())).values_list("i", "text"))
    return list(rows[:limit])


def findings_in_report_order(qs: QuerySet[Finding]) -> QuerySet[Finding]:
    """Findings ordered by bucket (fix now, clarify, mention), then position."""
    bucket = Case(
        *[When(severity=s, then=Value(i)) for s, i in SEVERITY_ORDER.items()],
        output_field=IntegerField(),
    )
    return qs.annotate(bucket_order=bucket).order_by("bucket_order", "position", "id")


def orphaned_findings(doc: DesignDoc) -> QuerySet[Finding]:
    """Open findings on ``doc`` whose quote could not be placed in its latest revision."""
    return Finding.objects.filter(session__doc=doc, status=FindingStatus.OPEN, orphaned=True).order_by(
        "session_id", "id"
    )


def sweep_progress(sweep: Sweep) -> dict[str, int]:
    """Points of a sweep whose run is final, out of all its points."""
    statuses = list(sweep.runs.values_list("status", flat=True))
    return {"done": sum(1 for s in statuses if s in FINAL_STATUSES), "total": len(statuses)}


def run_queue_positions() -> dict[int, int]:
    """Each queued run's place in the queue for a worker, 1 for the next to start (fair between users)."""

    return queue_positions()


def doc_reanchoring(doc: Any) -> dict[str, Any]:
    """How far moving the doc's open findings onto its latest revision got: status, done, total."""
    latest = doc.latest_revision()
    if latest is None:
        return {"status": "done", "done": 0, "total": 0}
    return {"status": latest.reanchor_status, "done": latest.reanchor_done, "total": latest.reanchor_total}


def pending_revision_number(doc_id: int) -> int | None:
    """The newest revision of the doc whose findings are still being moved onto it, if any."""

    return (DocRevision.objects.filter(doc_id=doc_id, reanchor_status=ReanchorStatus.PENDING)
            .order_by("-number").values_list("number", flat=True).first())


# --- the author's side and notifications -----------------------------------


def session_turn(session: ReviewSession) -> dict[str, Any]:
    """Whose turn it is in ``session``.

    Reviewers (the owner included) who hold unpublished drafts owe a review.
    The authors are named only while a published ``fix_now`` finding waits on
    them: it is open or reopened, not dropped nor merged into another, and no
    author has replied since it was published, since it was last reopened, or
    since a reviewer's latest published reply to it (a question back to them).
    An author owes no review, so an author's own drafts do not name them.
    """

    author_ids = list(session.authors.values_list("pk", flat=True))
    drafting = set(
        Finding.objects.filter(session=session, published_at__isnull=True)
        .exclude(author_id__in=author_ids).values_list("author__username", flat=True)
    )
    drafting.update(
        FindingReply.objects.filter(finding__session=session, published_at__isnull=True)
        .exclude(author_id__in=author_ids).values_list("author__username", flat=True)
    )
    reviewers = sorted(drafting)
    unanswered = 0
    if author_ids:
        # The latest published word from someone other than the authors.
        asked_again = (FindingReply.objects.filter(finding=OuterRef("pk"), published_at__isnull=False)
                       .exclude(author_id__in=author_ids).order_by("-published_at").values("published_at")[:1])
        waiting = Finding.objects.filter(
            session=session,
            published_at__isnull=False,
            merged_into__isnull=True,
            severity="fix_now",
            state__in=[FindingState.OPEN, FindingState.REOPENED],
        ).exclude(status=FindingStatus.DROPPED).annotate(
            asked_at=Greatest(Coalesce(F("state_changed_at"), F("published_at")),
                              Coalesce(Subquery(asked_again), F("published_at"))))
        # An answer counts when it came after the finding was published, after it
        # was last reopened, and after the reviewers last wrote in its thread.
        answer = FindingReply.objects.filter(
            finding=OuterRef("pk"),
            author_id__in=author_ids,
            published_at__gte=OuterRef("asked_at"),
        )
        unanswered = waiting.exclude(Exists(answer)).count()
    authors = sorted(session.authors.values_list("username", flat=True)) if unanswered else []
    if reviewers and authors:
        turn = "both"
    elif reviewers:
        turn = "reviewers"
    elif authors:
        turn = "authors"
    else:
        turn = "nobody"
    return {"turn": turn, "reviewers_with_drafts": reviewers, "authors": authors,
            "unanswered_fix_now": unanswered}


def notifications_for(user: Any) -> QuerySet[Any]:
    """``user``'s inbox, newest first (nobody else's items, staff included)."""

    if not _signed_in(user):
        return Notification.objects.none()
    return Notification.objects.filter(recipient=user).select_related("actor", "session", "finding")


def unread_count(user: Any) -> int:
    """How many of ``user``'s notifications are unread."""
    return notifications_for(user).filter(read_at__isnull=True).count()
