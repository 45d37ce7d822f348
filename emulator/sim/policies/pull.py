"""``pull``: closed batches stay at the dispatcher until a worker is idle; an idle worker
takes the oldest. No worker ever queues privately, and a dead worker simply stops
asking, so pull needs no health checks.

Under continuous batching a request goes at once to an idle worker (the lowest index
first), or else waits in the dispatcher's queue, which busy workers admit from at their
step starts (``workers_take_held``). Under static batching idle workers take work in the
order they became idle."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from emulator.sim.policies.base import DispatchPolicy

if TYPE_CHECKING:
    from emulator.sim.engine import Engine
    from emulator.sim.intake import Intake as Dispatcher


class Pull(DispatchPolicy):
    """Idle workers, in the order they became idle, take the oldest held batch."""

    name = "pull"
    alike_under_constant = "round_robin"
    workers_take_held = True

    def __init__(self, sim: Engine, dispatcher: Dispatcher) -> None:
        super().__init__(sim, dispatcher)
        serving = [w for w in dispatcher.workers if self.workers.is_alive(w)]
        self.idle: deque[int] = deque(serving)
        #: Idle workers as a heap of indexes, when the lowest index goes first.
        self.lowest_first = self.workers.idle_lowest_first
        self.idle_heap: list[int] = sorted(serving) if self.lowest_first else []
        if self.lowest_first:
            self.offer = self._offer_lowest  # type: ignore[method-assign]
        #: Puts an idle worker back: bound once, as it runs once per batch.
        self._add_idle: Callable[[int], None] = (
            partial(heapq.heappush, self.idle_heap) if self.lowest_first else self.idle.append
        )
        self.idle_sink = self._add_idle
        if not self.lowest_first:
            # The worker model starts the work on the first idle worker in one call.
            self.offer = partial(self.workers.start_first, self.idle)  # type: ignore[method-assign]

    def offer(self, work: Any) -> bool:
        if not self.idle:
            return False
        self.workers.start(self.idle.popleft(), work)
        return True

    def _offer_lowest(self, work: Any) -> bool:
        """``offer`` when the lowest-index idle worker goes first (chosen at init, as
        ``offer`` runs once per batch or request)."""
        if not self.idle_heap:
            return False
        self.workers.start(heapq.heappop(self.idle_heap), work)
        return True

    def is_idle(self, w: int) -> bool:
        """Whether worker ``w`` waits among the idle ones."""
        return w in self.idle_heap if self.lowest_first else w in self.idle

    def worker_idle(self, w: int) -> None:
        d = self.dispatcher
        if d.paused or not d.closed:
            self._add_idle(w)
            return
        self.workers.start(w, d.take_held())
        if d.queue_limit:
            d.replan()  # the queue is shorter: more arrivals may be admitted

    def worker_died(self, w: int) -> None:
        if w in self.idle:
            self.idle.remove(w)
        if w in self.idle_heap:
            self.idle_heap.remove(w)
            heapq.heapify(self.idle_heap)

    def worker_restored(self, w: int) -> None:
        self._add_idle(w)
        self.dispatcher.drain()
