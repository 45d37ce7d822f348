"""Suggested findings of the numbers pass, drawn from the analysis's figures.

Each finding is a plain dict ``{"pass": "numbers", "severity", "title", "body",
"figures", "inputs"}``: ``figures`` are the keys (``model.key``) it stands on and
``inputs`` the scenario keys behind them, so the page can say which of them the doc
states and which are assumed. A finding is drawn only from what the fleet has (batch
rules for statically batched models, KV and TPOT for continuous ones, pools for split
ones). Severities: ``fix_now`` (the design cannot meet its goal as written),
``clarify`` (a question the doc must answer), ``mention`` (worth a note).
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any

from emulator.analysis.fleet import analyse
from emulator.analysis.fleet.prefix import routes_by_prefix
from emulator.analysis.numbers import show
from emulator.analysis.placement import exact
from emulator.analysis.token_numbers import BINDING_WORDS
from emulator.scenario import Scenario

if TYPE_CHECKING:
    from emulator.analysis.fleet import FleetAnalysis, ModelAnalysis
    from emulator.analysis.numbers import NumbersReport

__all__ = ["suggest"]

ORDER = {"fix_now": 0, "clarify": 1, "mention": 2}


class _Findings:
    def __init__(self, report: NumbersReport) -> None:
        self.report = report
        self.out: list[dict[str, Any]] = []

    def add(self, severity: str, title: str, body: str, figures: list[str], extra_inputs: tuple[str, ...] = ()) -> None:
        inputs: list[str] = []
        for ref in figures:
            model, _, key = ref.partition(".")
            if self.report.has(key, model):
                inputs.extend(self.report.get(key, model).inputs)
        inputs.extend(extra_inputs)
        self.out.append({"pass": "numbers", "severity": severity, "title": title, "body": body,
                         "figures": figures, "inputs": list(dict.fromkeys(inputs))})


def suggest(scenario: Scenario, report: NumbersReport) -> list[dict[str, Any]]:
    """Findings the figures support, most severe first."""
    fa = report.analysis
    assert fa is not None, "the report carries its analysis"
    f = _Findings(report)
    v = report.value
    _gap(f, report, fa)
    _overload(f, scenario, report, fa)
    for m in fa.models.values():
        if m.share > 0 and m.workers == 0:
            f.add("fix_now", f"No {m.name} workers are placed",
                  f"{m.name} takes {float(m.share):g} of the traffic but no host carries a {m.name} worker: every one "
                  "of its requests waits forever.", [f"{m.name}.workers_placed"], ("hosts",))
        elif m.batching == "static" and m.pools[0].worker.limit == 0:
            f.add("fix_now", f"A {m.name} request does not fit in a batch",
                  f"{scenario.models[m.name].tokens} tokens per request is more than max_batch_tokens "
                  f"{scenario.dispatcher.max_batch_tokens}.", [f"{m.name}.requests_per_batch"])
        if m.split:
            _split(f, m)
        if m.batching == "continuous":
            _token(f, scenario, report, m)
    _losses(f, fa)
    _static(f, scenario, report, fa)
    wasted = sum(units - sum(scenario.models[w.model].worker_units for w in slots if w.model in scenario.models)
                 for _, units, slots in scenario.expanded_hosts())
    if wasted > 0 and not scenario.autoscaler:
        f.add("mention", f"{wasted} GPU units are left idle by the placement",
              "Free units that no worker uses; python -m emulator place shows the layouts and what each wastes.",
              ["fleet.workers_placed"], ("hosts",))
    del v
    return sorted(f.out, key=lambda x: ORDER[x["severity"]])


def _gap(f: _Findings, report: NumbersReport, fa: FleetAnalysis) -> None:
    """The fleet short of the peak the doc states."""
    v = report.value
    gap = v("gap_peak") if report.has("gap_peak") else None
    if gap is None or gap <= 1 or not fa.peak_given:
        return
    parts = [f"The peak of {show(fa.goals['qps'], 'QPS')} against {show(fa.capacity_qps, 'QPS')} the placed "
             "workers serve at this split"]
    figs = ["fleet.gap_peak", "fleet.capacity_at_split_qps"]
    if report.has("best_mix_qps") and v("best_mix_qps") is not None:
        parts.append(f"the best mix of workers on these hosts serves {show(v('best_mix_qps'), 'QPS')}")
        figs.append("fleet.best_mix_qps")
    if report.has("most_capacity_qps") and len(fa.models) > 1:
        parts.append(f"even hosts full of the fastest workers, the split ignored, give "
                     f"{show(v('most_capacity_qps'), 'QPS')}")
        figs.append("fleet.most_capacity_qps")
    if report.has("whole_workers_peak"):
        figs.append("fleet.whole_workers_peak")
        parts.append(f"it needs {show(v('whole_workers_peak'), '')} workers")
    f.add("fix_now", f"Capacity is about {show(gap, '')}x short of the peak goal",
          "; ".join(parts) + ". Is the hardware fixed or the target?", figs, ("traffic.peak_qps",))


def _why(scenario: Scenario, report: NumbersReport, m: ModelAnalysis) -> str:
    """What caps a model's workers, in a clause with its figures."""

    pool = m.pool(m.binding_pool) if m.binding_pool in ("prefill", "decode") else m.pools[0]
    if m.binding_pool == "transfer":
        return f"the decode workers' links move {show(m.link_qps, 'QPS')} of KV"
    assert pool is not None
    w = pool.worker
    words = BINDING_WORDS.get(w.binding, w.binding)
    if m.batching == "static":
        return f"{pool.workers} workers x {show(w.qps, 'QPS')}"
    held = f"; a worker's KV cache holds {w.kv_sequences} sequences" if w.binding == "kv_cache" else ""
    hit = f"; expected prefix hit rate {show(w.hit_rate, '%')}" if w.hit_rate is not None else ""
    return (f"{pool.workers} {pool.role + ' ' if m.split else ''}worker{'s' if pool.workers != 1 else ''} x "
            f"{show(w.qps, 'QPS')}, capped by {words}{held}{hit}")


