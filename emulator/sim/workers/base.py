"""The worker-model interface: how a worker takes work, how long it runs, and what it
reports.

One worker model serves the whole fleet (``worker_model(sim)``); it owns every worker's
state (the shared ``Fleet.state`` array, idle/busy/dead, plus whatever the model needs)
and the per-model aggregates that frames show. The dispatch policy hands it work
(``assign`` to push to a chosen worker, ``start`` for a worker known to be idle); faults
``kill`` and ``restore`` workers; the engine asks it for frame figures.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from emulator.sim.engine import Engine


class WorkerModel(ABC):
    """Base class of worker models; see the module docstring."""

    #: The scenario's name for this model (``worker.batching``).
    name: ClassVar[str]
    #: It models tokens, a KV cache and steps (the scenario layer's catalog keeps it).
    token_level: ClassVar[bool] = False
    #: Per-model figures this model adds to every frame, in order.
    frame_keys: ClassVar[tuple[str, ...]]
    #: Under ``pull``, idle workers take work lowest index first (else in the order
    #: they became idle).
    idle_lowest_first: ClassVar[bool] = False

    def __init__(self, sim: Engine, models: list[int]) -> None:
        self.sim = sim
        self.fleet = sim.fleet
        #: The per-model figures this fleet's frames carry: ``frame_keys``, or more.
        self.keys: tuple[str, ...] = self.frame_keys
        #: The models (indexes) whose workers this model serves.
        self.models = models

    @abstractmethod
    def is_alive(self, w: int) -> bool:
        """Whether worker ``w`` is alive (the truth, not a dispatcher's belief)."""

    @abstractmethod
    def assign(self, w: int, work: Any) -> None:
        """Push ``work`` to worker ``w``, whatever its state (a dead worker loses it)."""

    @abstractmethod
    def start(self, w: int, work: Any) -> None:
        """Worker ``w`` (alive, with nothing else to do) starts on ``work`` now."""

    def start_first(self, idle: deque[int], work: Any) -> bool:
        """Start ``work`` on the first worker of ``idle`` (alive, with nothing else to
        do), taking it off; False if ``idle`` is empty. A pulling policy offers work
        through this (bound to its queue of idle workers with ``functools.partial``), so
        a model may inline ``start`` here: it runs once per batch at peak load."""
        if not idle:
            return False
        self.start(idle.popleft(), work)
        return True

    @abstractmethod
    def kill(self, w: int) -> bool:
        """Worker ``w`` dies, losing everything it holds; False if it was dead already."""

    @abstractmethod
    def restore(self, w: int) -> bool:
        """Worker ``w`` comes back idle; False if it was alive."""

    @abstractmethod
    def oldest_row(self, model: int) -> int | None:
        """The first store row of ``model`` the workers still refer to (None: none)."""

    def work_held(self, model: int) -> None:  # noqa: B027 (an optional hook: doing nothing is its default)
        """The dispatcher of ``model`` holds work the workers may take (nothing to do
        unless workers take held work at their own pace)."""

    def waiting_in(self, workers: list[int]) -> int:
        """Work waiting at ``workers`` (queued at them, not yet being served)."""
        backlog = self.fleet.backlog
        return int(sum(backlog[w] for w in workers))

    @abstractmethod
    def frame_figures(self, model: int) -> dict[str, Any]:
        """This model's figures for ``model`` at the frame's end (``frame_keys``)."""

    def frame_done(self) -> None:  # noqa: B027 (an optional hook: doing nothing is its default)
        """Every model's figures for the frame were taken."""
