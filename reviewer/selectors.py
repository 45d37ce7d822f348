"""Shared reads: who may see what, and the queries more than one entry point makes.

Views, the REST API, the websocket consumers, the exports and the tasks read
through these functions, so each visibility rule is written once:

- a review session is visible to its owner, its reviewers and staff;
- a doc or a fleet config to its owner, the participants of sessions that use
  it, and staff;
- a finding to whoever may see its session;
- a run or a sweep to the participants of its session, or, when it belongs to
  no session, to the user who started it; staff see all.

Anything a user may not see answers 404 wherever it is asked for, so an
outsider cannot learn that it exists. Nothing here writes.
"""

from __future__ import annotations

from typing import Any, TypeVar

from django.db.models import Case, IntegerField, Model, Q, QuerySet, Value, When

from reviewer.models.review import (
    SEVERITY_ORDER,
    DesignDoc,
    Finding,
    FindingStatus,
    FleetConfig,
    ReviewSession,
)
from reviewer.models.runs import FINAL_STATUSES, EmulatorRun, RunFrame, RunStatus, Sweep

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
    return qs.filter(Q(owner=user) | Q(reviewers=user)).distinct()


def _owned_or_in_a_session(qs: QuerySet[M], user: Any) -> QuerySet[M]:
    """Rows of ``qs`` (docs or fleet configs) that ``user`` owns or meets in a session."""
    if not _signed_in(user):
        return qs.none()
    if user.is_staff:
        return qs
    return qs.filter(Q(owner=user) | Q(sessions__owner=user) | Q(sessions__reviewers=user)).distinct()


def docs_visible_to(user: Any) -> QuerySet[DesignDoc]:
    """Docs ``user`` owns or reviews in a session (all of them for staff)."""
    return _owned_or_in_a_session(DesignDoc.objects.all(), user)


def fleet_configs_visible_to(user: Any) -> QuerySet[FleetConfig]:
    """Fleet configs ``user`` owns or that a session of theirs uses (all for staff)."""
    return _owned_or_in_a_session(FleetConfig.objects.all(), user)


def findings_visible_to(user: Any) -> QuerySet[Finding]:
    """Findings of the sessions ``user`` may see."""
    return Finding.objects.filter(session__in=sessions_visible_to(user))


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


def frames_after(run_id: int, after: int, *, limit: int = FRAMES_PER_READ) -> list[dict[str, Any]]:
    """Stored frames of a run with index > ``after``, in order, at most ``limit``."""
    rows = RunFrame.objects.filter(run_id=run_id, i__gt=after).order_by("i").values_list("data", flat=True)
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
    from reviewer.run_queue import queue_positions

    return queue_positions()


def doc_reanchoring(doc: Any) -> dict[str, Any]:
    """How far moving the doc's open findings onto its latest revision got: status, done, total."""
    latest = doc.latest_revision()
    if latest is None:
        return {"status": "done", "done": 0, "total": 0}
    return {"status": latest.reanchor_status, "done": latest.reanchor_done, "total": latest.reanchor_total}


def pending_revision_number(doc_id: int) -> int | None:
    """The newest revision of the doc whose findings are still being moved onto it, if any."""
    from reviewer.models.review import DocRevision, ReanchorStatus

    return (DocRevision.objects.filter(doc_id=doc_id, reanchor_status=ReanchorStatus.PENDING)
            .order_by("-number").values_list("number", flat=True).first())
