"""The one analysis of a fleet config: per model and per pool, what the workers serve,
the floors, the KV concurrency check, the headroom under each host's loss and the
autoscaler's range; for the fleet, the capacity at its split of traffic and the gaps to
the doc's goals.

Every figure the numbers pass, placement, the suggested findings and the exports show
about capacity, headroom and floors is read from one ``FleetAnalysis``, so they cannot
disagree. ``FleetAnalysis.to_dict`` is its stored form (JSON-safe).

A model's pools:

* ``whole``: workers that serve whole requests (every static or continuous model that
  is not split);
* ``prefill`` and ``decode``: a disaggregated model's pools. A request whose prompt is
  at most the decider's threshold goes to the decode pool whole; any other is prefilled
  in the prefill pool and its KV moves to a decode worker over that worker's link, one
  transfer at a time. The model serves the least of what its prefill pool prefills (for
  the share of requests sent there), its decode pool decodes and its decode links move.
  Losing every worker of either pool takes the model down.

Kept as one module: every figure is read from one ``FleetAnalysis``, built in one pass
over the models and their pools; the parts with rules of their own (workload, capacity,
step costs, prefix routing) are modules beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import numpy as np

from emulator.analysis.fleet.capacity import (
    WorkerCapacity,
    continuous_worker,
    direct_group_shares,
    direct_prompts,
    static_worker,
)
from emulator.analysis.fleet.grown import grown_hosts
from emulator.analysis.fleet.late_wait import cached_prefix_tokens, late_wait
from emulator.analysis.fleet.pipeline import PipelineAnalysis, analyse_pipeline, short_workload
from emulator.analysis.fleet.prefix import routes_by_prefix
from emulator.analysis.fleet.queueing import admitted_bound_qps, prefill_times, ttft_bound_qps
from emulator.analysis.fleet.steps import StepCost, step_cost
from emulator.analysis.fleet.workload import Workload, workload_of
from emulator.analysis.placement.core import exact
from emulator.scenario import Scenario
from emulator.scenario.pools import kv_bytes_per_token
from emulator.scenario.traces import load_trace, replay_times

__all__ = ["FleetAnalysis", "HostLoss", "ModelAnalysis", "PoolAnalysis", "analyse"]

#: A trace fleet serves a request well when it waits at most its goal's slack in a
#: fluid queue over the trace's arrivals in bins of this many seconds.
FLUID_BIN_S = 1.0
#: Share of requests that must be served well for a load to count as served.
GOODPUT = 0.9


@dataclass(frozen=True)
class PoolAnalysis:
    """One pool of one model's workers."""

    model: str
    role: str  # whole | prefill | decode
    name: str  # the pool's name (a disaggregated model's pool key; the model's name otherwise)
    workers: int
    hosts: tuple[int, ...]  # the host of each worker, in layout order
    worker: WorkerCapacity
    #: The share of the model's requests that pass through this pool.
    traffic_share: Fraction
    #: What the pool serves, in the model's requests a second (its own requests /
    #: traffic_share); None when no request passes through it.
    capacity_qps: Fraction | None
    #: Workers the hosts start with when the pool has its own autoscaler (its
    #: ``max_workers``, placed on the pool's hosts, are ``workers``); None otherwise.
    start_workers: int | None = None

    def capacity_with(self, workers: int) -> Fraction | None:
        """What the pool serves with ``workers`` workers, in the model's requests a second."""
        return None if self.traffic_share == 0 else workers * self.worker.qps / self.traffic_share

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "role": self.role, "name": self.name, "workers": self.workers,
                "hosts": list(self.hosts), "worker": self.worker.to_dict(),
                "traffic_share": float(self.traffic_share), "capacity_qps": _f(self.capacity_qps),
                "start_workers": self.start_workers}


@dataclass(frozen=True)
class HostLoss:
    """What one host's loss leaves."""

    host: int
    capacity_qps: dict[str, Fraction]  # model -> its capacity with the host down
    workers_left: dict[str, dict[str, int]]  # model -> pool -> workers left
    down: tuple[str, ...]  # models the loss takes down (a pool left with no worker)
    fleet_qps: Fraction  # the fleet's capacity at its split with the host down

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "capacity_qps": {m: float(c) for m, c in self.capacity_qps.items()},
                "workers_left": {m: dict(p) for m, p in self.workers_left.items()},
                "down": list(self.down), "fleet_qps": float(self.fleet_qps)}


