"""The numbers pass for a continuous-batching model: what its GPUs and shape fix, what a
worker of each pool serves at the concurrency its KV cache and limits allow, the floors
(minima) of TTFT and TPOT, the KV concurrency check at the average and the peak, and
the autoscaler's range and, for a pool the SLO planner sizes, the rate one worker
serves within its target and the workers it wants at the peak. Every figure is read
from the model's analysis (the planner's rate from ``fleet.planner.per_worker_rate``,
the one the run's planner uses).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING

from emulator.analysis.batch_numbers import load_figures, loss_figure
from emulator.analysis.fleet.admission import REFUSED_FROM, admission_of, fraction
from emulator.analysis.fleet.planner import per_worker_rate, workers_needed
from emulator.analysis.fleet.prefix import routes_by_prefix
from emulator.analysis.fleet.steps import step_cost
from emulator.analysis.moe_numbers import moe_figures
from emulator.analysis.numbers import Adder, div, show
from emulator.analysis.pipeline_numbers import pipeline_figures
from emulator.scenario import PLANNER_METRIC, AutoscalerSpec, Roofline, Scenario
from emulator.scenario.pools import split_pools

if TYPE_CHECKING:
    from emulator.analysis.fleet import FleetAnalysis, ModelAnalysis, PoolAnalysis
    from emulator.analysis.fleet.capacity import WorkerCapacity

__all__ = ["BINDING_WORDS", "token_figures"]

_NEEDS = "n/a: needs [hardware] and [models.{name}.arch]"

#: What caps a pool's workers, in words.
BINDING_WORDS = {
    "kv_cache": "the KV cache",
    "max_num_seqs": "max_num_seqs",
    "token_budget": "the step's token budget",
    "tpot_goal": "the TPOT goal",
    "ttft_goal": "the TTFT goal",
    "ttft_queue": "the wait for a prefill worker within the TTFT goal",
    "ttft_admission": "what the predicted-TTFT rule admits within the TTFT goal",
    "prefix_cache": "the prefix cache (more running sequences would evict more prefixes)",
    "kv_transfer": "the KV transfer links",
    "pipeline_stages": "the pipeline group's stages",
    "batch": "the batch",
    "no_fit": "a request larger than a batch",
}


def token_figures(add: Adder, scenario: Scenario, m: ModelAnalysis, fa: FleetAnalysis) -> None:
    """Every figure of a continuous-batching model."""
    name = m.name
    _physical_figures(add, scenario, name)
    load = m.workload
    add("kv_running_tokens", "KV of a running sequence", name, Fraction(load.kv_running), "tokens",
        f"its prompt ({load.prompt.mean:.0f} mean, weighted by how long each runs) + the tokens it generated so "
        f"far (mean over its run, long answers weighted by their length): {load.source}", load.inputs)
    for pool in m.pools:
        _pool_figures(add, scenario, m, pool)
    if m.split:
        _split_figures(add, scenario, m)
        pipeline_figures(add, scenario, m)
    _admission_figures(add, scenario, m)
    _planner_figures(add, scenario, m)
    serving = m.pool("decode") or m.pools[0]
    add("workers_placed", "Workers placed", name, m.workers, "workers",
        " + ".join(f"{p.workers} {p.role}" for p in m.pools) if m.split else
        f"{m.workers} {name} workers on the hosts as configured", ("hosts",))
    inputs = m.inputs
    per = m.capacity_qps / m.workers if m.split and m.workers else serving.worker.qps
    add("worker_qps", "Throughput per worker", name, per, "QPS",
        (f"{show(m.capacity_qps, 'QPS')} the model serves / {m.workers} workers of both pools"
         if m.split else serving.worker.how), inputs)
    add("capacity_qps", "Capacity of the placed workers", name, m.capacity_qps, "QPS", _capacity_how(m), inputs)
    if m.autoscaler is not None:
        a = m.autoscaler
        add("autoscale_min_qps", "Autoscaler's range: capacity at min_workers", name, a["min_qps"], "QPS",
            f"{a['min_workers']} workers x {show(a['per_worker_qps'], 'QPS')}", (*inputs, "autoscaler.min_workers"))
        add("autoscale_max_qps", "Autoscaler's range: capacity at max_workers", name, a["max_qps"], "QPS",
            f"{a['max_workers']} workers x {show(a['per_worker_qps'], 'QPS')}, each serving {show(a['warmup_s'], 's')} "
            "after it is placed", (*inputs, "autoscaler.max_workers", "autoscaler.warmup_s"))
    if not m.split:
        hosts = scenario.expanded_hosts()
        units = scenario.models[name].worker_units
        alone = sum(u // units for _, u, _ in hosts)
        add("most_workers", f"Most {name} workers these hosts could hold", name, alone, "workers",
            f"{sum(u for _, u, _ in hosts)} units in {len(hosts)} hosts, {units} adjacent units each",
            (f"models.{name}.worker_units", "hosts"))
        add("most_capacity_qps", f"Capacity if the hosts held only {name}", name, alone * serving.worker.qps, "QPS",
            f"{alone} workers x {show(serving.worker.qps, 'QPS')}", (*inputs, "hosts"))
    loss_figure(add, m, inputs)
    if m.trace_capacity_qps is not None:
        add("trace_capacity_qps", "Mean rate of this trace the model serves", name, m.trace_capacity_qps, "QPS",
            f"the trace replayed faster or slower over the run: a queue served at {show(m.capacity_qps, 'QPS')} "
            "keeps 90% of requests within the TTFT goal up to this mean rate", (*inputs, "traffic.trace"))
    loads = [("avg", "average", m.offered_avg_qps)]
    if m.offered_peak_qps is not None:
        loads.append(("peak", "peak", m.offered_peak_qps))
    load_figures(add, m, per, loads, inputs)
    _floor_figures(add, scenario, m)
    _kv_figures(add, m)
    moe_figures(add, scenario, m)


def _capacity_how(m: ModelAnalysis) -> str:
    if m.autoscaler is not None:
        return (f"the autoscaler's max_workers {m.autoscaler['max_workers']} x "
                f"{show(m.autoscaler['per_worker_qps'], 'QPS')}: the top of its range")
    if m.split:
        parts = [f"{p.role} {show(p.capacity_qps, 'QPS')}" for p in m.pools]
        if m.link_qps is not None:
            parts.append(f"transfer {show(m.link_qps, 'QPS')}")
        return f"the least of {', '.join(parts)}: the {m.binding_pool} binds"
    p = m.pools[0]
    return f"{p.workers} workers x {show(p.worker.qps, 'QPS')} each ({BINDING_WORDS.get(p.worker.binding, p.worker.binding)} binds)"


def _speculative_figures(add: Adder, scenario: Scenario, m: ModelAnalysis, w: WorkerCapacity, prefix: str,
                         word: str, inputs: tuple[str, ...]) -> None:
    """Speculative decoding at a worker's capacity: k, alpha, tau, the verification
    pass and the draft's passes, and the time between a decoder's tokens."""
    name = m.name
    sp = scenario.worker_for(name).speculative
    assert sp is not None
    cost = step_cost(scenario, name)
    n, context = float(w.concurrency), m.workload.kv_running
    k, alpha = sp.draft_tokens, sp.acceptance_rate
    tau = Fraction(sp.tokens_per_step)
    add(f"{prefix}speculative_draft_tokens", "Tokens drafted a decode step (k)", name, k, "tokens",
        f"worker.speculative.draft_tokens ({sp.method}); the target verifies k + 1 = {k + 1} a sequence", inputs)
    add(f"{prefix}speculative_acceptance_rate", "Chance a drafted token is accepted (alpha)", name, Fraction(alpha), "%",
        "worker.speculative.acceptance_rate, each drafted token on its own", inputs)
    add(f"{prefix}speculative_tokens_per_step", "Tokens a verification step emits a sequence (tau)", name, tau,
        "tokens", f"(1 - alpha^(k+1)) / (1 - alpha) = (1 - {alpha:g}^{k + 1}) / (1 - {alpha:g}): the accepted drafts "
        "and the target's own next token", inputs)
    if n > 0:
        add(f"{prefix}verification_step_at_capacity_s", f"A verification step at a {word}worker's capacity", name,
            Fraction(cost.verify(n, context)), "s",
            f"the step model at {n:g} sequences computing {k + 1} tokens each over their contexts", inputs)
        add(f"{prefix}draft_at_capacity_s", f"The draft's passes a step at a {word}worker's capacity", name,
            Fraction(sp.draft_s(n)), "s", f"{k} x (draft_step_s + draft_seq_s x {n:g} sequences)", inputs)
        add(f"{prefix}speculative_gain_at_capacity", "Plain decode step over the time between tokens", name,
            Fraction(cost.decode(n, context) / cost.token_step(n, context)), "x",
            "a plain decode step at the same sequences over (verification + draft) / tau: below 1, speculation "
            "costs at this load", inputs)


def _pool_figures(add: Adder, scenario: Scenario, m: ModelAnalysis, pool: PoolAnalysis) -> None:
    """One pool's worker at capacity: concurrency, step, prefill, hits, per-worker QPS."""
    name = m.name
    w = pool.worker
    prefix = f"{pool.role}_" if m.split else ""
    word = f"{pool.role} " if m.split else ""
    inputs = w.inputs
    spec = scenario.worker_for(name)
    if pool.role != "prefill":
        add(f"{prefix}kv_concurrent_seqs", f"Sequences a {word}worker's KV cache holds", name, w.kv_sequences,
            "sequences", f"{spec.kv_cache_tokens:,} KV tokens // the KV of a running sequence"
            + (" (cached prefix blocks shared, pinned prefixes counted)" if w.hit_rate is not None else ""), inputs)
        add(f"{prefix}max_concurrent_seqs", f"Most sequences a {word}worker runs at once", name, w.limit,
            "sequences", f"the least of the KV cache's {w.kv_sequences}, max_num_seqs {spec.max_num_seqs} and the "
            f"step's {spec.max_batched_tokens} tokens", inputs)
        add(f"{prefix}concurrency_at_capacity", f"Sequences running at a {word}worker's capacity", name,
            w.concurrency, "sequences", f"{BINDING_WORDS.get(w.binding, w.binding)} binds", inputs)
        add(f"{prefix}decode_step_at_capacity_s", f"A decode step at a {word}worker's capacity", name, w.step_s, "s",
            f"the step model at {show(w.concurrency, '')} decoding sequences"
            + (" (speculation: the verification step plus the draft, over tau: the time between a decoder's tokens)"
               if spec.speculative is not None else ""), inputs)
        add(f"{prefix}tpot_at_capacity_s", f"Time per output token at a {word}worker's capacity", name, w.tpot_s,
            "s", "the mean step: a decode step plus the prefills that share it", inputs)
        if spec.speculative is not None:
            _speculative_figures(add, scenario, m, w, prefix, word, inputs)
    if w.hit_rate is not None:
        add(f"{prefix}prefix_hit_rate", "Expected prefix hit rate", name, w.hit_rate, "%",
            "Che's approximation of each worker's LRU prefix cache, in what the running sequences leave of its KV "
            "cache" + (" and its lower tiers" if w.tiers else "") + (
                "; session affinity keeps each session (prefix group) on the worker first sent it"
                if scenario.dispatcher.session_affinity else f"; policy {scenario.dispatcher.policy} "
                + ("keeps each prefix on the workers that cache it" if _routed(scenario) else
                   "spreads every prefix over every worker")),
            (*inputs, "dispatcher.session_affinity") if scenario.dispatcher.session_affinity else inputs)
    pooled = {t.name for t in scenario.worker_for(name).kv_tiers if t.shared}
    for tier, share, load_s in w.tiers:
        add(f"{prefix}tier_{tier}_hit_rate", f"Expected share of the prefix found in the {tier} tier"
            + (" (shared by the pool)" if tier in pooled else ""), name, Fraction(share), "%",
            (f"the store shared by the pool sees what every worker's own levels miss: Che's hit rate over the "
             f"pool's stream of misses at the {tier} store's capacity, times the share its workers miss"
             if tier in pooled else
             f"Che's hit rate over the GPU cache and the tiers down to {tier} less that over the levels above it"),
            inputs)
        add(f"{prefix}tier_{tier}_load_s", f"Time a request spends loading prefix KV from the {tier} tier", name,
            Fraction(load_s), "s", f"{show(Fraction(share), '%')} of the usable prefix x KV bytes a token / the "
            f"{tier} tier's bandwidth; the step waits for it", inputs)
    add(f"{prefix}prefill_s_per_request", f"Prefill a request adds to a {word}worker", name, w.prefill_s, "s",
        "its prompt's prefill terms" + (" less the cached prefix" if w.hit_rate is not None else "")
        + (" plus its tier loads" if w.tiers else "")
        + (" (under the roofline the first prompt of a step rides on the weights read)"
           if spec.step_model == "roofline" else ""), inputs)
    if m.split:
        add(f"{prefix}worker_qps", f"Requests a {word}worker serves a second", name, w.qps, "QPS", w.how, inputs)
        add(f"{prefix}pool_capacity_qps", f"What the {word}pool serves", name, pool.capacity_qps, "QPS",
            f"{pool.workers} workers x {show(w.qps, 'QPS')}"
            + (f" / {show(pool.traffic_share, '%')} of requests sent to it" if pool.traffic_share != 1 else ""),
            inputs)
    else:
        add("max_qps_per_worker", "Most requests a worker completes, goals aside", name, w.throughput_qps, "QPS",
            f"at its concurrency limit ({w.limit} sequences), whatever the TPOT", inputs)
        add("max_output_tokens_per_s", "Output tokens a worker generates a second, at most", name,
            w.throughput_qps * Fraction(m.workload.output.mean), "tokens/s",
            f"{show(w.throughput_qps, 'QPS')} x {m.workload.output.mean:.0f} output tokens", inputs)
        add("tpot_at_full_concurrency_s", "Time per output token at full concurrency", name, w.full_tpot_s, "s",
            f"the mean step with {w.limit} sequences running: a decode step plus the prefills that share it", inputs)
    if pool.role != "decode":

        add("prefill_s_per_1k_tokens", "A step prefilling 1,000 prompt tokens alone", name,
            step_cost(scenario, name).prefill_alone_s(1000), "s",
            "the step model with one 1,000-token chunk and nothing else in the step", inputs)
    for note in w.notes:
        add(f"{prefix}goal_note", "Note", name, None, "", note, inputs)


