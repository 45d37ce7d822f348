"""``prefix_aware``: push each request to the worker that holds the largest share of its
shared prefix in its prefix cache (``worker.prefix_cache``), the least loaded (waiting
plus running requests) on ties, then the first in layout order. A request without a
prefix, or one no worker holds, goes to the least loaded worker.

Like the prefix-cache scorer of cache-aware schedulers, the score is the cached share
of the prefix, here read from the workers' caches as they are at the request's
arrival. Continuous batching only (validation says so). Workers are those alive at the
last health check, as for the other pushing policies. As a composition: the in-pool
and alive filters, the prefix scorer alone (weight 1), the highest-score picker.
"""

from __future__ import annotations

from emulator.sim.policies.pipeline import BELIEVED_ALIVE, IN_POOL, ComposedPolicy, MaxScore


class PrefixAware(ComposedPolicy):
    """The largest cached share of the request's prefix; the least loaded on ties."""

    name = "prefix_aware"
    routes_in_pools = True
    filters = (IN_POOL, BELIEVED_ALIVE)
    weights = {"prefix": 1.0}  # noqa: RUF012 (read only: the policy's declaration)
    picker = MaxScore