@dataclass(frozen=True)
class ModelAnalysis:
    """One model: its pools, capacity, floors, KV check, losses and autoscaler."""

    name: str
    share: Fraction
    batching: str  # static | continuous
    split: bool
    workload: Workload
    pools: tuple[PoolAnalysis, ...]
    capacity_qps: Fraction  # requests a second with its goals met (those a load can meet)
    throughput_qps: Fraction  # requests a second at the concurrency limits, goals aside
    binding_pool: str | None  # the pool (or "transfer") whose capacity is the model's
    binding: str  # what caps the binding pool's workers
    offered_avg_qps: Fraction
    offered_peak_qps: Fraction | None
    peak_how: str
    floors: dict[str, Fraction | None]  # ttft_s, tpot_s, tpot_physical_s, latency_s (minima)
    transfer_s: Fraction | None  # a mean prompt's KV transfer
    link_qps: Fraction | None  # what the decode links move, in the model's requests a second
    decode_direct_share: Fraction  # share of requests the decider sends to decode whole
    kv: dict[str, dict[str, Fraction | None]]  # "avg"/"peak" -> running needed, held, step
    losses: tuple[HostLoss, ...]
    autoscaler: dict[str, Any] | None
    trace_capacity_qps: Fraction | None  # a trace fleet: the highest mean rate it serves well
    inputs: tuple[str, ...]
    notes: tuple[str, ...] = ()
    #: The prefill pool's pipeline group (``pipeline.py``; None: none).
    pipeline: PipelineAnalysis | None = None

    @property
    def workers(self) -> int:
        return sum(p.workers for p in self.pools)

    def pool(self, role: str) -> PoolAnalysis | None:
        return next((p for p in self.pools if p.role == role), None)

    @property
    def worst_loss(self) -> HostLoss | None:
        """The host whose loss leaves this model least (lowest index on ties)."""
        return min(self.losses, key=lambda h: (h.capacity_qps[self.name], h.host), default=None)

    @property
    def utilisation_avg(self) -> Fraction | None:
        """Offered / throughput: how busy the workers are, goals aside."""
        return self.offered_avg_qps / self.throughput_qps if self.throughput_qps > 0 else None

    @property
    def utilisation_peak(self) -> Fraction | None:
        if self.offered_peak_qps is None or self.throughput_qps <= 0:
            return None
        return self.offered_peak_qps / self.throughput_qps

    @property
    def goals_left_out(self) -> tuple[str, ...]:
        """Goals no load meets, left out of ``capacity_qps``."""
        return tuple(dict.fromkeys(g for p in self.pools for g in p.worker.goals_left_out))

    def to_dict(self) -> dict[str, Any]:
        worst = self.worst_loss
        return {
            "name": self.name, "share": float(self.share), "batching": self.batching, "split": self.split,
            "workload": self.workload.to_dict(), "pools": [p.to_dict() for p in self.pools],
            "workers": self.workers, "capacity_qps": float(self.capacity_qps),
            "throughput_qps": float(self.throughput_qps), "binding_pool": self.binding_pool,
            "binding": self.binding, "offered_avg_qps": float(self.offered_avg_qps),
            "offered_peak_qps": _f(self.offered_peak_qps), "peak_how": self.peak_how,
            "utilisation_avg": _f(self.utilisation_avg), "utilisation_peak": _f(self.utilisation_peak),
            "floors": {k: _f(v) for k, v in self.floors.items()}, "transfer_s": _f(self.transfer_s),
            "link_qps": _f(self.link_qps), "decode_direct_share": float(self.decode_direct_share),
            "kv": {k: {kk: _f(vv) for kk, vv in v.items()} for k, v in self.kv.items()},
            "losses": [h.to_dict() for h in self.losses],
            "worst_loss": None if worst is None else {
                "host": worst.host, "capacity_qps": float(worst.capacity_qps[self.name]),
                "down": self.name in worst.down},
            "autoscaler": None if self.autoscaler is None else {
                k: (_f(v) if isinstance(v, Fraction | int | float) else v) for k, v in self.autoscaler.items()},
            "goals_left_out": list(self.goals_left_out),
            "trace_capacity_qps": _f(self.trace_capacity_qps),
            "inputs": list(self.inputs), "notes": list(self.notes),
            **({"pipeline": self.pipeline.to_dict()} if self.pipeline is not None else {}),
        }