def _routed(scenario: Scenario) -> bool:
    return routes_by_prefix(scenario.dispatcher.policy, scenario.dispatcher.scorers,
                            scenario.dispatcher.session_affinity)


def _split_figures(add: Adder, scenario: Scenario, m: ModelAnalysis) -> None:
    name = m.name
    inputs = (f"models.{name}.disaggregated.kv_transfer_gb_s", f"models.{name}.arch.model")
    add("kv_transfer_s", "KV transfer of a mean prompt", name, m.transfer_s, "s",
        "prompt tokens x KV bytes per token / the decode worker's link", inputs)
    add("kv_link_qps", "Requests the decode links move a second", name, m.link_qps, "QPS",
        "one transfer at a time per decode worker's link", inputs)
    split = scenario.models[name].disaggregated
    key = f"models.{name}.disaggregated"
    keys: tuple[str, ...]
    if split is not None and split.decider == "uncached":
        how, keys = ("prompts whose tokens not cached on the prefill worker are at most decider_threshold_tokens "
                     "(the prefill pool's expected hit rate)", (f"{key}.decider_threshold_tokens", f"{key}.decider",
                                                                "worker.prefix_cache"))
    else:
        how, keys = "prompts of at most decider_threshold_tokens", (f"{key}.decider_threshold_tokens",)
    if split is not None and split.decider_max_prefill_queue:
        how += (f"; more while {split.decider_max_prefill_queue} requests wait for the prefill pool "
                "(decider_max_prefill_queue, not counted here)")
    add("decode_direct_share", "Requests the decider sends to decode whole", name, m.decode_direct_share, "%",
        how, keys)


