"""The numbers pass for continuous-batching (token-level) models.

First-order figures from the worker keys and, when the scenario gives them, the GPU
and the model's shape: the KV bytes of one token, the KV capacity, the sequences it
holds, a decode step's floor, prefill cost, throughput, the workers the peak needs,
and TTFT and TPOT floors. Under ``step_model = "roofline"`` the step costs are the
roofline's (max of memory and compute time), which with ``mbu = mfu = 1`` is a
physical lower bound, not a prediction. A traced workload is sized by the trace's own
mean prompt and output and its peak one-minute rate.

Every figure is exact (``Fraction``) and carries its arithmetic in one line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from emulator.analysis.numbers import show
from emulator.analysis.placement import exact
from emulator.scenario import Roofline, Scenario, WorkerSpec

__all__ = ["TokenWorkload", "token_floors", "token_rates", "token_workload"]

#: The window of the peak rate of a trace.
PEAK_WINDOW_S = 60
_NEEDS = "n/a: needs [hardware] and [models.{name}.arch]"


@dataclass(frozen=True)
class TokenWorkload:
    """One model's requests as the figures see them: mean sizes and, for a trace, its
    peak one-minute rate (None: Poisson traffic, whose peak is ``traffic.peak_qps``)."""

    prompt: int
    output: int
    source: str  # how the sizes were found, for the explanations
    peak_qps: Fraction | None = None
    peak_how: str = ""


def token_workload(scenario: Scenario, name: str) -> TokenWorkload:
    """The model's mean prompt and output, and for a trace its peak 1-minute rate."""
    spec = scenario.models[name]
    t = scenario.traffic
    if t.trace is None:
        return TokenWorkload(spec.tokens, spec.output_tokens, "the model's mean sizes")
    from emulator.scenario.traces import load_trace

    trace = load_trace(t.trace)
    if trace.model is None:
        index = list(range(len(trace)))
    else:
        index = [i for i, model in enumerate(trace.model) if model == name]
    count = len(index)
    if count == 0:
        return TokenWorkload(spec.tokens, spec.output_tokens, f"the model's mean sizes (no {name} rows in the trace)")
    # Means rounded to whole tokens: the figures chunk prompts by whole tokens.
    prompt = round(Fraction(int(trace.prompt_tokens[index].sum()), count))
    output = round(Fraction(int(trace.output_tokens[index].sum()), count))
    times = trace.arrival_s[index]
    # The most arrivals in any window of PEAK_WINDOW_S trace seconds starting at an arrival.
    ends = times.searchsorted(times + PEAK_WINDOW_S, side="left")
    most = int((ends - range(count)).max())
    share = exact(spec.share) if trace.model is None else Fraction(1)
    speedup = exact(t.trace_speedup)
    peak = Fraction(most, PEAK_WINDOW_S) * speedup * share
    how = (f"the trace's busiest minute: {most} arrivals / {PEAK_WINDOW_S} s x speedup {show(speedup, '')}"
           + (f" x share {float(share):g}" if trace.model is None else ""))
    return TokenWorkload(max(prompt, 1), max(output, 1), f"the trace's mean sizes over {count:,} requests",
                         peak, how)