@dataclass(frozen=True)
class FleetAnalysis:
    """The whole fleet: its models, and the figures at its split of traffic."""

    scenario: str
    models: dict[str, ModelAnalysis]
    #: Total QPS, at the scenario's split, the fleet serves with every model's goals met
    #: at a steady rate (the first model to saturate sets it).
    capacity_qps: Fraction
    saturates_first: str | None
    offered_avg_qps: Fraction
    offered_peak_qps: Fraction | None
    goals: dict[str, Fraction | None]  # qps (the load to carry), ttft_s, tpot_s
    gaps: dict[str, Fraction | None]  # qps: goal / capacity; ttft, tpot: floor / goal
    losses: tuple[HostLoss, ...]
    hosts: int
    #: The highest mean rate of the traffic as the config offers it (a trace's bursts
    #: included) that the fleet serves with its goals met; capacity_qps otherwise.
    offered_capacity_qps: Fraction
    #: Total QPS at the split the workers complete at their limits, goals aside.
    throughput_qps: Fraction = Fraction(0)
    #: Whether the config states a peak (traffic.peak_qps, or a trace's busiest minute),
    #: rather than constant traffic peaking at its mean.
    peak_given: bool = False
    notes: tuple[str, ...] = field(default=())

    @property
    def utilisation_avg(self) -> Fraction | None:
        """Offered / throughput at the split: how busy the fleet is, goals aside."""
        return self.offered_avg_qps / self.throughput_qps if self.throughput_qps > 0 else None

    @property
    def goals_left_out(self) -> tuple[str, ...]:
        """Goals no load meets on some model, left out of its capacity."""
        return tuple(dict.fromkeys(g for m in self.models.values() for g in m.goals_left_out))

    @property
    def worst_loss(self) -> HostLoss | None:
        """The host whose loss hurts most: one that takes a model down, else the one
        leaving the least capacity at the split (lowest index on ties)."""
        return min(self.losses, key=lambda h: (len(h.down) == 0, h.fleet_qps, h.host), default=None)

    def to_dict(self) -> dict[str, Any]:
        worst = self.worst_loss
        return {
            "scenario": self.scenario, "capacity_qps": float(self.capacity_qps),
            "offered_capacity_qps": float(self.offered_capacity_qps), "saturates_first": self.saturates_first,
            "throughput_qps": float(self.throughput_qps), "goals_left_out": list(self.goals_left_out),
            "peak_given": self.peak_given,
            "offered_avg_qps": float(self.offered_avg_qps), "offered_peak_qps": _f(self.offered_peak_qps),
            "utilisation_avg": _f(self.utilisation_avg), "goals": {k: _f(v) for k, v in self.goals.items()},
            "gaps": {k: _f(v) for k, v in self.gaps.items()}, "hosts": self.hosts,
            "losses": [h.to_dict() for h in self.losses], "worst_loss": None if worst is None else worst.to_dict(),
            "models": {n: m.to_dict() for n, m in self.models.items()}, "notes": list(self.notes),
        }


def _f(value: Fraction | float | None) -> float | None:
    return None if value is None else float(value)


def analyse(scenario: Scenario) -> FleetAnalysis:
    """The analysis of ``scenario``'s fleet as configured."""
    hosts = scenario.expanded_hosts()
    layout = _worker_hosts(scenario)
    models = {name: _model(scenario, name, layout) for name in scenario.models}
    served = {n: m for n, m in models.items() if m.share > 0}
    capacity, first = _at_split({n: m.capacity_qps for n, m in served.items()}, served)
    losses = tuple(_host_loss(scenario, models, h) for h, _, _ in hosts) if len(hosts) > 1 else ()
    models = {n: replace(m, losses=losses) for n, m in models.items()}
    avg = sum((m.offered_avg_qps for m in models.values()), Fraction(0))
    peak = _fleet_peak(scenario, models)
    slo = scenario.slo
    # The load the fleet must carry: the doc's peak, a trace's busiest minute, else the
    # mean of constant traffic (it peaks at its mean).
    goal = peak if peak is not None else avg
    peak_given = scenario.traffic.trace is not None or scenario.traffic.peak_qps > 0
    goals = {"qps": goal, "ttft_s": _opt(slo.ttft_s), "tpot_s": _opt(slo.tpot_s)}
    gaps: dict[str, Fraction | None] = {
        "qps": None if goal <= 0 or capacity <= 0 else goal / capacity,
        "ttft": _worst_floor_gap(models, "ttft_s", slo.ttft_s),
        "tpot": _worst_floor_gap(models, "tpot_s", slo.tpot_s),
    }
    offered_capacity = capacity
    traced = {n: m.trace_capacity_qps for n, m in served.items() if m.trace_capacity_qps is not None}
    if traced:
        offered_capacity, _ = _at_split({n: traced.get(n) or m.capacity_qps for n, m in served.items()}, served)
    throughput, _ = _at_split({n: m.throughput_qps for n, m in served.items()}, served)
    return FleetAnalysis(scenario.name, models, capacity, first, avg, peak, goals, gaps, losses, len(hosts),
                         offered_capacity, throughput, peak_given)


def _opt(value: float | None) -> Fraction | None:
    return None if value is None else exact(value)