def _admission_figures(add: Adder, scenario: Scenario, m: ModelAnalysis) -> None:
    """SLO-aware admission (``admission = "predicted_ttft"``): the bound it acts as, the
    load from which it refuses, and the share it admits at the peak."""
    a = admission_of(scenario, m)
    if a is None:
        return
    name = m.name
    own = scenario.pool(a.pool)
    key = f"pools.{a.pool}" if own is not None and own.admission is not None else "dispatcher"
    inputs = (f"{key}.admission", f"{key}.admission_slack", "slo.ttft_s")
    add("admission_limit_s", "TTFT an arrival may be predicted", name, fraction(a.limit_s), "s",
        f"admission_slack x slo.ttft_s; of it {show(fraction(a.room_s), 's')} for the wait and the prompt's "
        "own prefill" + (", the KV transfer and the decode worker's first step taking the rest" if m.split else ""),
        inputs)
    add("admission_bound", "Prompts waiting at which a mean-sized arrival is refused", name, a.bound, "prompts",
        f"the least j whose predicted wait, (j + (1 + cs^2) / 2) x {show(fraction(a.service_s), 's')} / "
        f"{a.workers} workers, and own {show(fraction(a.service_s), 's')} pass the room (pool {a.pool}); "
        "longer prompts are refused at fewer, shorter ones at more", inputs)
    add("admission_refuses_from_qps", "Load from which admission refuses arrivals", name,
        fraction(a.refuses_from_qps), "QPS",
        f"the load at which {REFUSED_FROM:.0%} of arrivals are refused, each prompt judged by its own size "
        "against the work ahead of it", (*inputs, *m.inputs))
    if a.late_p50_s is not None:
        add("admission_late_s", "TTFT past the prediction, median", name, fraction(a.late_p50_s), "s",
            f"90th percentile {show(fraction(a.late_p90_s), 's')}: on a busy prefill worker, the tier copies of "
            "the later prompts that fill a prompt's last step, and its wait on the decode link behind the "
            "prompts that step completes (all sent to one decode worker)",
            (*inputs, "worker.kv_tiers", "worker.max_batched_tokens", f"models.{name}.disaggregated.kv_transfer_gb_s"))
    if a.peak_qps is not None:
        add("admission_admitted_at_peak", "Share admitted at peak traffic", name, fraction(a.admitted_at_peak),
            "%", f"at {show(fraction(a.peak_qps), 'QPS')}, long prompts refused first; fluid: "
            f"{show(fraction(a.fluid_at_peak), '%')} (throughput / peak, every prompt alike)",
            (*inputs, "traffic.peak_qps"))