def token_rates(add: Any, fig: dict[str, Fraction | None], scenario: Scenario, name: str,
                load: TokenWorkload) -> Fraction | None:
    """A continuous-batching model's capacity and rates, from its worker keys (and its
    GPUs when known): KV per token and in all, the sequences the cache holds, one
    decode step at that concurrency, prefill, and the requests and tokens a worker
    serves per second (its ``worker_qps``)."""
    w = scenario.worker_for(name)
    roof = scenario.roofline_for(name)
    on_roof = roof if w.step_model == "roofline" else None
    prompt, output = load.prompt, load.output
    fig["b"] = None
    _physical_figures(add, fig, scenario, name, roof, w)
    per_request = prompt + output
    by_kv = w.kv_cache_tokens // per_request
    n = min(w.max_num_seqs, by_kv)
    fig["kv_seqs"] = add("kv_concurrent_seqs", "Sequences the KV cache holds", name, by_kv, "sequences",
                         f"{w.kv_cache_tokens:,} KV tokens // ({prompt} prompt + {output} output tokens, "
                         f"{load.source}) = {by_kv}")
    fig["n"] = add("max_concurrent_seqs", "Most sequences running at once", name, n, "sequences",
                   f"the KV cache's {by_kv}, capped by max_num_seqs {w.max_num_seqs}")
    prefill = _prefill_s(w, on_roof, prompt)
    fig["prefill"] = add("prefill_s_per_request", "Prefill compute per request", name, prefill, "s",
                         _prefill_how(w, on_roof, prompt))
    thousand = _prefill_1k(w, on_roof)
    add("prefill_s_per_1k_tokens", "Prefill of 1,000 prompt tokens", name, thousand, "s",
        f"max(memory, compute) of one step prefilling 1,000 tokens alone: "
        f"max({_s(on_roof.weights_read_s, 's')} + 1,000 x {_s(on_roof.kv_token_read_s, 's')}, "
        f"1,000 x {_s(on_roof.token_compute_s, 's')}){_eff(on_roof)}" if on_roof is not None else
        f"1,000 tokens x {w.prefill_token_s:g} s/token"
        + (" + attention over the chunk(s)" if w.prefill_attn_s else "") + ", without the step base")
    context = Fraction(prompt) + Fraction(output, 2)
    step = _decode_step(w, on_roof, n, context)
    fig["step"] = add("decode_step_at_full_s", "A decode step at full concurrency", name, step, "s",
                      _decode_how(w, on_roof, n, context))
    if n == 0:
        wq = None
    elif output > 1:
        # Per second: decode steps serve n sequences a token each; prefills take their
        # compute on top. X requests/s need X (output - 1) tokens = n steps/s ...
        wq = 1 / ((output - 1) * step / n + prefill)
    else:
        wq = 1 / prefill if prefill else None
    fig["wq"] = add("worker_qps", "Throughput per worker", name, wq, "QPS",
                    f"1 / ((output {output} - 1) x {_s(step, 's')} per step / {n} sequences + "
                    f"{_s(prefill, 's')} prefill): at full concurrency, prefill on top of decode")
    add("max_qps_per_worker", "Most requests per second per worker", name, wq, "QPS",
        "the throughput per worker above: the most a worker completes at full concurrency")
    tokens = None if wq is None else wq * output
    add("max_output_tokens_per_s", "Output tokens per second per worker", name, tokens, "tokens/s",
        f"{_s(wq, 'QPS')} x {output} output tokens, at full concurrency")
    return wq


def _physical_figures(add: Any, fig: dict[str, Fraction | None], scenario: Scenario, name: str,
                      roof: Roofline | None, w: WorkerSpec) -> None:
    """What the GPUs and the model's shape fix: KV bytes, capacity, the decode floor."""
    need = _NEEDS.format(name=name)
    if roof is None:
        add("kv_bytes_per_token", "KV cache bytes per token", name, None, "bytes", need)
        add("kv_capacity_tokens", "KV capacity per worker", name, w.kv_cache_tokens, "tokens",
            "worker.kv_cache_tokens as configured (no GPU or model shape to check it against)")
        fig["decode_floor"] = add("decode_step_floor_s", "Decode step floor (weights read once)", name, None,
                                  "s", need)
        return
    s, gpu = roof.shape, roof.gpu
    add("kv_bytes_per_token", "KV cache bytes per token", name, roof.kv_bytes_per_token, "bytes",
        f"2 (K and V) x {s.layers} layers x {s.kv_heads} KV heads x {s.head_dim} head dim x "
        f"{show(roof.dtype_bytes, '')} bytes ({s.name})")
    add("weights_gb", "Weights per worker", name, roof.weight_bytes / 10**9, "GB",
        f"{show(s.params_b, '')}B parameters x {show(roof.dtype_bytes, '')} bytes, over {roof.units} GPUs")
    physical = roof.kv_capacity_tokens
    fig["kv_physical"] = Fraction(physical)
    how = (f"({roof.units} GPUs x {show(gpu.memory_gb, '')} GB x utilisation "
           f"{show(roof.memory_utilization, '')} - {show(roof.weight_bytes / 10**9, '')} GB of weights) "
           f"// {show(roof.kv_bytes_per_token, '')} bytes = {physical:,} tokens")
    auto = scenario.kv_is_auto(name)
    add("kv_capacity_tokens", "KV capacity per worker", name, w.kv_cache_tokens, "tokens",
        how + (' (kv_cache_tokens = "auto")' if auto else
               f"; worker.kv_cache_tokens sets {w.kv_cache_tokens:,}"))
    floor = roof.weight_bytes / (roof.units * gpu.bytes_per_s)
    fig["decode_floor"] = add(
        "decode_step_floor_s", "Decode step floor (weights read once)", name, floor, "s",
        f"{show(roof.weight_bytes / 10**9, '')} GB of weights / ({roof.units} x {show(gpu.hbm_tb_s, '')} TB/s "
        f"{gpu.name}): every decode step reads every weight once, even with an empty cache; a physical "
        "lower bound at full bandwidth, not a prediction")