def _worker_hosts(scenario: Scenario) -> list[tuple[str, str | None, int]]:
    """Every worker as (model, pool name or None, host), host by host; a pool with its
    own autoscaler at its ``max_workers`` on its pool's free units (``grown_hosts``):
    the top of its range is what the pool serves."""
    groups = [g for g in scenario.hosts for _ in range(g.count)]
    hosts, _ = grown_hosts(scenario, pools_only=True)
    return [(model, groups[h].pool, h) for h, slots in enumerate(hosts) for model, _ in slots]


def _at_split(capacity: dict[str, Fraction], models: dict[str, ModelAnalysis]) -> tuple[Fraction, str | None]:
    """Total QPS at the models' shares before the first saturates, and which one."""
    best: tuple[Fraction, str] | None = None
    for name, cap in capacity.items():
        total = cap / models[name].share
        if best is None or total < best[0]:
            best = (total, name)
    return (Fraction(0), None) if best is None else best


def _roles(scenario: Scenario, name: str) -> list[tuple[str, str]]:
    """The model's pools as (role, pool name)."""
    split = scenario.models[name].disaggregated
    if split is None:
        return [("whole", name)]
    return [("prefill", split.prefill_workers), ("decode", split.decode_workers)]


def _model(scenario: Scenario, name: str, layout: list[tuple[str, str | None, int]]) -> ModelAnalysis:
    spec = scenario.models[name]
    batching = scenario.batching_of(name)
    load = workload_of(scenario, name)
    slo = scenario.slo
    cost = step_cost(scenario, name) if batching == "continuous" else None
    split = spec.disaggregated
    routed = routes_by_prefix(scenario.dispatcher.policy, scenario.dispatcher.scorers,
                              scenario.dispatcher.session_affinity)
    block = scenario.worker_for(name).block_tokens
    sent = direct_prompts(load, split.decider_threshold_tokens, None, block) if split else None
    direct = Fraction(sent.share) if sent is not None else Fraction(0)
    move_s = 0.0  # a mean prompt's KV transfer (the prefill worker holds its KV meanwhile)
    if split is not None:
        per_token = kv_bytes_per_token(spec)
        assert per_token is not None
        move_s = load.prompt.mean * per_token / (split.kv_transfer_gb_s * 1e9)
    pools = []
    decode_shares = None  # the groups' shares of what the decode pool serves whole
    pipe = analyse_pipeline(scenario, name, load, cost, GOODPUT) if cost is not None else None
    for role, pool in _roles(scenario, name):
        hosts = tuple(h for m, p, h in layout if m == name and (split is None or p == pool))
        if pipe is not None and role == "prefill":
            pools.append(_piped_prefill(scenario, name, load, cost, pipe, pool, hosts, routed, move_s, direct))
            continue
        if cost is None:
            worker = static_worker(scenario, name)
        else:
            worker = continuous_worker(scenario, name, load, cost, role=role, pool_workers=len(hosts),
                                       prefix_routed=routed, direct_share=float(direct),
                                       tpot_goal=slo.tpot_s if role != "prefill" else None,
                                       ttft_goal=slo.ttft_s if role != "decode" else None, transfer_s=move_s,
                                       decode_shares=decode_shares, direct=sent)
            if role == "prefill" and split is not None and split.decider == "uncached":
                # Prompts whose tokens not cached on the prefill worker are few skip it.
                sent = direct_prompts(load, split.decider_threshold_tokens,
                                      None if worker.hit_rate is None else float(worker.hit_rate), block)
                direct = Fraction(sent.share) if sent is not None else Fraction(0)
                decode_shares = direct_group_shares(scenario, name, load, cost, len(hosts), routed, move_s,
                                                    split.decider_threshold_tokens)
        share = 1 - direct if role == "prefill" else Fraction(1)
        if role == "prefill" and cost is not None and share > 0:
            links = sum(1 for m, p, _ in layout if split is not None and m == name and p == split.decode_workers)
            worker = _within_ttft(scenario, name, load, cost, worker, len(hosts), move_s, links)
        cap = None if share == 0 else len(hosts) * worker.qps / share
        pools.append(PoolAnalysis(name, role, pool, len(hosts), hosts, worker, share, cap, _started(scenario, pool)))
    transfer_s = link_qps = None
    if split is not None:
        per_token = kv_bytes_per_token(spec)
        assert per_token is not None
        transfer_s = Fraction(load.prompt.mean) * exact(per_token) / (exact(split.kv_transfer_gb_s) * 10**9)
        decode = next(p for p in pools if p.role == "decode")
        # Each decode worker's link moves one transfer at a time.
        link_qps = None if direct == 1 else decode.workers / transfer_s / (1 - direct)
    capacity, binding_pool, binding = _model_capacity(pools, link_qps)
    if pipe is not None and pipe.binds and pipe.saturation_qps is not None and pipe.saturation_qps < capacity:
        capacity, binding_pool, binding = exact(pipe.saturation_qps), "pipeline", "pipeline_stages"
    throughput = min([p.workers * p.worker.throughput_qps / p.traffic_share for p in pools if p.traffic_share > 0]
                     + ([link_qps] if link_qps is not None else []))
    auto = _autoscaler(scenario, name, pools)
    if auto is not None:
        # An autoscaled model grows to its max_workers: the top of its range is what it serves.
        capacity, throughput = auto["max_qps"], auto["max_workers"] * pools[0].worker.throughput_qps
    share = exact(spec.share)
    offered_avg = (exact(scenario.traffic.qps) * share if scenario.traffic.trace is None
                   else Fraction(load.mean_qps or 0.0))
    peak, how = _model_peak(scenario, name, load)
    floors = _floors(scenario, name, load, cost, transfer_s)
    kv = _kv_check(load, cost, pools, offered_avg, peak)
    trace_cap = None
    if load.arrivals_s is not None and capacity > 0:
        trace_cap = _trace_capacity(scenario, load, capacity, floors)
    inputs = tuple(dict.fromkeys(k for p in pools for k in p.worker.inputs))
    notes = tuple(n for p in pools for n in p.worker.notes)
    return ModelAnalysis(
        name, share, batching, split is not None, load, tuple(pools), capacity, throughput,
        binding_pool, binding, offered_avg, peak, how, floors, transfer_s, link_qps, direct, kv, (),
        auto, trace_cap, inputs, notes, pipe)


