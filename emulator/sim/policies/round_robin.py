"""``round_robin``: push each closed batch to the next worker in rotation, busy or not
(the seed doc's dispatcher). A busy worker's batches wait in its private queue while
the next worker in rotation may sit idle."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emulator.sim.policies.base import PushPolicy

if TYPE_CHECKING:
    from emulator.sim.engine import Engine
    from emulator.sim.intake import Intake as Dispatcher


class RoundRobin(PushPolicy):
    """Cyclic over the workers alive at the last health check."""

    name = "round_robin"
    routes_in_pools = True
    alike_under_constant = "pull"

    def __init__(self, sim: Engine, dispatcher: Dispatcher) -> None:
        super().__init__(sim, dispatcher)
        self.next = 0

    def pick(self, work: Any) -> int:
        rotation = self.rotation
        w = rotation[self.next % len(rotation)]
        self.next = (self.next + 1) % len(rotation)
        return w

    def peek(self, work: Any) -> int:
        return self.rotation[self.next % len(self.rotation)]

    def rotation_changed(self, alive: list[int]) -> None:
        self.next = self.next % len(alive) if alive else 0
