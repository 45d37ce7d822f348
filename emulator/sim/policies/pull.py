"""``pull``: closed batches stay at the dispatcher until a worker is idle; an idle worker
takes the oldest. No worker ever queues privately, and a dead worker simply stops
asking, so pull needs no health checks."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from emulator.sim.batch import Batch
from emulator.sim.policies.base import DispatchPolicy

if TYPE_CHECKING:
    from emulator.sim.dispatcher import Dispatcher
    from emulator.sim.engine import Engine


class Pull(DispatchPolicy):
    """Idle workers, in the order they became idle, take the oldest held batch."""

    name = "pull"

    def __init__(self, sim: Engine, dispatcher: Dispatcher) -> None:
        super().__init__(sim, dispatcher)
        self.idle: deque[int] = deque(dispatcher.workers)

    def offer(self, batch: Batch) -> bool:
        if not self.idle:
            return False
        self.workers.start(self.idle.popleft(), batch)
        return True

    def worker_idle(self, w: int) -> None:
        d = self.dispatcher
        if d.paused or not d.closed:
            self.idle.append(w)
            return
        self.workers.start(w, d.take_held())
        if d.queue_limit:
            d.replan()  # the queue is shorter: more arrivals may be admitted

    def worker_died(self, w: int) -> None:
        if w in self.idle:
            self.idle.remove(w)

    def worker_restored(self, w: int) -> None:
        self.idle.append(w)
        self.dispatcher.drain()