def _piped_prefill(scenario: Scenario, name: str, load: Workload, cost: StepCost | None,
                   pipe: PipelineAnalysis, pool: str, hosts: tuple[int, ...], routed: bool, move_s: float,
                   direct: Fraction) -> PoolAnalysis:
    """A prefill pool holding a pipeline group: its other workers sized as a prefill
    pool of their own on the prompts up to the threshold (the group's figures are the
    model's ``pipeline``); the pool's workers and hosts are all of them, and its figure
    a worker is what the others serve spread over them all."""
    assert cost is not None
    split = scenario.models[name].disaggregated
    assert split is not None
    others = max(0, len(hosts) - pipe.stages)
    short = short_workload(load, split.decider_threshold_tokens, split.pipeline_threshold_tokens)
    share = Fraction(max(0.0, 1.0 - pipe.share - float(direct)))
    if short is None or share <= 0:
        worker = continuous_worker(scenario, name, load, cost, role="prefill", pool_workers=max(1, others),
                                   prefix_routed=routed, direct_share=float(direct), tpot_goal=None,
                                   ttft_goal=scenario.slo.ttft_s, transfer_s=move_s)
        return PoolAnalysis(name, "prefill", pool, len(hosts), hosts, worker, Fraction(0), None,
                            _started(scenario, pool))
    worker = continuous_worker(scenario, name, short, cost, role="prefill", pool_workers=max(1, others),
                               prefix_routed=routed, direct_share=float(direct), tpot_goal=None,
                               ttft_goal=scenario.slo.ttft_s, transfer_s=move_s)
    rows = short.prompt.rows
    if cost.roof is None and cost.table is None and rows is not None and worker.hit_rate is None:
        # Prompts of several chunks: a prompt of P tokens in chunks c_j of at most the
        # budget K has an attention term sum c_j (start_j + c_j) = (P^2 + sum c_j^2) / 2,
        # about (P^2 + P min(P, K)) / 2, where one packed step's P^2 per prompt is right
        # only for P <= K (the cut law's long ones are several budgets).
        spec, k = cost.spec, cost.spec.max_batched_tokens
        x = rows.astype(np.float64)
        work = float(np.mean(spec.step_base_s * x / k + spec.prefill_token_s * x
                             + spec.prefill_attn_s * (x * x + x * np.minimum(x, k)) / 2))
        per = Fraction(1.0 / work)
        worker = replace(worker, qps=per, throughput_qps=per, prefill_s=Fraction(work),
                         how=f"{work * 1e3:.4g} ms of prefill a prompt (each chunk's attention over the prompt so far)")
    worker = _within_ttft(scenario, name, short, cost, worker, others, move_s)
    worker = replace(worker, how=f"{others} of {len(hosts)} workers (the other {pipe.stages} are the pipeline "
                                 f"group) on prompts up to {split.pipeline_threshold_tokens} tokens: {worker.how}",
                     inputs=tuple(dict.fromkeys([*worker.inputs, f"models.{name}.disaggregated.pipeline_workers",
                                                 f"models.{name}.disaggregated.pipeline_threshold_tokens"])))
    # The pool's figure a worker is its capacity spread over all its workers, the group's
    # included, as placement and the host-loss headroom scale a pool by its workers.
    spread = Fraction(others, len(hosts))
    worker = replace(worker, qps=worker.qps * spread, throughput_qps=worker.throughput_qps * spread)
    cap = len(hosts) * worker.qps / share
    return PoolAnalysis(name, "prefill", pool, len(hosts), hosts, worker, share, cap, _started(scenario, pool))


