"""``weighted``: push each request to the worker with the highest weighted sum of
scores, each from 0 to 1, with the weights of ``[dispatcher.scorers]`` (by default
prefix 3 and queue 2), as the scheduling profiles of cache-aware inference schedulers
combine their scorers:

* ``prefix``: the share of the request's shared prefix the worker holds cached;
* ``queue``: 1 for the workers with the fewest waiting requests, 0 for those with
  the most, linearly between (all 1 when they are equal);
* ``kv_free``: the share of the worker's KV that running requests and pinned prefix
  blocks leave free (cached blocks no request uses count as free);
* ``running``: 1 for the workers with the fewest running (active) requests, 0 for
  those with the most, linearly between (all 1 when they are equal).

Ties go to the least loaded worker (waiting plus running requests), then the first in
layout order. Continuous batching only; workers are those alive at the last health
check. In a disaggregated model's pools it picks the prefill worker of each arrival
and the decode worker of each handoff with that pool's own weights (a decode
worker's handoffs waiting for room count as waiting). As a composition: the in-pool
and alive filters, the scorers of ``emulator.sim.policies.pipeline.SCORERS`` with the
configured weights, the highest-score picker.
"""

from __future__ import annotations

from emulator.sim.policies.pipeline import BELIEVED_ALIVE, IN_POOL, ComposedPolicy, MaxScore


class Weighted(ComposedPolicy):
    """The highest weighted sum of the prefix, queue, kv_free and running scores."""

    name = "weighted"
    routes_in_pools = True
    uses_scorers = True
    filters = (IN_POOL, BELIEVED_ALIVE)
    picker = MaxScore
