"""Celery tasks: each takes ids and calls a service.

Run tasks are acknowledged late and rejected when their worker dies, so the
broker hands a run whose worker was killed to another worker, which resumes it
(see :mod:`reviewer.services.run_player`). Every worker also runs the stale-run
watchdog every two seconds, so a run whose worker vanished without the broker
noticing is marked failed within half a minute, and a sweep whose chord was
lost is finished. The beat process (``celery beat``, started by ``serve``)
sends :func:`reap_stalled` on a schedule too, so the reaping does not hang on
any one worker's timer. Reads (GET requests, websocket connections) never do
this work.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import bootsteps, shared_task

from reviewer.celery import app

log = logging.getLogger(__name__)

WATCHDOG_EVERY_S = 2.0


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
    from reviewer.services.run_player import run_play

    return run_play(run_id=run_id, worker=self.request.hostname or "", dispatch=dispatch)


@shared_task(name="reviewer.sweep_finish", acks_late=True, soft_time_limit=60, time_limit=90)
def sweep_finish(sweep_id: int) -> str:
    """Gather a sweep's runs into its curve (the chord's callback)."""
    from reviewer.services.sweeps import sweep_finish as finish

    return finish(sweep_id=sweep_id).status


@shared_task(name="reviewer.reap_stalled", soft_time_limit=30, time_limit=60)
def reap_stalled() -> dict[str, list[int]]:
    """Fail runs whose worker stopped beating, re-queue queued runs whose task was lost, finish lost sweeps."""
    return _reap()


@shared_task(name="reviewer.send_notification_digests", soft_time_limit=300, time_limit=360)
def send_notification_digests() -> int:
    """E-mail the daily digest to users who chose it; how many e-mails went out."""
    from reviewer.services.notifications import send_digests

    return send_digests()


def _reap() -> dict[str, list[int]]:
    from reviewer.services.runs import runs_reap_stale, runs_requeue_lost
    from reviewer.services.sweeps import sweeps_finish_stalled

    # Runs first: a run marked failed here may be the last one a sweep waited for.
    reaped = runs_reap_stale()
    lost = runs_requeue_lost()
    return {"runs": reaped + lost["failed"], "requeued": lost["requeued"], "sweeps": sweeps_finish_stalled()}


class StaleRunWatchdog(bootsteps.StartStopStep):
    """Checks for runs whose worker died (and sweeps left unfinished), every few seconds, in every worker."""

    requires = {"celery.worker.components:Timer"}

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        self.tref = None

    def start(self, worker: Any) -> None:
        """Schedule the check on the worker's timer."""
        self.tref = worker.timer.call_repeatedly(WATCHDOG_EVERY_S, self.check, priority=10)

    def stop(self, worker: Any) -> None:
        """Stop checking."""
        if self.tref is not None:
            self.tref.cancel()
            self.tref = None

    def check(self) -> None:
        """One pass of the watchdog; errors are logged so the timer keeps running."""
        from django.db import close_old_connections

        try:
            close_old_connections()
            _reap()
        except Exception:
            log.warning("stale-run check failed", exc_info=True)


app.steps["worker"].add(StaleRunWatchdog)