def _within_ttft(scenario: Scenario, name: str, load: Workload, cost: StepCost, w: WorkerCapacity,
                 workers: int, transfer_s: float, links: int = 0) -> WorkerCapacity:
    """A prefill worker at what it serves with GOODPUT of its prompts getting their
    first token within the TTFT goal, their wait for a prefill worker counted
    (``queueing``): its fluid rate when the goal is met up to it, or no goal is set, or
    not even a light load meets it (another finding says so)."""
    goal = scenario.slo.ttft_s
    if goal is None or not workers or not w.qps or w.prefill_s is None:
        return w
    cached = 0.0 if w.hit_rate is None else cached_prefix_tokens(load, scenario.worker_for(name).block_tokens)
    times, weights = prefill_times(load, cost, float(w.hit_rate or 0), cached, float(w.prefill_s), w.tiers)
    # After its prefill a prompt's KV moves and the decode worker runs its first step.
    slack = goal - transfer_s - float(cost.decode_alone_s(max(1, round(load.prompt.mean)) + 1))
    split = scenario.models[name].disaggregated
    rule, admission_slack = scenario.pool_admission(split.prefill_workers if split is not None else None)
    if rule == "predicted_ttft":
        # The rule refuses what would wait past the goal, long prompts first: what it
        # admits at a load, not the queue, bounds the pool (a waiting bound set beside
        # it acts after it, on the few it admits).
        admit = admission_slack * goal - (goal - slack)
        late = None
        if split is not None:
            # What the rule leaves out of the step that completes a prompt: later
            # arrivals' tier copies and attention in it, and the wait on the decode
            # worker's link behind the prompts it completes (``late_wait``).
            late = late_wait(load, cost, float(w.hit_rate or 0), cached, w.tiers, links,
                             transfer_s / load.prompt.mean, goal)
        bound = admitted_bound_qps(workers, workers * float(w.qps), times, weights, admit, slack, GOODPUT, late)
        if bound is None:
            return w
        per = Fraction(bound / workers)
        how = (f"{float(per):.3g} prompts a second ({float(w.qps):.3g} keep it busy): beyond it the "
               f"predicted-TTFT rule refuses, or serves past the TTFT goal ({goal:g} s), more than "
               f"{1 - GOODPUT:.0%} of arrivals at {workers} prefill workers, long prompts first; {w.how}")
        return replace(w, qps=per, binding="ttft_admission", how=how,
                       inputs=tuple(dict.fromkeys([*w.inputs, "slo.ttft_s", "dispatcher.admission",
                                                   "dispatcher.admission_slack"])))
    limit = scenario.dispatcher.queue_limit
    bound = ttft_bound_qps(workers, workers * float(w.qps), times, weights, slack, limit, GOODPUT)
    if bound is None or bound / workers >= float(w.qps):
        return w
    per = Fraction(bound / workers)
    how = (f"{float(per):.3g} prompts a second of {float(w.qps):.3g} busy: beyond it more than "
           f"{1 - GOODPUT:.0%} of prompts wait past the TTFT goal ({goal:g} s) at {workers} prefill workers"
           + (f" or find {limit} waiting" if limit else "") + f"; {w.how}")
    return replace(w, qps=per, binding="ttft_queue", how=how,
                   inputs=tuple(dict.fromkeys([*w.inputs, "slo.ttft_s", "dispatcher.queue_limit"])))


def _model_capacity(pools: list[PoolAnalysis], link_qps: Fraction | None) -> tuple[Fraction, str | None, str]:
    """The least of the pools' capacities (and the decode links'), and what binds."""
    options = [(p.capacity_qps, p.role if len(pools) > 1 else None, p.worker.binding)
               for p in pools if p.capacity_qps is not None]
    if link_qps is not None:
        options.append((link_qps, "transfer", "kv_transfer"))
    cap, pool, binding = min(options, key=lambda o: o[0])
    return cap, pool, binding


def _model_peak(scenario: Scenario, name: str, load: Workload) -> tuple[Fraction | None, str]:
    t = scenario.traffic
    if t.trace is not None:
        return (None if load.peak_qps is None else Fraction(load.peak_qps)), load.peak_how
    share = exact(scenario.models[name].share)
    if t.peak_qps > 0:
        return exact(t.peak_qps) * share, f"traffic.peak_qps {t.peak_qps:g} x share {float(share):g}"
    if t.shape == "constant":
        return exact(t.qps) * share, "no traffic.peak_qps: constant traffic peaks at its mean"
    return None, "no traffic.peak_qps"


