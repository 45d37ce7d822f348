"""Celery tasks: each takes ids and calls a service.

Run tasks are acknowledged late and rejected when their worker dies, so the
broker hands a run whose worker was killed to another worker, which resumes it
(see :mod:`reviewer.runs.player`). Every worker also runs the stale-run
watchdog every two seconds, so a run whose worker vanished without the broker
noticing is marked failed within half a minute, and a sweep whose last worker
died is finished; the watchdog also announces the worker's run slots and
dispatches waiting runs to free ones (see :mod:`reviewer.runs.handoff`).
The beat process (``celery beat``, started by ``serve``) sends
:func:`reap_stalled` and :func:`dispatch_runs` on a schedule too, so neither
hangs on any one worker's timer. Reads (GET requests, websocket connections) never do
this work.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import bootsteps, shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import OperationalError, close_old_connections

from reviewer.celery import app
from reviewer.fleets import break_advice as advice
from reviewer.fleets.analysis_record import (
    analysis_compute,
    analysis_refuse_slow,
    placement_compute,
    placement_refuse_slow,
)
from reviewer.fleets.traces import trace_upload_process, traces_cleanup
from reviewer.review.notifications import send_digests
from reviewer.review.services import reanchor_revision as reanchor
from reviewer.review.services import reanchoring_representation, reanchors_resume
from reviewer.runs.fair_order import announce_worker_slots, withdraw_worker_slots
from reviewer.runs.handoff import runs_dispatch
from reviewer.runs.player import run_play
from reviewer.runs.services import runs_reap_stale, runs_requeue_lost
from reviewer.runs.sweeps import sweep_finish as finish
from reviewer.runs.sweeps import sweeps_finish_stalled

log = logging.getLogger(__name__)

WATCHDOG_EVERY_S = 2.0
#: Wall time a fleet's analysis may take in a docs worker before it is given up.
ANALYSIS_TIME_LIMIT_S = 300


@shared_task(
    name="reviewer.run_emulation",
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=3600,
    time_limit=3630,
)
def run_emulation(self: Any, run_id: int, dispatch: int | None = None) -> str:
    """Play emulator run ``run_id`` to its end; return its final status.

    ``dispatch`` is the run's hand-off number when the task was sent; a task
    superseded by a later hand-off returns without starting the run.
    """

    return run_play(run_id=run_id, worker=self.request.hostname or "", dispatch=dispatch)


@shared_task(name="reviewer.dispatch_runs", soft_time_limit=30, time_limit=60)
def dispatch_runs() -> list[int]:
    """Hand waiting runs to free worker slots, fairly between users; the ids handed over."""

    return runs_dispatch()


@shared_task(name="reviewer.sweep_finish", acks_late=True, soft_time_limit=60, time_limit=90)
def sweep_finish(sweep_id: int) -> str:
    """Gather a sweep's runs into its curve (the callback of sweeps sent as a chord before points were dispatched)."""

    return finish(sweep_id=sweep_id).status


@shared_task(
    name="reviewer.reanchor_revision",
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(OperationalError,),
    retry_backoff=2,
    max_retries=5,
    soft_time_limit=settings.REANCHOR_SOFT_TIME_LIMIT_S,
    time_limit=settings.REANCHOR_TIME_LIMIT_S,
)
def reanchor_revision(revision_id: int, dispatch: int | None = None) -> dict[str, Any]:
    """Move a doc's open findings onto its new revision (idempotent); the revision's re-anchoring state.

    ``dispatch`` is the hand-over number the task was sent with; a copy sent
    before the latest hand-over returns at once.
    """

    return reanchoring_representation(reanchor(revision_id=revision_id, dispatch=dispatch).revision)


@shared_task(name="reviewer.break_advice", acks_late=True, reject_on_worker_lost=True,
             autoretry_for=(OperationalError,), retry_backoff=2, max_retries=5,
             soft_time_limit=600, time_limit=630)
def break_advice(version_id: int) -> bool:
    """Work out and store a fleet config version's break-pass advice; whether it is stored."""
    return advice.break_advice_compute(version_id=version_id) is not None


@shared_task(name="reviewer.fleet_analysis", acks_late=True, reject_on_worker_lost=True,
             autoretry_for=(OperationalError,), retry_backoff=2, max_retries=5,
             soft_time_limit=ANALYSIS_TIME_LIMIT_S, time_limit=ANALYSIS_TIME_LIMIT_S + 30)
