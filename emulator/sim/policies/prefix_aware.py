"""``prefix_aware``: push each request to the worker that holds the largest share of its
shared prefix in its prefix cache (``worker.prefix_cache``), the least loaded (waiting
plus running requests) on ties, then the first in layout order. A request without a
prefix, or one no worker holds, goes to the least loaded worker.

Like the prefix-cache scorer of cache-aware schedulers, the score is the cached share
of the prefix, here read from the workers' caches as they are at the request's
arrival. Continuous batching only (validation says so). Workers are those alive at the
last health check, as for the other pushing policies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emulator.sim.policies.base import PushPolicy

if TYPE_CHECKING:
    from emulator.sim.engine import Engine
    from emulator.sim.intake import Intake as Dispatcher
    from emulator.sim.workers.continuous import ContinuousWorkers


class PrefixAware(PushPolicy):
    """The largest cached share of the request's prefix; the least loaded on ties."""

    name = "prefix_aware"
    needs_prefix_caches = True
    routes_in_pools = True

    def __init__(self, sim: Engine, dispatcher: Dispatcher) -> None:
        super().__init__(sim, dispatcher)
        self.cw: ContinuousWorkers = self.workers  # type: ignore[assignment]

    def request(self, row: int) -> tuple[int, int, int]:
        """The request's prefix group, prefix tokens and prompt tokens."""
        st = self.dispatcher.store
        i = row - st.base
        return st.group.item(i), st.prefix.item(i), st.tokens.item(i)

    def peek(self, work: Any) -> int:
        return self.pick(work)  # the pick changes nothing

    def pick(self, work: Any) -> int:
        group, prefix, prompt = self.request(work)
        cw = self.cw
        best, best_key = -1, (0.0, 0)
        for w in self.rotation:
            key = (cw.prefix_fraction(w, group, prefix, prompt), -cw.load(w))
            if best < 0 or key > best_key:
                best, best_key = w, key
        return best