def _fleet_peak(scenario: Scenario, models: dict[str, ModelAnalysis]) -> Fraction | None:
    """The peak the fleet must carry: traffic.peak_qps, a trace's busiest minute, or the
    mean of constant traffic."""
    peaks = [m.offered_peak_qps for m in models.values() if m.offered_peak_qps is not None]
    return sum(peaks, Fraction(0)) if peaks else None


def _worst_floor_gap(models: dict[str, ModelAnalysis], key: str, goal: float | None) -> Fraction | None:
    if goal is None or goal <= 0:
        return None
    values = [f for m in models.values() if m.batching == "continuous" and (f := m.floors.get(key)) is not None]
    return max(values) / exact(goal) if values else None


def _floors(scenario: Scenario, name: str, load: Workload, cost: StepCost | None,
            transfer_s: Fraction | None) -> dict[str, Fraction | None]:
    """The least time a mean request can take: its first token alone (after any proxy
    hop, ``dispatcher.proxy_hop_s``), a decode step of one sequence, and a decode step's physical floor (the weights read once at the GPUs'
    full bandwidth, whatever mbu is assumed)."""
    if cost is None:  # static: every request spends one batch's service time in a worker
        return {"latency_s": static_worker(scenario, name).step_s, "ttft_s": None, "tpot_s": None,
                "tpot_physical_s": None}
    prompt = max(1, round(load.prompt.mean))
    ttft = cost.prefill_alone_s(prompt)
    if transfer_s is not None:
        # The split path: prefill, the KV's move, and the decode worker's first step.
        ttft += transfer_s + cost.decode_alone_s(prompt + 1)
    if scenario.dispatcher.proxy_hop_s:
        ttft += exact(scenario.dispatcher.proxy_hop_s)  # the router-to-worker hop
    roof = scenario.roofline_for(name)
    physical = None if roof is None else roof.weights_read_at_s(1) * roof.mbu  # a mixture: one token's experts
    return {"latency_s": None, "ttft_s": ttft, "tpot_s": cost.token_alone_s(prompt + 1),
            "tpot_physical_s": physical}


def _kv_check(load: Workload, cost: StepCost | None, pools: list[PoolAnalysis], avg: Fraction,
              peak: Fraction | None) -> dict[str, dict[str, Fraction | None]]:
    """Sequences a worker runs at the average and the peak load (Little's law on the
    step model), against what its KV cache holds."""
    if cost is None:
        return {}
    serving = next(p for p in pools if p.role in ("whole", "decode"))
    out: dict[str, dict[str, Fraction | None]] = {}
    for tag, offered in (("avg", avg), ("peak", peak)):
        if offered is None or not serving.workers:
            continue
        per_worker = offered / serving.workers
        running, step = _running_at(load, cost, serving.worker, float(per_worker))
        held = serving.worker.kv_sequences
        out[tag] = {"offered_qps": offered, "per_worker_qps": per_worker, "running": _q(running),
                    "held": None if held is None else Fraction(held), "step_s": _q(step),
                    "kv_tokens": None if running is None else Fraction(running * load.kv_running)}
    return out


def _q(value: float | None) -> Fraction | None:
    return None if value is None else Fraction(value)


def _running_at(load: Workload, cost: StepCost, worker: WorkerCapacity, qps: float) -> tuple[float | None, float | None]:
    """The sequences a worker runs at ``qps`` a second: n = qps (O - 1) x mean step(n),
    where the mean step is the decode step plus the prefills it takes. None beyond the
    worker's throughput (the running set then grows to its limits)."""
    if qps <= 0:
        return 0.0, 0.0
    out = load.output.mean
    if out <= 1 or worker.prefill_s is None:
        return None, None
    prefill = float(worker.prefill_s)
    if qps * prefill >= 1:
        return None, None
    n = 1.0
    for _ in range(500):
        step = cost.token_step(n, load.kv_running) / (1 - qps * prefill)
        new = qps * (out - 1) * step
        if abs(new - n) < 1e-9 * max(1.0, n):
            n = new
            break
        n = new
        if n > 1e7:
            return None, None
    return n, cost.token_step(n, load.kv_running) / (1 - qps * prefill)


