"""The order in which queued runs get a worker: fair between users, not first come first served.

A new run (or a sweep's point) waits in the database (``awaiting_slot``)
until a worker slot is free; the hand-off
(:mod:`reviewer.runs.handoff`) then hands runs to the broker in the
order computed here. The next run goes to the user with the fewest runs
holding a slot (running, or handed to the broker and not yet started); among
those, to the one served least recently (whose last run was handed over
longest ago, never served first); ties go to the user whose oldest waiting
run is oldest. Each user's own runs go in the order they were queued. So one
user who queues many runs, or a sweep of twenty points, takes turns with
everyone else instead of making them wait behind all of it.

The same order gives each waiting run its ``queue_position``.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from datetime import datetime

import redis
from django.conf import settings
from django.db.models import Count, Max

from reviewer.models.runs import EmulatorRun, RunStatus

# Workers say how many runs they play at once under this key prefix, refreshed
# by their watchdog; a worker that stops refreshing drops out of the count.
SLOT_KEY_PREFIX = "reviewer:run-slots:"
SLOT_KEY_TTL_S = 10


@dataclass(frozen=True)
class Waiting:
    """A queued run waiting for a slot: its id and whose it is."""

    run_id: int
    user_id: int


def holding_slots() -> dict[int, int]:
    """Runs holding a worker slot per user: running, or handed to the broker and not started yet."""
    rows = (EmulatorRun.objects.filter(status__in=[RunStatus.RUNNING, RunStatus.QUEUED], awaiting_slot=False)
            .values("started_by_id").annotate(n=Count("pk")))
    return {row["started_by_id"]: row["n"] for row in rows}


def fair_order(*, limit: int | None = None) -> list[Waiting]:
    """The waiting runs in the order the hand-off will give them out (the first ``limit`` of them)."""
    waiting = list(
        EmulatorRun.objects.filter(status=RunStatus.QUEUED, awaiting_slot=True)
        .order_by("created_at", "pk").values_list("pk", "started_by_id")
    )
    if not waiting:
        return []
    per_user: dict[int, list[int]] = {}
    for run_id, user_id in waiting:
        per_user.setdefault(user_id, []).append(run_id)
    holding = holding_slots()
    served = dict(
        EmulatorRun.objects.filter(started_by_id__in=per_user, awaiting_slot=False)
        .values("started_by_id").annotate(last=Max("enqueued_at")).values_list("started_by_id", "last")
    )
    never = datetime.min
    # (runs holding slots, last served, turn, first waiting run id, user): a user
    # handed a run in this order counts as served after every real hand-off.
    heap: list[tuple[int, datetime, int, int, int]] = [
        (holding.get(user_id, 0), (served.get(user_id) or never).replace(tzinfo=None), 0, runs[0], user_id)
        for user_id, runs in per_user.items()
    ]
    heapq.heapify(heap)
    latest = max((entry[1] for entry in heap), default=never)
    order: list[Waiting] = []
    turn = 0
    while heap and (limit is None or len(order) < limit):
        holds, _, _, _, user_id = heapq.heappop(heap)
        runs = per_user[user_id]
        order.append(Waiting(run_id=runs.pop(0), user_id=user_id))
        if runs:
            turn += 1
            heapq.heappush(heap, (holds + 1, latest, turn, runs[0], user_id))
    return order


def queue_positions() -> dict[int, int]:
    """Each queued run's place in the queue, 1 for the next to start.

    Runs already handed to the broker come first, in the order they were
    handed over; the waiting runs follow in the fair order.
    """
    handed = list(
        EmulatorRun.objects.filter(status=RunStatus.QUEUED, awaiting_slot=False)
        .order_by("enqueued_at", "pk").values_list("pk", flat=True)
    )
    ahead = [*handed, *(w.run_id for w in fair_order())]
    return {run_id: place for place, run_id in enumerate(ahead, start=1)}


def worker_slots() -> int:
    """Runs the workers play at once: ``RUN_SLOTS`` when set, else what the live workers say."""
    if settings.RUN_SLOTS > 0:
        return int(settings.RUN_SLOTS)

    client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    try:
        keys = list(client.scan_iter(match=f"{SLOT_KEY_PREFIX}*", count=100))
        values = client.mget(keys) if keys else []
    finally:
        client.close()
    return sum(int(v) for v in values if v is not None)


def announce_worker_slots(hostname: str, concurrency: int) -> None:
    """Say (for ``SLOT_KEY_TTL_S``) that worker ``hostname`` plays ``concurrency`` runs at once."""

    client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.set(f"{SLOT_KEY_PREFIX}{hostname}", int(concurrency), ex=SLOT_KEY_TTL_S)
    finally:
        client.close()


def withdraw_worker_slots(hostname: str) -> None:
    """A worker stopping takes its slots out of the count at once."""

    client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.delete(f"{SLOT_KEY_PREFIX}{hostname}")
    finally:
        client.close()
