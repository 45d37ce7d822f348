"""``least_loaded``: push each closed batch (or request, under continuous batching) to
the worker with the fewest this dispatcher pushed to it and has not heard back about
(lowest index on ties): under continuous batching, its waiting plus running requests.

The count is the dispatcher's own view, not the worker's truth: a worker found dead at
a health check counts as infinitely loaded, and one found restored starts again at 0.
As a composition: the in-pool and alive filters, no scorer, the least-outstanding
picker (``emulator.sim.policies.pipeline.LeastOutstanding``).
"""

from __future__ import annotations

from emulator.sim.policies.pipeline import BELIEVED_ALIVE, IN_POOL, ComposedPolicy, LeastOutstanding


class LeastLoaded(ComposedPolicy):
    """Fewest outstanding pushed batches first."""

    name = "least_loaded"
    routes_in_pools = True
    filters = (IN_POOL, BELIEVED_ALIVE)
    picker = LeastOutstanding
