"""The dispatch-policy interface: how one model's dispatcher hands out closed batches.

A policy is made per dispatcher (``policy_class(sim, dispatcher)``). The dispatcher
offers it each closed batch (``offer``): the policy hands it to a worker if it can now,
and otherwise declines, and the dispatcher holds the batch until ``drain`` offers it
again. The worker
model tells the policy when a unit of work it pushed leaves one of the model's workers
(``work_done``: a batch, or a request under continuous batching), when a worker has
nothing left to do (``worker_idle``), dies or comes back. The unit of work is opaque to
a policy: a ``Batch`` under static batching, a request's store row under continuous
batching. Pushing
policies learn which workers are alive only at health checks (``health_check``, every
``dispatcher.health_check_s``), as a real dispatcher does from its probes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from emulator.sim.events import PROXY_HOP_END

if TYPE_CHECKING:
    from emulator.sim.engine import Engine
    from emulator.sim.intake import Intake as Dispatcher


class DispatchPolicy(ABC):
    """Base class of dispatch policies; see the module docstring.

    Subclasses set ``name`` (the scenario's ``dispatcher.policy``) and
    ``health_checked``, and implement ``offer``; the other hooks do nothing by default.
    """

    name: ClassVar[str]
    #: True for policies that push to workers and learn which are alive at health checks.
    health_checked: ClassVar[bool] = False
    #: True for policies that implement ``work_done`` (the call is skipped otherwise: it
    #: comes once per batch or request).
    counts_done: ClassVar[bool] = False
    #: True when workers admit the requests this policy holds at their step starts
    #: (continuous batching), as ``pull`` does.
    workers_take_held: ClassVar[bool] = False
    #: A shortcut for ``worker_idle`` that the worker model may call instead of it
    #: while the dispatcher holds no work (None: always call ``worker_idle``). ``pull``
    #: sets it to the C-level append to its queue of idle workers, which is all
    #: ``worker_idle`` would do then: once per batch at peak load, that saves a call.
    idle_sink: Callable[[int], None] | None = None
    # Traits the scenario layer validates by (``emulator.scenario.catalog``), copied
    # into its catalog when the policy registers.
    #: It routes on prefix caches (continuous workers only).
    needs_prefix_caches: ClassVar[bool] = False
    #: It can route within a disaggregated model's pools.
    routes_in_pools: ClassVar[bool] = False
    #: It sums the scorers of ``[dispatcher.scorers]``.
    uses_scorers: ClassVar[bool] = False
    #: The policy it is identical to when every batch takes one constant time.
    alike_under_constant: ClassVar[str | None] = None

    def __init__(self, sim: Engine, dispatcher: Dispatcher) -> None:
        self.sim = sim
        self.dispatcher = dispatcher
        self.workers = dispatcher.worker_model
        #: Each of this model's workers (fleet indexes) by its index within the model.
        self.local_index = {w: local for local, w in enumerate(dispatcher.workers)}

    def pool_for(self, row: int) -> list[int]:
        """The workers (fleet indexes) request ``row`` would be routed among: its
        pool, whose waiting requests admission control bounds."""
        return self.dispatcher.workers

    def bound_for(self, row: int) -> tuple[int, list[int]]:
        """Admission for request ``row``: the waiting bound of the pool it goes to and
        that pool's workers (a bound of 0: none at the workers; a policy that holds
        requests bounds its held queue instead, at ``hold``)."""
        if self.workers_take_held:
            return 0, self.dispatcher.workers
        return self.dispatcher.queue_limit, self.pool_for(row)

    @abstractmethod
    def offer(self, work: Any) -> bool:
        """Hand ``work`` to a worker if the policy can now; False: the dispatcher keeps
        it (and offers it again at ``drain``)."""

    def work_done(self, w: int) -> None:  # noqa: B027 (an optional hook: doing nothing is its default)
        """A unit of work pushed to worker ``w`` left it (finished, or given up)."""

    def worker_idle(self, w: int) -> None:  # noqa: B027 (an optional hook: doing nothing is its default)
        """Worker ``w`` has nothing left to do; the policy may give it a held batch."""

    def worker_died(self, w: int) -> None:  # noqa: B027 (an optional hook: doing nothing is its default)
        """Worker ``w`` died (everything it held is lost already)."""

    def worker_restored(self, w: int) -> None:  # noqa: B027 (an optional hook: doing nothing is its default)
        """Worker ``w`` came back, idle."""

    def health_check(self) -> None:  # noqa: B027 (an optional hook: doing nothing is its default)
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
        # Workers not serving at the start (an autoscaler's parked slots) are left out.
        self.rotation: list[int] = [w for w in dispatcher.workers if self.workers.is_alive(w)]
        #: Hands a picked worker its work: at once, or ``dispatcher.proxy_hop_s`` later
        #: (the request is then in flight, seen by no worker, and lost if its worker
        #: is dead when it lands).
        self.assign: Callable[[int, Any], None] = self.workers.assign
        self.proxy_hop_s: float = getattr(dispatcher, "proxy_hop_s", 0.0)
        if self.proxy_hop_s > 0:
            self.assign = self._assign_after_hop

    @abstractmethod
    def pick(self, work: Any) -> int:
        """The worker (fleet index) that gets ``work``."""

    def peek(self, work: Any) -> int:
        """The worker ``pick(work)`` would choose now, without choosing it (a
        disaggregated model's decider looks at that worker's prefix cache first)."""
        raise NotImplementedError(f"{self.name} cannot tell its pick in advance")

    def offer(self, work: Any) -> bool:
        if not self.rotation:
            return False  # every worker was dead at the last health check
        self.assign(self.pick(work), work)
        return True

    def _assign_after_hop(self, w: int, work: Any) -> None:
        """``assign`` once the proxy hop has passed."""
        self.sim.queue.schedule(self.sim.now_s + self.proxy_hop_s, PROXY_HOP_END, self.workers.assign, (w, work))

    def health_check(self) -> None:
        alive = [w for w in self.dispatcher.workers if self.workers.is_alive(w)]
        if alive != self.rotation:
            self.rotation_changed(alive)
            self.rotation = alive

    def rotation_changed(self, alive: list[int]) -> None:
        """The health check found ``alive`` instead of ``rotation``: adjust the policy's
        own state (called before ``rotation`` is replaced)."""