def _planned(scenario: Scenario, name: str) -> list[tuple[str, str, AutoscalerSpec]]:
    """The SLO-planned pools of model ``name``: (the spec's key, the pool's role, its spec)."""
    out: list[tuple[str, str, AutoscalerSpec]] = []
    auto = scenario.autoscaler
    if auto is not None and auto.metric == PLANNER_METRIC and auto.model == name:
        out.append(("autoscaler", "whole", auto))
    roles = split_pools(scenario.models)
    for p in scenario.pools:
        spec = p.autoscaler
        if spec is not None and spec.metric == PLANNER_METRIC and spec.model == name:
            out.append((f"pools.{p.name}.autoscaler", roles.get(p.name, (name, "whole"))[1], spec))
    return out


def _planner_figures(add: Adder, scenario: Scenario, m: ModelAnalysis) -> None:
    """The SLO planner (``metric = "slo"``), per pool it sizes: the rate one worker
    serves within the planner's target, and ceil(peak / rate) within its range."""
    name = m.name
    peak = m.offered_peak_qps
    at, peak = ("peak", peak) if peak is not None else ("average", m.offered_avg_qps)
    for key, role, spec in _planned(scenario, name):
        prefix = f"{role}_" if m.split else ""
        word = f"{role} " if m.split else ""
        rate = per_worker_rate(scenario, spec, role)
        given = f"{key}.per_worker_qps" if spec.per_worker_qps is not None else (
            f"{key}.target_tbt_s" if spec.target_tbt_s is not None else f"{key}.target_ttft_s")
        inputs = (given, *m.inputs)
        target = ("the rate given" if rate.target_s is None else
                  f"{'TBT' if spec.target_tbt_s is not None else 'TTFT'} target {rate.target_s:g} s on the step model")
        add(f"{prefix}planner_worker_qps", f"Per-worker rate at the planner's target ({word}pool)", name,
            Fraction(rate.qps), "QPS", f"{target}: {rate.how} (per arrival at {name})", inputs)
        want = workers_needed(float(peak), rate.qps, spec.min_workers, spec.max_workers)
        how = (f"ceil({show(peak, 'QPS')} at the {at} / {show(Fraction(rate.qps), 'QPS')} a worker) = "
               f"{math.ceil(float(peak) / rate.qps - 1e-9)}" if rate.qps > 0 else
               "no load meets the target, so the planner asks for max_workers")
        add(f"{prefix}planner_workers_at_peak", f"Workers the planner wants at the peak ({word}pool)", name, want,
            "workers", f"{how}, kept within [{spec.min_workers}, {spec.max_workers}]",
            (*inputs, f"{key}.min_workers", f"{key}.max_workers", "traffic.peak_qps"))


