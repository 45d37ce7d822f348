"""Pipelined prefill in the analysis (``pipeline_*`` of ``[models.NAME.disaggregated]``).

The group of N stages is reserved for prompts of more than the threshold, so the
prefill pool is two servers: its other workers, which prefill the shorter prompts (the
analysis sizes them as a prefill pool of their own, on the prompt law cut at the
threshold), and the group, which takes the long prompts one after another. A long
prompt holds each stage for the sum of its chunks' stage costs,

    S(P) = sum over chunks of f + (step(chunk) - f) / N

(f the step's fixed cost, as the engine counts it), so the group keeps up while
rate x share x E[S | long] < 1: the pool's total prefill work is unchanged but for the
fixed cost each stage pays again, while a long prompt's latency shrinks to the
pipeline's time, from the same recurrence the engine schedules
(``emulator.sim.workers.pipeline``): about S(P) plus N - 1 chunk times and hops.

The TTFT queue of the group is not modelled as a many-server queue: it is one server
whose service is S. Its saturation counts in the model's capacity only when the long
prompts are more than the share of requests goodput may lose (1 - GOODPUT); below that
share a saturated group costs the long prompts their goal and no more, and the figure
is given beside the capacity (``saturation_qps``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Any

import numpy as np

from emulator.analysis.fleet.steps import StepCost
from emulator.analysis.fleet.workload import SizeLaw, Workload
from emulator.scenario import Scenario
from emulator.scenario.pipeline_checks import activation_bytes

#: Quantile points a cut lognormal law is represented by.
_POINTS = 400


def cut_law(law: SizeLaw, lo: float, hi: float) -> SizeLaw | None:
    """The law of the sizes in (lo, hi], as rows (a lognormal by its quantiles, a
    trace's rows as they are); None when none falls there."""
    if law.rows is not None:
        rows = law.rows[(law.rows > lo) & (law.rows <= hi)]
        if not rows.size:
            return None
        x = rows.astype(np.float64)
        return SizeLaw(float(x.mean()), float(x.std() / x.mean()), rows=rows)
    if law.cv == 0:
        return law if lo < law.mean <= hi else None
    a, b = law.share_at_most(lo), law.share_at_most(hi)
    if b <= a:
        return None
    sigma = math.sqrt(math.log1p(law.cv * law.cv))
    mu = math.log(law.mean) - sigma * sigma / 2
    unit = NormalDist()
    qs = [a + (b - a) * (j + 0.5) / _POINTS for j in range(_POINTS)]
    rows = np.array([max(1.0, round(math.exp(mu + sigma * unit.inv_cdf(min(max(q, 1e-12), 1 - 1e-12)))))
                     for q in qs])
    rows = np.clip(rows, math.floor(lo) + 1, hi).astype(np.int64)
    x = rows.astype(np.float64)
    return SizeLaw(float(x.mean()), float(x.std() / x.mean()), rows=rows)


def _fixed(cost: StepCost) -> float:
    if cost.roof is not None:
        return cost.o
    if cost.table is not None:
        return float(cost.table.step_s(0, 0, 0, 0))
    return cost.spec.step_base_s


def _chunk(cost: StepCost, at: int, c: int) -> float:
    """A step holding one chunk of ``c`` tokens from prompt token ``at``, alone."""
    if cost.roof is not None:
        return max(cost.w + cost.k * (at + c), cost.f * c) + cost.o + cost.m * c
    if cost.table is not None:
        return float(cost.table.step_s(0, 0, c, c * (at + c)))
    s = cost.spec
    return s.step_base_s + s.prefill_token_s * c + s.prefill_attn_s * c * (at + c)


def stage_costs(cost: StepCost, prompt: int, chunk: int, stages: int) -> list[float]:
    """Each chunk's time on one stage."""
    f = _fixed(cost)
    return [f + (_chunk(cost, at, min(chunk, prompt - at)) - f) / stages for at in range(0, prompt, chunk)]


def pipelined_alone_s(cost: StepCost, prompt: int, chunk: int, stages: int, hop: float,
                      act_s: float = 0.0) -> float:
    """A lone prompt's prefill over an idle group: chunk i of c tokens ends on stage s
    at max(its end on stage s - 1 + hop + c act_s, chunk i - 1's end on stage s) + its
    cost (``act_s``: a token's activations over the stage link)."""
    costs = stage_costs(cost, prompt, chunk, stages)
    sizes = [min(chunk, prompt - at) for at in range(0, prompt, chunk)]
    ends = [0.0] * len(costs)
    for s in range(stages):
        last = 0.0
        for i, c in enumerate(costs):
            last = max(last, ends[i] + (hop + sizes[i] * act_s if s else 0.0)) + c
            ends[i] = last
    return ends[-1]


def longest_within(goal: float, alone: Any, hi: int = 4_000_000) -> int:
    """The longest prompt whose lone prefill ``alone(P)`` is within ``goal`` (0: none)."""
    if alone(1) > goal:
        return 0
    lo = 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if alone(mid) <= goal:
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass(frozen=True)
class PipelineAnalysis:
    """A model's pipeline group: what it takes, what it costs and what it saves."""

    stages: int
    threshold_tokens: int
    chunk_tokens: int
    hop_s: float
    act_s_per_token: float  # a token's activations over the stage link (0: no link given)
    share: float  # of the model's requests, those the group prefills
    mean_prompt: float  # their mean prompt
    stage_s: float  # E[S | long]: one stage's busy time a long prompt
    saturation_qps: float | None  # the model's QPS at which the group is busy all the time
    binds: bool  # the saturation bounds the model's capacity (share > 1 - GOODPUT)
    example_tokens: int  # a long prompt shown alone: the mean long one
    example_alone_s: float  # ... its prefill on one worker
    example_pipelined_s: float  # ... and over the idle group
    longest_alone: int  # the longest prompt one worker prefills alone within the TTFT goal
    longest_pipelined: int  # ... and the group
    beyond_alone: float  # share of prompts past longest_alone
    beyond_pipelined: float

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def analyse_pipeline(scenario: Scenario, name: str, load: Workload, cost: StepCost,
                     goodput: float) -> PipelineAnalysis | None:
    """Model ``name``'s pipeline group (None: it has none)."""
    split = scenario.models[name].disaggregated
    if split is None or not split.pipeline_threshold_tokens:
        return None
    n, hop = split.pipeline_workers, split.pipeline_hop_s
    act = 0.0
    if split.pipeline_link_gb_s:
        per_token = activation_bytes(scenario.models[name])
        act = 0.0 if per_token is None else per_token / (split.pipeline_link_gb_s * 1e9)
    chunk = split.pipeline_chunk_tokens or cost.spec.max_batched_tokens
    low = max(split.pipeline_threshold_tokens, split.decider_threshold_tokens)
    share = 1.0 - load.prompt.share_at_most(low)
    long = cut_law(load.prompt, low, math.inf)
    stage = 0.0
    if long is not None and long.rows is not None:
        stage = float(np.mean([sum(stage_costs(cost, int(p), chunk, n)) for p in long.rows]))
    elif long is not None:
        stage = sum(stage_costs(cost, max(1, round(long.mean)), chunk, n))
    saturation = 1.0 / (share * stage) if share > 0 and stage > 0 else None
    example = max(low + 1, round(long.mean)) if long is not None else low + 1
    goal = scenario.slo.ttft_s
    alone = float(cost.prefill_alone_s(example))
    piped = pipelined_alone_s(cost, example, chunk, n, hop, act)
    if goal is not None:
        one = longest_within(goal, lambda p: cost.prefill_steps(p))
        many = longest_within(goal, lambda p: pipelined_alone_s(cost, p, chunk, n, hop, act))
    else:
        one = many = 0
    return PipelineAnalysis(
        stages=n, threshold_tokens=split.pipeline_threshold_tokens, chunk_tokens=chunk, hop_s=hop,
        act_s_per_token=act,
        share=share, mean_prompt=long.mean if long is not None else 0.0, stage_s=stage,
        saturation_qps=saturation, binds=share > 1 - goodput, example_tokens=example,
        example_alone_s=alone, example_pipelined_s=piped, longest_alone=one, longest_pipelined=many,
        beyond_alone=1.0 - load.prompt.share_at_most(one) if goal is not None else 0.0,
        beyond_pipelined=1.0 - load.prompt.share_at_most(many) if goal is not None else 0.0,
    )


def short_workload(load: Workload, split_low: int, threshold: int) -> Workload | None:
    """The workload the prefill pool's other workers see: prompts in (``split_low``,
    ``threshold``] (``split_low`` the decider's threshold)."""
    law = cut_law(load.prompt, split_low, threshold)
    return None if law is None else replace(load, prompt=law)