def _overload(f: _Findings, scenario: Scenario, report: NumbersReport, fa: FleetAnalysis) -> None:
    """The queue grows at average traffic: per model, what caps it."""
    over = [m for m in fa.models.values() if m.share > 0 and m.workers and m.throughput_qps < m.offered_avg_qps]
    if not over:
        return
    limit = scenario.dispatcher.queue_limit
    tail = ("nothing sheds load (dispatcher.queue_limit = 0), so the queue grows until memory runs out"
            if limit == 0 else f"beyond {limit} waiting requests the excess is shed, i.e. refused")
    for m in over:
        if not m.split:
            continue
        pools = ", ".join(f"{p.role} {p.workers} worker{'s' if p.workers != 1 else ''}, {show(p.capacity_qps, 'QPS')}"
                          for p in m.pools)
        figs = [f"{m.name}.{p.role}_pool_capacity_qps" for p in m.pools] + [f"{m.name}.utilisation_avg"]
        f.add("fix_now", f"{m.name}'s {m.binding_pool} pool cannot carry its average load",
              f"{show(m.offered_avg_qps, 'QPS')} is offered and the {m.binding_pool} binds: {_why(scenario, report, m)} "
              f"(pools: {pools}). " + (
                  "Prompts queue at the prefill workers"
                  if m.binding_pool == "prefill" else
                  "Handoffs wait for room, the prefill workers hold their KV meanwhile, and the wait backs up "
                  "into the prefill pool's queues") + f"; {tail}. Size the {m.binding_pool} pool to the load.",
              figs, ("dispatcher.queue_limit",))
    whole = [m for m in over if not m.split]
    if not whole:
        return
    growth = sum((m.offered_avg_qps - m.throughput_qps for m in whole), Fraction(0))
    most = ""
    if report.has("queue_growth_most_avg") and report.value("queue_growth_most_avg"):
        most = (f"; even the most workers these hosts could hold leave "
                f"{show(report.value('queue_growth_most_avg'), 'requests/s')} unserved")
    gpus = []
    for m in whole:
        need = m.offered_avg_qps / m.pools[0].worker.throughput_qps if m.pools[0].worker.throughput_qps else None
        total = sum(u for _, u, _ in scenario.expanded_hosts())
        units = scenario.models[m.name].worker_units
        if need is not None and len(fa.models) == 1 and -(-need // 1) * units > total:
            gpus.append(f"{m.name} needs {-(-need // 1)} workers ({-(-need // 1) * units} GPUs; the hosts have {total})")
    f.add("fix_now", f"At average traffic the queue grows by {show(growth, '')} requests a second",
          "; ".join(f"{m.name}: {show(m.offered_avg_qps, 'QPS')} offered for {show(m.throughput_qps, 'QPS')} "
                    f"({_why(scenario, report, m)})" for m in whole)
          + ("; " + "; ".join(gpus) if gpus else "") + f"{most}; {tail}.",
          ["fleet.queue_growth_avg"] + [f"{m.name}.utilisation_avg" for m in whole], ("dispatcher.queue_limit",))


def _split(f: _Findings, m: ModelAnalysis) -> None:
    """A split model whose binding pool runs near its capacity (overload is said above)."""
    binding = m.binding_pool
    if binding is None or m.throughput_qps < m.offered_avg_qps:
        return
    offered = m.offered_peak_qps if m.offered_peak_qps is not None else m.offered_avg_qps
    util = offered / m.capacity_qps if m.capacity_qps else None
    if util is None or util < Fraction(4, 5):
        return
    pools = ", ".join(f"the {p.role} pool ({p.workers} workers) {show(p.capacity_qps, 'QPS')}" for p in m.pools)
    figs = [f"{m.name}.{p.role}_pool_capacity_qps" for p in m.pools] + [f"{m.name}.capacity_qps"]
    f.add("fix_now" if util >= 1 else "mention",
          f"{m.name}'s {binding} pool runs {show(util, '%')} busy at the {'peak' if m.offered_peak_qps else 'offered load'}",
          f"The {binding} binds; pools: {pools}.", figs)


def _token(f: _Findings, scenario: Scenario, report: NumbersReport, m: ModelAnalysis) -> None:
    """Where a continuous model's goals break its own arithmetic."""
    name, slo = m.name, scenario.slo
    v = report.value
    roof = scenario.roofline_for(name)
    floors = m.floors
    tpot_floor = floors["tpot_s"]
    physical = floors["tpot_physical_s"]
    if slo.tpot_s is not None and tpot_floor is not None and tpot_floor > exact(slo.tpot_s):
        goal = exact(slo.tpot_s)
        if roof is not None and physical is not None and physical > goal:
            f.add("fix_now", f"The TPOT goal is under the time {name}'s GPUs take to read its weights",
                  f"slo.tpot_s is {show(goal, 's')}, but "
                  + (f"even one sequence's decode step reads {show(roof.weight_bytes_read(1) / 10**9, 'GB')} of "
                     f"weights (its {roof.shape.experts_per_token} experts a layer and the rest)"
                     if roof.moe and roof.experts_read == "hit" else
                     f"every decode step reads all {show(v('weights_gb', name), 'GB')} of weights")
                  + f", which takes {show(physical, 's')} at the full bandwidth of {roof.units} {roof.gpu.name}: "
                  "no scheduler or batch size meets it; it needs more GPUs per worker, faster memory or smaller "
                  "weights.", [f"{name}.decode_step_floor_s", f"{name}.weights_gb"], ("slo.tpot_s",))
        elif roof is not None and scenario.worker_for(name).step_model == "roofline":
            f.add("clarify", f"The TPOT goal holds only if {name}'s engine reads memory faster than assumed",
                  f"slo.tpot_s is {show(goal, 's')}. At full bandwidth a decode step would take {show(physical, 's')}, "
                  f"under the goal, but at the assumed mbu {scenario.worker_for(name).mbu:g} one sequence alone takes "
                  f"{show(tpot_floor, 's')}: the goal needs a bandwidth efficiency of at least "
                  f"{show((physical or Fraction(0)) / goal, '%')}. What does the engine reach?",
                  [f"{name}.tpot_floor_s", f"{name}.decode_step_floor_s"], ("slo.tpot_s",))
        else:
            f.add("fix_now", f"The TPOT goal is under what one {name} decode step takes",
                  f"slo.tpot_s is {show(goal, 's')}, but a decode step of a single sequence takes "
                  f"{show(tpot_floor, 's')}: no load, batch size or scheduler meets it on these workers.",
                  [f"{name}.tpot_floor_s"], ("slo.tpot_s",))
    ttft_floor = floors["ttft_s"]
    if slo.ttft_s is not None and ttft_floor is not None and ttft_floor > exact(slo.ttft_s):
        f.add("fix_now", f"The TTFT goal is under one {name} prefill",
              f"slo.ttft_s is {show(exact(slo.ttft_s), 's')}, but prefilling a mean prompt alone takes "
              f"{show(ttft_floor, 's')}.", [f"{name}.ttft_floor_s"], ("slo.ttft_s",))
    for tag, word in (("avg", "average"), ("peak", "peak")):
        kv = m.kv.get(tag)
        if not kv or kv["held"] is None or not m.workers:
            continue
        need = kv["running"]
        held = kv["held"]
        if m.throughput_qps < m.offered_avg_qps:
            break  # overloaded at average: the overload finding says what binds
        worker = (m.pool("decode") or m.pools[0]).worker
        if need is not None and need > held:
            f.add("fix_now", f"{name}'s KV cache cannot hold the concurrency its {word} load implies",
                  f"At {show(kv['per_worker_qps'], 'QPS')} a worker, each runs about {show(need, '')} sequences "
                  f"(Little's law on the step model), but its KV cache holds {show(held, '')}: expect preemptions and "
                  "recompute, and TTFT far above its floor.", [f"{name}.kv_needed_{tag}", f"{name}.running_{tag}"])
            break
        if need is None and worker.binding == "kv_cache":
            f.add("fix_now", f"{name}'s KV cache cannot hold the concurrency its {word} load implies",
                  f"At {show(kv['per_worker_qps'], 'QPS')} a worker the running set grows past the {show(held, '')} "
                  f"sequences its KV cache holds, where a worker completes at most {show(worker.throughput_qps, 'QPS')}: "
                  "expect preemptions and recompute, and TTFT far above its floor.",
                  [f"{name}.kv_concurrent_seqs", f"{name}.max_qps_per_worker", f"{name}.offered_{tag}_qps"])
            break
    _physics(f, scenario, report, m)
    _prefix_routing(f, scenario, m)
    _autoscaler(f, scenario, m)


def _physics(f: _Findings, scenario: Scenario, report: NumbersReport, m: ModelAnalysis) -> None:
    name = m.name
    w = scenario.worker_for(name)
    roof = scenario.roofline_for(name)
    if roof is not None and w.kv_cache_tokens > roof.kv_capacity_tokens:
        f.add("fix_now", f"{name}'s KV cache is bigger than its GPUs' memory",
              f"kv_cache_tokens is {w.kv_cache_tokens:,}, but {roof.units} {roof.gpu.name} at gpu_memory_utilization "
              f"{show(roof.memory_utilization, '')} leave room for {roof.kv_capacity_tokens:,} tokens of "
              f"{show(roof.kv_bytes_per_token, '')} bytes after the weights. Use kv_cache_tokens = \"auto\", or say "
              "where the rest lives.", [f"{name}.kv_capacity_tokens", f"{name}.kv_bytes_per_token"])


def _prefix_routing(f: _Findings, scenario: Scenario, m: ModelAnalysis) -> None:
    """A prefix cache spread thin by routing that ignores it (a split model's: in its
    prefill pool)."""
    pool = next((p for p in m.pools if p.role in ("whole", "prefill")), m.pools[0])
    if pool.worker.hit_rate is None:
        return

    if routes_by_prefix(scenario.dispatcher.policy, scenario.dispatcher.scorers,
                        scenario.dispatcher.session_affinity) or pool.workers < 2:
        return
    other = analyse(scenario.with_overrides(['dispatcher.policy="prefix_aware"'], max_requests=None)).models[m.name]
    hit, routed = pool.worker.hit_rate, other.pool(pool.role).worker.hit_rate  # type: ignore[union-attr]
    if routed is None or routed <= hit:
        return
    severity = "fix_now" if m.capacity_qps < m.offered_avg_qps <= other.capacity_qps else "clarify"
    which = "prefill worker" if pool.role == "prefill" else "worker"
    f.add(severity, f"{scenario.dispatcher.policy} spreads {m.name}'s prefixes over every {which}",
          f"Each {which} caches every prefix group, so the expected hit rate is {show(hit, '%')} and the fleet "
          f"serves {show(m.capacity_qps, 'QPS')}; routing each prefix to the workers that cache it (prefix_aware) "
          f"would reach {show(routed, '%')} and {show(other.capacity_qps, 'QPS')}, for "
          f"{show(m.offered_avg_qps, 'QPS')} offered.",
          [f"{m.name}.{'prefill_' if m.split else ''}prefix_hit_rate", f"{m.name}.capacity_qps"],
          ("dispatcher.policy",))


def _autoscaler(f: _Findings, scenario: Scenario, m: ModelAnalysis) -> None:
    a = m.autoscaler
    if a is None:
        return
    peak = m.offered_peak_qps if m.offered_peak_qps is not None else m.offered_avg_qps
    if a["max_qps"] < peak:
        f.add("fix_now", f"The autoscaler's range tops out under {m.name}'s peak",
              f"At max_workers {a['max_workers']} the workers serve {show(a['max_qps'], 'QPS')}, for a peak of "
              f"{show(peak, 'QPS')}.", [f"{m.name}.autoscale_max_qps", f"{m.name}.offered_peak_qps"])
    timeout = scenario.client.timeout_s
    if a["min_workers"] == 0 and timeout is not None and a["warmup_s"] > timeout:
        f.add("clarify", f"{m.name} scales to zero, and a cold start outlasts the clients' timeout",
              f"With min_workers 0 the first request after a quiet spell waits for a worker to load its weights "
              f"({show(exact(a['warmup_s']), 's')}), longer than the clients wait ({show(exact(timeout), 's')}): "
              "those requests time out. Is a warm worker kept?", [f"{m.name}.autoscale_min_qps"],
              ("autoscaler.min_workers", "autoscaler.warmup_s", "client.timeout_s"))


def _losses(f: _Findings, fa: FleetAnalysis) -> None:
    """A host whose loss takes a model (or a pool of one) down, and losses that overload."""
    said: set[str] = set()
    for loss in fa.losses:
        for name in loss.down:
            if name in said:
                continue
            said.add(name)
            m = fa.models[name]
            gone = [p for p in m.pools if loss.workers_left[name][p.name] == 0 and p.workers > 0]
            where = (f"all {m.workers} {name} workers are on host:{loss.host}" if not m.split else
                     " and ".join(f"every {p.role} worker ({p.workers}) is on host:{loss.host}" for p in gone))
            f.add("fix_now", f"Losing host:{loss.host} takes {name} down",
                  f"{where[0].upper()}{where[1:]}: a single host failure leaves the model unable to serve"
                  + (" (a split model needs both its pools)" if m.split else "")
                  + ", and a dispatcher standby does nothing about it. Spread them over hosts (python -m emulator "
                  "place ranks layouts by the worst single-host loss).",
                  [f"{name}.capacity_one_host_lost_qps", f"{name}.workers_placed"], ("hosts",))
    fragile: set[str] = set()
    for m in fa.models.values():
        worst = m.worst_loss
        if worst is None or m.name in said or not m.workers or m.share == 0:
            continue
        left = worst.capacity_qps[m.name]
        if 0 < left <= m.offered_avg_qps < m.capacity_qps:
            fragile.add(m.name)
            f.add("clarify", f"One host loss overloads {m.name} at average traffic",
                  f"Losing host:{worst.host} leaves {show(left, 'QPS')} for {show(m.offered_avg_qps, 'QPS')} offered: "
                  "the queue then grows until the host is back. Is N+1 capacity a goal?",
                  [f"{m.name}.capacity_one_host_lost_qps", f"{m.name}.offered_avg_qps"], ("hosts",))
    busy = [m for m in fa.models.values() if m.name not in fragile and not m.split
            and m.utilisation_avg is not None and Fraction(4, 5) <= m.utilisation_avg < 1]
    if busy:
        m = max(busy, key=lambda x: (x.utilisation_avg, x.name))
        f.add("mention", f"{m.name} runs {show(m.utilisation_avg, '%')} busy at average traffic",
              "Little headroom: waiting time grows steeply as utilisation nears 1, and a burst or a lost worker tips "
              "it over.", [f"{m.name}.utilisation_avg"])


def _static(f: _Findings, scenario: Scenario, report: NumbersReport, fa: FleetAnalysis) -> None:
    """The batch rules of statically batched models."""
    v = report.value
    static = [n for n, m in fa.models.items() if m.batching == "static"]
    if not static:
        return
    if scenario.dispatcher.close_after_s is None:
        slow = max(static, key=lambda n: v("fill_time_quiet_s", n) or Fraction(0))
        f.add("clarify", "No rule says when a partial batch closes",
              f"A batch closes only when full. At 1 request a second a {show(v('requests_per_batch', slow), '')}-request "
              f"{slow} batch takes {show(v('fill_time_quiet_s', slow), 's')} to fill (at average traffic "
              f"{show(v('fill_time_avg_s', slow), 's')}). A maximum wait (dispatcher.close_after_s) bounds it.",
              [f"{slow}.fill_time_quiet_s", f"{slow}.fill_time_avg_s"], ("dispatcher.close_after_s",))
    floor = v("latency_floor_s") if report.has("latency_floor_s") else None
    if floor is not None and floor >= 1 and not scenario.slo.any():
        f.add("clarify", f"\"Low latency\" cannot mean sub-second: the floor is {show(floor, 's')}",
              f"Every request spends at least one batch's service time ({show(floor, 's')}) in a worker, plus the wait "
              "for its batch to fill and for a free worker. What latency target does the doc mean?",
              ["fleet.latency_floor_s"])
    for name in static:
        if scenario.models[name].tokens_cv > 0:
            f.add("mention", f"{name} requests per batch is an average",
                  f"Request sizes vary (tokens_cv {scenario.models[name].tokens_cv:g}); larger requests make batches "
                  f"of fewer than {show(v('requests_per_batch', name), '')} requests and lower throughput.",
                  [f"{name}.requests_per_batch"])