def _floor_figures(add: Adder, scenario: Scenario, m: ModelAnalysis) -> None:
    name = m.name
    f = m.floors
    load = m.workload
    inputs = m.inputs
    ttft_how = f"a {load.prompt.mean:.0f}-token prompt prefilled alone, chunk by chunk"
    if m.split:
        ttft_how += ", its KV moved, and the decode worker's first step"
    if scenario.dispatcher.proxy_hop_s:
        ttft_how += f", after a {scenario.dispatcher.proxy_hop_s:g} s proxy hop (dispatcher.proxy_hop_s)"
    add("ttft_floor_s", "Time to first token, at least", name, f["ttft_s"], "s",
        ttft_how + ": a minimum (queueing and sharing steps come on top)", inputs)
    add("tpot_floor_s", "Time per output token, at least", name, f["tpot_s"], "s",
        ("one verification step of one sequence and the draft's passes, over tau"
         if scenario.worker_for(name).speculative is not None else "one decode step of one sequence")
        + ": a minimum (a fuller batch takes longer)", inputs)
    serving = m.pool("decode") or m.pools[0]
    worker = serving.worker
    for tag, word in (("avg", "average"), ("peak", "peak")):
        kv = m.kv.get(tag)
        if not kv:
            continue
        running = kv["running"]
        add(f"running_{tag}", f"Sequences a worker runs at {word} traffic", name, running, "sequences",
            f"Little's law on the step model at {show(kv['per_worker_qps'], 'QPS')} a worker"
            + ("" if running is not None else ": beyond its throughput, the running set grows to its limits"),
            inputs)
        add(f"tpot_{tag}_s", f"Time per output token at {word} traffic", name, kv["step_s"], "s",
            "the mean step at that concurrency", inputs)
    if worker.tpot_s is not None and m.capacity_qps:
        full = worker.tpot_s
        out = load.output.mean
        add("latency_at_capacity_s", "Request latency at capacity", name,
            (f["ttft_s"] or Fraction(0)) + Fraction(max(out - 1, 0)) * full, "s",
            f"{show(f['ttft_s'], 's')} to the first token + {max(out - 1, 0):.0f} x {show(full, 's')}", inputs)


