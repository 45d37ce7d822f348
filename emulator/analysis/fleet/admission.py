"""SLO-aware admission in the one analysis: from which load ``admission =
"predicted_ttft"`` starts to refuse arrivals, and what share it admits at the peak.

The pool that admits (a split model's prefill pool, else the model's one pool) is
taken with ``c`` workers and the service times of its prompts (a prefill worker's
prefill times; a whole worker's time per request at its throughput). The rule refuses
an arrival whose predicted wait and own service, with the KV transfer and the decode
worker's first step of a split model, are past ``admission_slack`` x ``slo.ttft_s``.
It refuses by size as well as by load: a long prompt is turned away at a queue a short
one still joins, so ``queueing.admitted_share`` follows the pool's work under the rule
(one queue drained by the c workers together) and gives the share admitted at a load.
Admission *starts* to refuse at the load where ``REFUSED_FROM`` of arrivals are
refused. For a mean-sized prompt the rule acts as a waiting bound of K prompts (the
least j refused, its wait being j + (1 + cs^2) / 2 mean services over c), shown as the
rule's equivalent of ``queue_limit``; the fluid view (every arrival beyond the pool's
throughput refused) gives throughput / peak, which the rule passes by serving the short
prompts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from emulator.analysis.fleet.late_wait import cached_prefix_tokens, late_wait, quantile
from emulator.analysis.fleet.queueing import admitted_share, boundary, prefill_times
from emulator.analysis.fleet.steps import step_cost

if TYPE_CHECKING:
    from emulator.analysis.fleet.analysis import ModelAnalysis
    from emulator.scenario import Scenario

__all__ = ["REFUSED_FROM", "AdmissionAnalysis", "admission_of"]

#: The share of arrivals refused at which admission counts as refusing.
REFUSED_FROM = 0.01


@dataclass(frozen=True)
class AdmissionAnalysis:
    """What the predicted-TTFT rule does to a model's admitting pool."""

    pool: str  # the pool whose arrivals it judges (the model's name when not split)
    limit_s: float  # the TTFT an arrival may be predicted: slack x the goal
    room_s: float  # of it, what the wait and the prompt's own service may take
    bound: int  # K: the prompts waiting at which an arrival is refused
    service_s: float  # a mean prompt's service time at a worker of the pool
    workers: int
    refuses_from_qps: float | None  # the model's load at which REFUSED_FROM of arrivals are refused
    peak_qps: float | None  # the model's peak offered load
    admitted_at_peak: float | None  # the share admitted at the peak (the queue)
    fluid_at_peak: float | None  # the same, fluid: throughput / peak, at most 1
    share: float  # the share of the model's requests that reach the pool
    late_p50_s: float | None = None  # a split prompt's TTFT past the prediction: median
    late_p90_s: float | None = None  # and 90th percentile (``late_wait``)


def admission_of(scenario: Scenario, m: ModelAnalysis) -> AdmissionAnalysis | None:
    """The predicted-TTFT rule's figures for model ``m`` (None: it does not use it)."""
    split = scenario.models[m.name].disaggregated
    role, name = ("prefill", split.prefill_workers) if split is not None else ("whole", None)
    rule, slack = scenario.pool_admission(name)
    goal = scenario.slo.ttft_s
    pool = m.pool(role)
    if rule != "predicted_ttft" or goal is None or pool is None or not pool.workers or m.batching != "continuous":
        return None
    w = pool.worker
    cost = step_cost(scenario, m.name)
    service = float(w.prefill_s) if role == "prefill" and w.prefill_s else (
        1.0 / float(w.throughput_qps) if w.throughput_qps else 0.0)
    if service <= 0:
        return None
    load = m.workload
    times, weights = prefill_times(load, cost, float(w.hit_rate or 0), 0.0, service)
    limit = slack * goal
    room = limit
    if role == "prefill":
        room -= float(m.transfer_s or 0) + float(cost.decode_alone_s(max(1, round(load.prompt.mean)) + 1))
    c = pool.workers
    cs2 = max(0.0, float(np.dot(times * times, weights)) / (service * service) - 1.0)
    # The least j with (j + (1 + cs^2) / 2) service / c + service > room.
    bound = max(1, math.floor((room - service) * c / service - (1.0 + cs2) / 2.0) + 1)
    share = float(pool.traffic_share)
    throughput = c * float(w.throughput_qps) / share if share else None

    goal_room = room - (limit - goal)

    def refused(model_qps: float) -> float:
        return 1.0 - admitted_share(model_qps * share, c, times, weights, room, goal_room)[0]

    top = (throughput or 1.0) * 64
    start: float | None = None
    if refused(top) >= REFUSED_FROM:
        start = boundary(lambda q: refused(q) < REFUSED_FROM, 0.0, top, 60)[1]
    peak = float(m.offered_peak_qps) if m.offered_peak_qps is not None else None
    admitted = fluid = None
    if peak:
        admitted = 1.0 - refused(peak)
        fluid = min(1.0, throughput / peak) if throughput else None
    late: list[float | None] = [None, None]
    decode = m.pool("decode")
    if role == "prefill" and m.transfer_s and decode is not None:
        cached = 0.0 if w.hit_rate is None else cached_prefix_tokens(load, scenario.worker_for(m.name).block_tokens)
        values, shares = late_wait(load, cost, float(w.hit_rate or 0), cached, w.tiers, decode.workers,
                                   float(m.transfer_s) / load.prompt.mean, goal)
        late = [quantile(values, shares, 0.5), quantile(values, shares, 0.9)]
    return AdmissionAnalysis(name or m.name, limit, room, bound, service, c, start, peak, admitted, fluid,
                             share, *late)


def fraction(value: float | None) -> Fraction | None:
    """A figure's float as the numbers pass holds it (None stays None)."""
    return None if value is None else Fraction(value)
