"""``least_loaded``: push each closed batch (or request, under continuous batching) to
the worker with the fewest this dispatcher pushed to it and has not heard back about
(lowest index on ties): under continuous batching, its waiting plus running requests.

The count is the dispatcher's own view, not the worker's truth: a worker found dead at
a health check counts as infinitely loaded, and one found restored starts again at 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from emulator.sim.policies.base import PushPolicy

if TYPE_CHECKING:
    from emulator.sim.engine import Engine
    from emulator.sim.intake import Intake as Dispatcher


class LeastLoaded(PushPolicy):
    """Fewest outstanding pushed batches first."""

    name = "least_loaded"
    routes_in_pools = True
    counts_done = True

    def __init__(self, sim: Engine, dispatcher: Dispatcher) -> None:
        super().__init__(sim, dispatcher)
        self.outstanding = np.zeros(len(dispatcher.workers))
        for local, w in enumerate(dispatcher.workers):
            if not self.workers.is_alive(w):  # an autoscaler's parked slot
                self.outstanding[local] = np.inf

    def pick(self, work: Any) -> int:
        local = int(np.argmin(self.outstanding))
        self.outstanding[local] += 1
        return self.dispatcher.workers[local]

    def peek(self, work: Any) -> int:
        return self.dispatcher.workers[int(np.argmin(self.outstanding))]

    def work_done(self, w: int) -> None:
        local = self.local_index[w]
        if np.isfinite(self.outstanding[local]) and self.outstanding[local] > 0:
            self.outstanding[local] -= 1

    def rotation_changed(self, alive: list[int]) -> None:
        known, live = set(self.rotation), set(alive)
        for local, w in enumerate(self.dispatcher.workers):
            if w not in live:
                self.outstanding[local] = np.inf
            elif w not in known:
                self.outstanding[local] = 0.0