def fleet_analysis(version_id: int) -> bool:
    """Work out and store a fleet config version's analysis record, within a time and a
    memory limit; whether a record is stored."""


    try:
        return analysis_compute(version_id=version_id) is not None
    except SoftTimeLimitExceeded:
        analysis_refuse_slow(version_id=version_id, limit_s=ANALYSIS_TIME_LIMIT_S)
        return False


@shared_task(name="reviewer.placement_answer", acks_late=True, reject_on_worker_lost=True,
             autoretry_for=(OperationalError,), retry_backoff=2, max_retries=5,
             soft_time_limit=ANALYSIS_TIME_LIMIT_S, time_limit=ANALYSIS_TIME_LIMIT_S + 30)
def placement_answer(version_id: int, hosts: int) -> bool:
    """Work out and store the placement pass's answer for a fleet config version on
    ``hosts`` hosts, within the analysis's time and memory limits; whether it was solved
    (an answer that says why the puzzle does not apply counts as solved)."""


    try:
        return "refused" not in placement_compute(version_id=version_id, hosts=hosts)
    except SoftTimeLimitExceeded:
        placement_refuse_slow(version_id=version_id, hosts=hosts, limit_s=ANALYSIS_TIME_LIMIT_S)
        return False


@shared_task(name="reviewer.trace_upload", acks_late=True, reject_on_worker_lost=True,
             autoretry_for=(OperationalError,), retry_backoff=2, max_retries=5,
             soft_time_limit=600, time_limit=630)
def trace_upload(upload_id: int) -> str:
    """Check an uploaded trace and make the fleet config version that replays it; the upload's status."""

    return str(trace_upload_process(upload_id=upload_id).status)


@shared_task(name="reviewer.reap_stalled", soft_time_limit=30, time_limit=60)
def reap_stalled() -> dict[str, list[int]]:
    """Fail runs whose worker stopped beating, re-queue queued runs whose task was lost, finish lost sweeps.

    Re-anchorings that stopped making progress are handed over again too.
    """

    reaped = _reap()
    reanchors_resume()
    return reaped


@shared_task(name="reviewer.cleanup_traces", soft_time_limit=600, time_limit=660)
def cleanup_traces() -> int:
    """Remove uploaded trace files nothing names any more; how many were removed."""

    return len(traces_cleanup())


@shared_task(name="reviewer.send_notification_digests", soft_time_limit=300, time_limit=360)
def send_notification_digests() -> int:
    """E-mail the daily digest to users who chose it; how many e-mails went out."""

    return send_digests()


def _reap() -> dict[str, list[int]]:
    # Runs first: a run marked failed here may be the last one a sweep waited for.
    reaped = runs_reap_stale()
    lost = runs_requeue_lost()
    return {"runs": reaped + lost["failed"], "requeued": lost["requeued"], "sweeps": sweeps_finish_stalled()}


class StaleRunWatchdog(bootsteps.StartStopStep):
    """Checks for runs whose worker died (and sweeps left unfinished), every few seconds, in every worker."""

    requires = {"celery.worker.components:Timer"}

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        self.tref = None
        self.hostname = ""
        self.concurrency = 1

    def start(self, worker: Any) -> None:
        """Schedule the check on the worker's timer, and count this worker's slots at once."""
        self.hostname = str(worker.hostname)
        # A worker that does not take run tasks (serve's docs worker) holds no run slots.
        takes_runs = worker.app.conf.task_default_queue in worker.app.amqp.queues.consume_from
        self.concurrency = int(worker.concurrency or 1) if takes_runs else 0
        self.announce()
        self.tref = worker.timer.call_repeatedly(WATCHDOG_EVERY_S, self.check, priority=10)

    def stop(self, worker: Any) -> None:
        """Stop checking; this worker's slots leave the count."""
        if self.tref is not None:
            self.tref.cancel()
            self.tref = None

        try:
            withdraw_worker_slots(self.hostname)
        except Exception:
            log.warning("could not withdraw this worker's run slots", exc_info=True)

    def announce(self) -> None:
        """Tell the hand-off how many runs this worker plays at once (for the next few seconds)."""

        try:
            announce_worker_slots(self.hostname, self.concurrency)
        except Exception:
            log.warning("could not announce this worker's run slots", exc_info=True)

    def check(self) -> None:
        """One pass of the watchdog; errors are logged so the timer keeps running."""


        self.announce()
        try:
            close_old_connections()
            _reap()
            runs_dispatch()
            reanchors_resume()
        except Exception:
            log.warning("stale-run check failed", exc_info=True)


app.steps["worker"].add(StaleRunWatchdog)