def token_floors(add: Any, fig: dict[str, Fraction | None], scenario: Scenario, name: str,
                 load: TokenWorkload) -> None:
    """Latency floors of a continuous-batching model: one request alone, and TPOT when
    the worker runs full."""
    w = scenario.worker_for(name)
    roof = scenario.roofline_for(name)
    on_roof = roof if w.step_model == "roofline" else None
    prompt, output = load.prompt, load.output
    chunks = -(-prompt // w.max_batched_tokens)
    if on_roof is not None:
        ttft = _roof_prefill_steps(on_roof, w, prompt)
        how = (f"{chunks} prefill step(s) of at most {w.max_batched_tokens} tokens, each max(memory, "
               f"compute) under the roofline{_eff(on_roof)}")
        tpot = on_roof.step_s(prompt + 1, 1)
        tpot_how = (f"one decode step of one sequence: max({_s(on_roof.weights_read_s, 's')} + "
                    f"{prompt + 1} x {_s(on_roof.kv_token_read_s, 's')}, {_s(on_roof.token_compute_s, 's')})"
                    f"{_eff(on_roof)}")
    else:
        ttft = chunks * exact(w.step_base_s) + _prefill_s(w, None, prompt)
        how = (f"{chunks} prefill step(s) of at most {w.max_batched_tokens} tokens: "
               f"{chunks} x {w.step_base_s:g} s + {_s(_prefill_s(w, None, prompt), 's')} of prefill")
        tpot = exact(w.step_base_s) + exact(w.decode_seq_s) + exact(w.kv_token_s) * (prompt + 1)
        tpot_how = (f"one decode step of one sequence: {w.step_base_s:g} + {w.decode_seq_s:g}"
                    + (f" + {w.kv_token_s:g} x {prompt + 1} context" if w.kv_token_s else ""))
    fig["ttft_floor"] = add("ttft_floor_s", "Time to first token, alone", name, ttft, "s", how)
    fig["tpot_floor"] = add("tpot_floor_s", "Time per output token, alone", name, tpot, "s", tpot_how)
    n, step, wq = fig["n"], fig["step"], fig["wq"]
    full = None
    if n and step is not None and wq and output > 1:
        full = n / (wq * (output - 1))
    fig["tpot_full"] = add("tpot_at_full_concurrency_s", "Time per output token at full concurrency", name,
                           full, "s", f"{_s(n, '')} sequences / ({_s(wq, 'QPS')} x {output - 1} tokens after "
                           "the first): a decode step plus the prefills that share it")
    latency = None if full is None else ttft + (output - 1) * full
    fig["latency_full"] = add("latency_at_full_s", "Request latency at full concurrency", name, latency, "s",
                              f"{_s(ttft, 's')} to the first token + {output - 1} x {_s(full, 's')}")


def peak_figures(add: Any, fig: dict[str, Fraction | None], scenario: Scenario, name: str,
                 load: TokenWorkload, has_peak: bool) -> None:
    """``workers_needed_peak`` when the traffic has no ``peak_qps``: a trace's busiest
    minute, or else the average rate (constant traffic peaks at its mean)."""
    if has_peak and load.peak_qps is None:
        return  # the shared figures gave it from traffic.peak_qps
    wq = fig["wq"]
    if load.peak_qps is not None:
        offered, how = load.peak_qps, load.peak_how
    else:
        offered = exact(scenario.traffic.qps) * exact(scenario.models[name].share)
        how = f"no traffic.peak_qps: the average {_s(offered, 'QPS')} is the peak"
    fig["off_peak"] = offered
    need = None if not wq else offered / wq
    key = "workers_needed_peak" if not has_peak else "workers_needed_trace_peak"
    fig["need_peak"] = add(key, "Workers needed at the peak", name, need, "workers",
                           f"{_s(offered, 'QPS')} ({how}) / {_s(wq, 'QPS')} per worker, before rounding up")
    whole = None if need is None else math.ceil(need)
    fig["whole_peak"] = add(key.replace("workers_needed", "whole_workers"), "Whole workers needed at the peak",
                            name, whole, "workers", f"{_s(need, 'workers')} rounded up to whole workers")


def _s(value: Fraction | None, unit: str) -> str:
    return show(value, unit)


def _eff(roof: Roofline) -> str:
    if roof.mbu == 1 and roof.mfu == 1:
        return " (mbu = mfu = 1: a physical floor, not a prediction)"
    return f" (at mbu {show(roof.mbu, '')}, mfu {show(roof.mfu, '')})"


def _roof_prefill_steps(roof: Roofline, w: WorkerSpec, prompt: int) -> Fraction:
    """The steps that prefill ``prompt`` alone under the roofline, chunk by chunk."""
    total, start = Fraction(0), 0
    while start < prompt:
        c = min(w.max_batched_tokens, prompt - start)
        total += roof.step_s(start + c, c)
        start += c
    return total


def _prefill_s(w: WorkerSpec, roof: Roofline | None, prompt: int) -> Fraction:
    """What one prompt's prefill adds to a worker's busy time: under the roofline its
    tokens' compute (they ride on steps that read the weights anyway); otherwise the
    linear prefill terms, chunked by the step budget (no step bases)."""
    if roof is not None:
        return roof.token_compute_s * prompt
    total, start = Fraction(0), 0
    while start < prompt:
        c = min(w.max_batched_tokens, prompt - start)
        total += exact(w.prefill_token_s) * c + exact(w.prefill_attn_s) * c * (start + c)
        start += c
    return total


def _prefill_how(w: WorkerSpec, roof: Roofline | None, prompt: int) -> str:
    if roof is not None:
        mfu = "" if roof.mfu == 1 else " x mfu " + show(roof.mfu, "")
        return (f"{prompt} prompt tokens x {_s(roof.token_compute_s, 's')} of compute each (2 x "
                f"{show(roof.shape.active_params_b, '')}B active parameters / {roof.units} x "
                f"{show(roof.gpu.bf16_tflops, '')} TFLOPS{mfu}): the weights are read by the decode "
                "steps they share")
    return (f"{prompt} prompt tokens x {w.prefill_token_s:g} s/token"
            + (" + attention over the chunks" if w.prefill_attn_s else ""))


def _prefill_1k(w: WorkerSpec, roof: Roofline | None) -> Fraction:
    if roof is not None:
        return roof.step_s(1000, 1000)
    return _prefill_s(w, None, 1000)


def _decode_step(w: WorkerSpec, roof: Roofline | None, n: int, context: Fraction) -> Fraction:
    if roof is not None:
        return roof.step_s(n * context, n)
    return exact(w.step_base_s) + exact(w.decode_seq_s) * n + exact(w.kv_token_s) * n * context


def _decode_how(w: WorkerSpec, roof: Roofline | None, n: int, context: Fraction) -> str:
    if roof is not None:
        return (f"max(memory {_s(roof.weights_read_s, 's')} + {n} x {_s(context, '')} mean context x "
                f"{_s(roof.kv_token_read_s, 's')}, compute {n} x {_s(roof.token_compute_s, 's')})"
                f"{_eff(roof)}")
    return (f"{w.step_base_s:g} + {w.decode_seq_s:g} x {n} sequences"
            + (f" + {w.kv_token_s:g} x {n} x {_s(context, '')} mean context" if w.kv_token_s else ""))