def _trace_capacity(scenario: Scenario, load: Workload, capacity: Fraction,
                    floors: dict[str, Fraction | None]) -> Fraction:
    """The highest mean rate, replaying the trace faster or slower over the same run,
    at which a fluid queue served at ``capacity`` keeps GOODPUT of the requests within
    the slack of their goal (the TTFT goal less its floor, else the client's timeout)."""

    t = scenario.traffic
    goal = scenario.slo.ttft_s if scenario.slo.ttft_s is not None else scenario.client.timeout_s
    if goal is None:
        return capacity
    slack = goal - float(floors.get("ttft_s") or 0)
    if slack <= 0:
        return Fraction(0)
    trace = load_trace(t.trace)  # type: ignore[arg-type]
    duration = scenario.duration_s
    bins = max(1, int(math.ceil(duration / FLUID_BIN_S)))
    rate = float(capacity)

    def good(factor: float) -> tuple[float, float]:
        _, times = replay_times(trace, speedup=t.trace_speedup * factor, start_s=t.trace_start_s, loop=True,
                                until_s=duration)
        times = times[times < duration]
        if not times.size:
            return 1.0, 0.0
        counts = np.bincount((times / FLUID_BIN_S).astype(np.int64), minlength=bins)[:bins]
        served = rate * FLUID_BIN_S
        backlog = ok = 0.0
        for a in counts.tolist():
            if backlog / rate <= slack:
                ok += a
            backlog = max(0.0, backlog + a - served)
        return ok / times.size, times.size / duration

    lo, hi = 0.0, 4.0
    while good(hi)[0] >= GOODPUT and hi < 1e4:
        hi *= 2
    for _ in range(40):
        mid = (lo + hi) / 2
        if good(mid)[0] >= GOODPUT:
            lo = mid
        else:
            hi = mid
    return Fraction(good(lo)[1]) if lo > 0 else Fraction(0)


def _started(scenario: Scenario, pool: str) -> int | None:
    """Workers a pool with its own autoscaler starts with on its hosts (None: not scaled)."""
    spec = next((p for p in scenario.pools if p.name == pool), None)
    if spec is None or spec.autoscaler is None:
        return None
    groups = [g for g in scenario.hosts for _ in range(g.count)]
    model = spec.autoscaler.model
    return sum(1 for h, _, slots in scenario.expanded_hosts() if groups[h].pool == pool
               for s in slots if s.model == model)


def _autoscaler(scenario: Scenario, name: str, pools: list[PoolAnalysis]) -> dict[str, Any] | None:
    auto = scenario.autoscaler
    if auto is None or auto.model != name:
        return None
    per = pools[0].worker.qps
    return {"metric": auto.metric, "target": exact(auto.target), "min_workers": auto.min_workers,
            "max_workers": auto.max_workers, "per_worker_qps": per, "min_qps": auto.min_workers * per,
            "max_qps": auto.max_workers * per, "warmup_s": exact(auto.warmup_s)}


def _autoscaled_left(scenario: Scenario, m: ModelAnalysis, host: int) -> int:
    """Workers an autoscaled model can run with ``host`` down: the autoscaler places
    them again on the other hosts' units that no other model's workers take."""
    size = scenario.models[m.name].worker_units
    room = 0
    for index, units, slots in scenario.expanded_hosts():
        if index != host:
            taken = sum(scenario.models[w.model].worker_units for w in slots if w.model != m.name)
            room += (units - taken) // size
    assert m.autoscaler is not None
    return min(int(m.autoscaler["max_workers"]), room)


def _host_loss(scenario: Scenario, models: dict[str, ModelAnalysis], host: int) -> HostLoss:
    """What the loss of ``host`` leaves each model and the fleet (an autoscaled model's
    workers are placed again on the other hosts)."""
    capacity: dict[str, Fraction] = {}
    left: dict[str, dict[str, int]] = {}
    down: list[str] = []
    for name, m in models.items():
        if m.autoscaler is not None:
            n = _autoscaled_left(scenario, m, host)
            capacity[name] = n * m.pools[0].worker.qps
            left[name] = {m.pools[0].name: n}
            if n == 0:
                down.append(name)
            continue
        pools_left = {p.name: p.workers - sum(1 for h in p.hosts if h == host) for p in m.pools}
        caps = [c for p in m.pools if (c := p.capacity_with(pools_left[p.name])) is not None]
        decode = m.pool("decode")
        if m.link_qps is not None and decode is not None and decode.workers:
            caps.append(m.link_qps * pools_left[decode.name] / decode.workers)
        capacity[name] = min(caps) if caps else Fraction(0)
        left[name] = pools_left
        if any(pools_left[p.name] == 0 < p.workers for p in m.pools):
            down.append(name)
    served = {n: m for n, m in models.items() if m.share > 0}
    fleet, _ = _at_split({n: capacity[n] for n in served}, served)
    return HostLoss(host, capacity, left, tuple(down), fleet)
