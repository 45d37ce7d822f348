"""The event core: a heap of ``(time, priority, seq, kind, a, b)``, a FIFO lane beside
it, and the kinds of event.

Every event is scheduled through ``EventQueue.schedule``; its kind declares where it
runs among events at the same instant (``EventKind.priority``, lower first), and the
sequence counter makes equal times and priorities run in scheduling order, so a run is
a pure function of its scenario and seed. Arrival chunks run first at an instant, then
ordinary events, then request arrivals, then the frame that closes the interval (a fault
at t = 120 belongs to the frame ending at 120).

The part of the simulation that owns a kind registers its handler with ``on``; an
event carries two payload values, handed to the handler as ``handler(a, b)``. The
queue also keeps the simulated clock (``now_s``): the time of the event being handled.

One part may schedule through the queue's lane instead of the heap
(``fifo_scheduler``): a deque of events that part promises to schedule in order of time,
all of one kind. Its events are then in (time, priority, seq) order as appended, so
``run_until`` handles the earlier of the lane's head and the heap's, and the order of
events is exactly the heap-only order while the heap stays small. The static worker
model's completions use it when every batch takes the same constant service time
(``now + B`` never decreases).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from itertools import count
from typing import Any

Handler = Callable[[Any, Any], None]


class EventKind:
    """A kind of event: a name (for errors and traces) and its tie-break priority."""

    __slots__ = ("name", "priority")

    def __init__(self, name: str, priority: int) -> None:
        self.name = name
        self.priority = priority

    def __repr__(self) -> str:
        return f"EventKind({self.name!r}, priority={self.priority})"


#: A chunk of arrivals is generated before anything else happens at its start time.
ARRIVALS = EventKind("arrivals", 0)
#: A dispatcher's open batch is due to close (payload: model index, plan version).
BATCH_CLOSE = EventKind("batch close", 1)
#: A worker finishes its batch (payload: worker index, worker version).
WORKER_DONE = EventKind("worker done", 1)
#: A scheduled fault (payload: the command, ``kill host:2``).
FAULT = EventKind("fault", 1)
#: Pushing dispatchers learn which workers are alive.
HEALTH_CHECK = EventKind("health check", 1)
#: A dispatcher's standby starts serving (payload: model index, the pause's end).
FAILOVER_END = EventKind("failover end", 1)
#: A continuous-batching worker's step (or stretch of decode steps) ends (payload: the
#: worker's state, its version).
STEP_END = EventKind("step end", 1)
#: A pipelined prompt's last chunk ends on its group's last stage (payload: the
#: pipeline group, the request at it).
PIPELINE_DONE = EventKind("pipeline done", 1)
#: A KV transfer lands on its decode worker (payload: the handoff, its version).
KV_TRANSFER_END = EventKind("kv transfer end", 1)
#: A sleeping worker looks at what a handoff brought it (payload: the worker, None):
#: after the other events of the instant, so that every request a prefill step
#: hands to it is there when it starts.
WORKER_WAKE = EventKind("worker wake", 1)
#: A sleeping continuous-batching worker that was handed a request starts its step
#: (payload: the worker's state, its version): after the request arrivals of the
#: instant, so that every request arriving then is in that step, as the engine loop of
#: a server takes every request it has received before it schedules a step.
STEP_START = EventKind("step start", 2)
#: A request reaches its model's router (payload: the router, an event version); after
#: the steps that end at the same instant, so a worker's step ends before it routes.
REQUEST_ARRIVAL = EventKind("request arrival", 2)
#: A request pushed to a worker reaches it after ``dispatcher.proxy_hop_s`` (payload:
#: the worker model's ``assign``, the (worker, request) pair); with the request
#: arrivals of its instant, before the step that takes them.
PROXY_HOP_END = EventKind("proxy hop end", 2)
#: A worker the autoscaler added has loaded its weights and serves from now (payload:
#: the worker, its warm-up version).
WORKER_READY = EventKind("worker ready", 1)
#: The autoscaler reads its metric and scales (payload: none); after the steps and
#: readiness at the same instant, so it sees the workers as they are then.
AUTOSCALE = EventKind("autoscale", 2)
#: A metrics frame closes the interval that ends at its time (payload: frame index).
FRAME = EventKind("frame", 3)

Event = tuple[float, int, int, EventKind, Any, Any]


class EventQueue:
    """A deterministic priority queue of simulation events and their handlers."""

    def __init__(self) -> None:
        #: The pending events, a heap. Read it (its next event is ``heap[0]``; the queue's
        #: next is the earlier of that and ``lane[0]``), never push to it: ``schedule``
        #: and the schedulers below are the only way in.
        self.heap: list[Event] = []
        #: The FIFO lane, in order (see ``fifo_scheduler``); empty while no part owns it.
        #: Read it like the heap (its next event is ``lane[0]``), never append to it.
        self.lane: deque[Event] = deque()
        #: The kind scheduled through the lane (None while no part owns it).
        self.lane_kind: EventKind | None = None
        self._seq = count()
        self._handlers: dict[EventKind, Handler] = {}
        #: Simulated time: the time of the event being handled.
        self.now_s = 0.0
        #: How far the current ``run_until`` goes.
        self.target_s = 0.0
        #: Events handled so far (including those a handler took inline, see ``take_inline``).
        self.processed = 0

    def on(self, kind: EventKind, handler: Handler) -> None:
        """Make ``handler(a, b)`` the handler of events of ``kind``."""
        self._handlers[kind] = handler

    def schedule(self, time_s: float, kind: EventKind, a: Any = None, b: Any = None) -> None:
        """Schedule an event of ``kind`` at ``time_s`` carrying two payload values."""
        heapq.heappush(self.heap, (time_s, kind.priority, next(self._seq), kind, a, b))

    def scheduler(self, kind: EventKind) -> Callable[[float, Any, Any], None]:
        """A function scheduling events of ``kind``: ``schedule(time_s, a, b)`` with the
        kind bound, for a part that schedules one kind very often (a worker model's
        completions) and would otherwise pay ``schedule``'s lookups every time."""
        heap, seq, priority, push = self.heap, self._seq, kind.priority, heapq.heappush

        def schedule(time_s: float, a: Any = None, b: Any = None) -> None:
            push(heap, (time_s, priority, next(seq), kind, a, b))

        return schedule

    def fifo_scheduler(self, kind: EventKind) -> Callable[[float, Any, Any], None]:
        """Like ``scheduler``, for a part that schedules its events of ``kind`` in order
        of time: each ``schedule(time_s, a, b)`` gives a ``time_s`` no earlier than the one
        before (equal times are fine). Those events wait in the queue's lane, a deque, at
        no heap cost, and run in exactly the order the heap would give them (the lane is
        in (time, priority, seq) order, and ``run_until`` takes the earlier head).

        A time earlier than the one before breaks the promise and raises ``ValueError``
        (the event is not scheduled). The queue has one lane: while another part owns it,
        this returns the heap's ``scheduler(kind)``, which takes any order."""
        if self.lane_kind is not None:
            return self.scheduler(kind)
        self.lane_kind = kind
        append, seq, priority = self.lane.append, self._seq, kind.priority
        last = -math.inf  # the time given last

        def schedule(time_s: float, a: Any = None, b: Any = None) -> None:
            nonlocal last
            if time_s < last:
                raise ValueError(
                    f"{kind.name} at {time_s!r} is earlier than the one before ({last!r})"
                )
            last = time_s
            append((time_s, priority, next(seq), kind, a, b))

        return schedule

    def next_time(self) -> float:
        """Time of the earliest event (infinity when empty)."""
        heap, lane = self.heap, self.lane
        if lane and (not heap or lane[0] < heap[0]):
            return lane[0][0]
        return heap[0][0] if heap else float("inf")

    def can_take_inline(self, time_s: float) -> bool:
        """Whether a handler may handle its own next event at ``time_s`` at once instead of
        scheduling it: only when that is due within the current ``run_until`` and strictly
        before every queued event (in the heap and the lane), so the order of events is
        the same either way."""
        return (
            time_s <= self.target_s
            and (not self.heap or time_s < self.heap[0][0])
            and (not self.lane or time_s < self.lane[0][0])
        )

    def take_inline(self, time_s: float) -> None:
        """Advance the clock to an event taken inline (see ``can_take_inline``)."""
        self.now_s = time_s
        self.processed += 1

    def run_until(self, target_s: float) -> None:
        """Handle every event due at or before ``target_s`` in order."""
        self.target_s = target_s
        heap, handlers, pop = self.heap, self._handlers, heapq.heappop
        processed = 0
        if self.lane_kind is None:
            while heap and heap[0][0] <= target_s:
                t, _, _, kind, a, b = pop(heap)
                processed += 1
                self.now_s = t
                handlers[kind](a, b)
            self.processed += processed
            return
        # With the lane: the earlier of its head and the heap's (whole tuples compare, so
        # a tie in time and priority goes to the lower seq, as in the heap alone).
        lane = self.lane
        popleft = lane.popleft
        while True:
            if lane:
                if heap and heap[0] < lane[0]:
                    if heap[0][0] > target_s:
                        break
                    t, _, _, kind, a, b = pop(heap)
                else:
                    if lane[0][0] > target_s:
                        break
                    t, _, _, kind, a, b = popleft()
            elif heap and heap[0][0] <= target_s:
                t, _, _, kind, a, b = pop(heap)
            else:
                break
            processed += 1
            self.now_s = t
            handlers[kind](a, b)
        self.processed += processed

    def __len__(self) -> int:
        return len(self.heap) + len(self.lane)
