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
worker's handoffs waiting for room count as waiting).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emulator.scenario.specs import DEFAULT_SCORERS
from emulator.sim.policies.prefix_aware import PrefixAware

if TYPE_CHECKING:
    from emulator.sim.engine import Engine
    from emulator.sim.intake import Intake as Dispatcher


class Weighted(PrefixAware):
    """The highest weighted sum of the prefix, queue and kv_free scores."""

    name = "weighted"
    needs_prefix_caches = True
    routes_in_pools = True
    uses_scorers = True

    def __init__(self, sim: Engine, dispatcher: Dispatcher) -> None:
        super().__init__(sim, dispatcher)
        weights = dict(dispatcher.scorers or DEFAULT_SCORERS)
        self.w_prefix = weights.get("prefix", 0.0)
        self.w_queue = weights.get("queue", 0.0)
        self.w_kv = weights.get("kv_free", 0.0)
        self.w_running = weights.get("running", 0.0)

    def pick(self, work: Any) -> int:
        group, prefix, prompt = self.request(work)
        cw = self.cw
        rotation = self.rotation
        # Waiting: a decode worker's handoffs waiting for room wait there too.
        table = cw.workers
        queues = (
            [len(table[w].waiting) + len(table[w].incoming) for w in rotation] if self.w_queue else []
        )
        low = min(queues) if queues else 0
        span = max(queues) - low if queues else 0
        active = [len(table[w].running) for w in rotation] if self.w_running else []
        r_low = min(active) if active else 0
        r_span = max(active) - r_low if active else 0
        best, best_key = -1, (0.0, 0)
        for j, w in enumerate(rotation):
            score = 0.0
            if self.w_prefix:
                score += self.w_prefix * cw.prefix_fraction(w, group, prefix, prompt)
            if self.w_queue:
                score += self.w_queue * (1.0 if span == 0 else (low + span - queues[j]) / span)
            if self.w_kv:
                score += self.w_kv * (1.0 - cw.kv_busy(w))
            if self.w_running:
                score += self.w_running * (
                    1.0 if r_span == 0 else (r_low + r_span - active[j]) / r_span
                )
            key = (score, -cw.load(w))
            if best < 0 or key > best_key:
                best, best_key = w, key
        return best
