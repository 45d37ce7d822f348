"""The hand-off: gives waiting runs to the broker, one per free worker slot, fairly between users.

Runs stay ``queued`` in the database until a slot frees; then the hand-off
gives over as many as there are free slots, in the order of
:func:`reviewer.runs.fair_order.fair_order`. It runs when a run or sweep is queued
(a ``dispatch_runs`` task), when a run ends (in the worker that played it),
in every worker's watchdog every few seconds and from the beat, so a lost
trigger costs a few seconds, never a run. Two hand-offs never give out the
same slot: each takes the database's write lock first (SQLite's immediate
transactions, a PostgreSQL advisory lock) and reads the slots held inside it.
"""

from __future__ import annotations

import logging

from django.db import connection, transaction
from django.utils import timezone

from reviewer.models.runs import EmulatorRun, RunStatus
from reviewer.runs import broker
from reviewer.runs import fair_order as run_queue
from reviewer.runs.services import hand_to_broker

log = logging.getLogger(__name__)

# Any constant: the key of PostgreSQL's transaction-level advisory lock.
DISPATCH_LOCK_KEY = 0x5245_5649  # "REVI"


def _lock_dispatch() -> None:
    """Serialise dispatchers for the rest of the transaction."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [DISPATCH_LOCK_KEY])
    # SQLite: settings open every transaction IMMEDIATE, which already holds the write lock.


def runs_dispatch(*, slots: int | None = None) -> list[int]:
    """Hand waiting runs to the broker for the free worker slots; return their ids."""

    # Most calls (the watchdog's every 2 s) find nothing waiting: no lock, no Redis call then.
    if not EmulatorRun.objects.filter(status=RunStatus.QUEUED, awaiting_slot=True).exists():
        return []
    total = run_queue.worker_slots() if slots is None else slots
    if total <= 0:
        return []
    with transaction.atomic():
        _lock_dispatch()
        free = total - sum(run_queue.holding_slots().values())
        if free <= 0:
            return []
        handed: list[int] = []
        for waiting in run_queue.fair_order(limit=free):
            updated = EmulatorRun.objects.filter(
                pk=waiting.run_id, status=RunStatus.QUEUED, awaiting_slot=True
            ).update(awaiting_slot=False, enqueued_at=timezone.now())
            if updated:
                hand_to_broker(EmulatorRun.objects.get(pk=waiting.run_id))
                handed.append(waiting.run_id)
    if handed:
        log.info("handed runs %s to the workers (%d slots)", handed, total)
    return handed


def dispatch_soon() -> None:
    """Ask a worker to run the hand-off once the current transaction commits (off the request path)."""
    broker.send_task_after_commit("dispatch_runs", [], "a dispatch", "the watchdog and the beat",
                                  expires=DISPATCH_TASK_EXPIRES_S)


# A dispatch request nobody took this soon is dropped: the watchdog has dispatched since.
DISPATCH_TASK_EXPIRES_S = 30.0


def dispatch_quietly() -> list[int]:
    """Dispatch, logging rather than raising a failure (for callers that must not fail with it)."""
    try:
        return runs_dispatch()
    except Exception:
        log.warning("dispatching waiting runs failed", exc_info=True)
        return []
