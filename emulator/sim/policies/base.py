"""The dispatch-policy interface: how one model's dispatcher hands out closed batches.

A policy is made per dispatcher (``policy_class(sim, dispatcher)``). The dispatcher
offers it each closed batch (``offer``): the policy hands it to a worker if it can now,
and otherwise declines, and the dispatcher holds the batch until ``drain`` offers it
again. The worker
model tells the policy when one of the model's workers finishes a batch
(``batch_done``), has nothing left to do (``worker_idle``), dies or comes back. Pushing
policies learn which workers are alive only at health checks (``health_check``, every
``dispatcher.health_check_s``), as a real dispatcher does from its probes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from emulator.sim.batch import Batch

if TYPE_CHECKING:
    from emulator.sim.dispatcher import Dispatcher
    from emulator.sim.engine import Engine


class DispatchPolicy:
    """Base class of dispatch policies; see the module docstring.

    Subclasses set ``name`` (the scenario's ``dispatcher.policy``) and
    ``health_checked``, and implement ``offer``; the other hooks do nothing by default.
    """

    name: ClassVar[str]
    #: True for policies that push to workers and learn which are alive at health checks.
    health_checked: ClassVar[bool] = False
    #: True for policies that implement ``batch_done`` (the call is skipped otherwise:
    #: it comes once per batch).
    counts_done: ClassVar[bool] = False

    def __init__(self, sim: Engine, dispatcher: Dispatcher) -> None:
        self.sim = sim
        self.dispatcher = dispatcher
        self.workers = sim.workers
        #: Each of this model's workers (fleet indexes) by its index within the model.
        self.local_index = {w: local for local, w in enumerate(dispatcher.workers)}

    def offer(self, batch: Batch) -> bool:
        """Hand ``batch`` to a worker if the policy can now; False: the dispatcher keeps
        it (and offers it again at ``drain``)."""
        raise NotImplementedError

    def batch_done(self, w: int) -> None:
        """Worker ``w`` finished a batch (before it takes its next)."""

    def worker_idle(self, w: int) -> None:
        """Worker ``w`` has nothing left to do; the policy may give it a held batch."""

    def worker_died(self, w: int) -> None:
        """Worker ``w`` died (everything it held is lost already)."""

    def worker_restored(self, w: int) -> None:
        """Worker ``w`` came back, idle."""

    def health_check(self) -> None:
        """The periodic health check (only for ``health_checked`` policies)."""


class PushPolicy(DispatchPolicy):
    """A policy that pushes each batch to a worker it picks, busy or not (the batch then
    waits in that worker's private queue), from the workers it believes alive.

    ``rotation`` is that belief: the workers alive at the last health check. A batch
    pushed to a worker that died since is lost.
    """

    health_checked = True

    def __init__(self, sim: Engine, dispatcher: Dispatcher) -> None:
        super().__init__(sim, dispatcher)
        self.rotation: list[int] = list(dispatcher.workers)

    def pick(self, batch: Batch) -> int:
        """The worker (fleet index) that gets ``batch``."""
        raise NotImplementedError

    def offer(self, batch: Batch) -> bool:
        if not self.rotation:
            return False  # every worker was dead at the last health check
        self.workers.assign(self.pick(batch), batch)
        return True

    def health_check(self) -> None:
        alive = [w for w in self.dispatcher.workers if self.workers.is_alive(w)]
        if alive != self.rotation:
            self.rotation_changed(alive)
            self.rotation = alive

    def rotation_changed(self, alive: list[int]) -> None:
        """The health check found ``alive`` instead of ``rotation``: adjust the policy's
        own state (called before ``rotation`` is replaced)."""