def _kv_figures(add: Adder, m: ModelAnalysis) -> None:
    """Whether the KV cache holds the concurrency the average and the peak bring."""
    for tag in ("avg", "peak"):
        kv = m.kv.get(tag)
        if not kv or kv["held"] is None:
            continue
        need = kv["running"]
        ratio = None if need is None else div(need, kv["held"])
        add(f"kv_needed_{tag}", f"KV concurrency needed / held at {tag} traffic", m.name,
            ratio if need is not None else None, "x",
            (f"{show(need, '')} sequences running / {show(kv['held'], '')} the KV cache holds"
             if need is not None else "the load is beyond a worker's throughput: it runs as many as its limits allow"),
            m.inputs)


def _physical_figures(add: Adder, scenario: Scenario, name: str) -> None:
    """What the GPUs and the model's shape fix: KV bytes, capacity, the decode floor."""
    w = scenario.worker_for(name)
    roof = scenario.roofline_for(name)
    need = _NEEDS.format(name=name)
    hw = ("hardware.gpu", f"models.{name}.arch.model", f"models.{name}.worker_units", "hardware.gpu_memory_utilization")
    if roof is None:
        add("kv_bytes_per_token", "KV cache bytes per token", name, None, "bytes", need)
        add("kv_capacity_tokens", "KV capacity per worker", name, w.kv_cache_tokens, "tokens",
            "worker.kv_cache_tokens as configured (no GPU or model shape to check it against)",
            ("worker.kv_cache_tokens",))
        add("decode_step_floor_s", "Decode step floor (weights read once, full bandwidth)", name, None, "s", need)
        return
    s, gpu = roof.shape, roof.gpu
    add("kv_bytes_per_token", "KV cache bytes per token", name, roof.kv_bytes_per_token, "bytes",
        f"2 (K and V) x {s.layers} layers x {s.kv_heads} KV heads x {s.head_dim} head dim x "
        f"{show(roof.dtype_bytes, '')} bytes ({s.name})", hw)
    add("weights_gb", "Weights per worker", name, roof.weight_bytes / 10**9, "GB",
        f"{show(s.params_b, '')}B parameters x {show(roof.dtype_bytes, '')} bytes, over {roof.units} GPUs", hw)
    physical = roof.kv_capacity_tokens
    how = (f"({roof.units} GPUs x {show(gpu.memory_gb, '')} GB x utilisation "
           f"{show(roof.memory_utilization, '')} - {show(roof.weight_bytes / 10**9, '')} GB of weights) "
           f"// {show(roof.kv_bytes_per_token, '')} bytes = {physical:,} tokens")
    auto = scenario.kv_is_auto(name)
    add("kv_capacity_tokens", "KV capacity per worker", name, w.kv_cache_tokens, "tokens",
        how + (' (kv_cache_tokens = "auto")' if auto else f"; worker.kv_cache_tokens sets {w.kv_cache_tokens:,}"),
        (*hw, "worker.kv_cache_tokens"))
    one = roof.weight_bytes_read(1) / 10**9
    add("decode_step_floor_s", "Decode step floor (weights read once, full bandwidth)", name, _floor(roof), "s",
        f"{show(one, '')} GB of weights / ({roof.units} x {show(gpu.hbm_tb_s, '')} TB/s "
        f"{gpu.name}): every decode step reads "
        + (f"the weights one token uses once (its {s.experts_per_token} routed experts a layer and the rest)"
           if roof.moe and roof.experts_read == "hit" else "every weight once")
        + "; a physical lower bound whatever mbu is assumed, not a prediction", hw)
    if roof.communicates:
        layers, link = roof.shape.layers, gpu.link_gb_s
        add("tp_step_latency_s", "Tensor-parallel collectives' latency per step", name, roof.collectives
            * (gpu.collective_us or Fraction(0)) / 10**6, "s",
            (f"(2 x {layers} - {s.moe_layers}) all-reduces + 2 x {s.moe_layers} all-to-alls"
             if roof.all_to_all else f"2 all-reduces x {layers} layers")
            + f" x {show(gpu.collective_us, '')} us ({gpu.name}'s collective "
            "latency): paid by every step on more than one GPU", (*hw, "hardware.collective_us"))
        reduces = roof.collectives - 2 * s.moe_layers if roof.all_to_all else roof.collectives
        add("tp_comm_per_token_s", "Tensor-parallel communication per token in a step", name,
            roof.comm_token_s, "s",
            f"{reduces} all-reduces x 2 ({roof.units} - 1) / {roof.units} x {s.hidden} hidden x "
            f"{show(roof.dtype_bytes, '')} bytes / {show(link, '')} GB/s link each way"
            + (f", plus the all-to-alls' {show(roof.all_to_all_token_s, 's')}" if roof.all_to_all else ""),
            (*hw, "hardware.link_gb_s"))


def _floor(roof: Roofline) -> Fraction:
    return roof.weight_bytes_read(1) / (roof.units * roof.gpu.bytes_per_s)


def whole(value: Fraction | None) -> int | None:
    """``value`` rounded up to a whole number (None stays None)."""
    return None if value is None else math.ceil(value)
