"""The numbers pass for a mixture of experts under the roofline: its parameters (all and
active), the routed experts a step's tokens hit at the decode batch of average traffic,
at a worker's capacity and in a full prefill chunk, the weights each of those steps
reads, and, under expert parallelism, what its all-to-alls cost a step. The experts hit
are E (1 - (1 - k/E)^B) for B tokens (``Roofline.weight_bytes_read``, the figure the
engine's step time uses); at a mean batch the figure is that of the mean.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

from emulator.analysis.numbers import Adder, show
from emulator.scenario import Roofline, Scenario

if TYPE_CHECKING:
    from emulator.analysis.fleet import ModelAnalysis

__all__ = ["moe_figures"]


def _hit(roof: Roofline, tokens: Fraction | float) -> Fraction:
    """Expected distinct routed experts of one MoE layer that ``tokens`` tokens hit (a
    mean batch may be fractional)."""
    s = roof.shape
    if roof.experts_read == "all":
        return Fraction(s.experts)
    e, k = s.experts, s.experts_per_token
    return Fraction(e - e * (1 - k / e) ** float(tokens)) if tokens > 0 else Fraction(0)


def _read_gb(roof: Roofline, hit: Fraction) -> Fraction:
    s = roof.shape
    rest = roof.weight_bytes - s.routed_params_b * 10**9 * roof.dtype_bytes
    return (rest + s.moe_layers * hit * roof.expert_bytes) / 10**9


def moe_figures(add: Adder, scenario: Scenario, m: ModelAnalysis) -> None:
    """Every figure of a mixture of experts (nothing for a dense model, or off the
    roofline)."""
    name = m.name
    roof = scenario.roofline_for(name)
    if roof is None or not roof.moe or scenario.worker_for(name).step_model != "roofline":
        return
    s = roof.shape
    arch = f"models.{name}.arch"
    inputs = (f"{arch}.model", f"{arch}.experts", f"{arch}.experts_per_token", f"{arch}.moe_layers",
              f"{arch}.expert_params_b", f"{arch}.experts_read")
    add("moe_params_b", "Parameters, all experts resident", name, s.params_b, "B",
        f"{s.name}: {s.moe_layers} MoE layers x {s.experts} routed experts x {show(s.expert_params_b, '')}B "
        f"= {show(s.routed_params_b, '')}B routed, the rest (attention, dense layers, {s.shared_experts} shared "
        "experts, embeddings) read every step", inputs)
    add("moe_active_params_b", "Parameters active a token", name, s.active_params_b, "B",
        f"{s.experts_per_token} of {s.experts} routed experts a token, plus the rest: the compute is 2 FLOPs "
        "per active parameter", inputs)
    how = ("every expert, as if dense (experts_read = \"all\")" if roof.experts_read == "all" else
           f"{s.experts} (1 - (1 - {s.experts_per_token}/{s.experts})^B) for B tokens, routing taken as uniform")
    batches: list[tuple[str, str, Fraction | float | None]] = []
    kv = m.kv.get("avg")
    if kv and kv.get("running") is not None:
        batches.append(("decode_avg", "a decode step at average traffic", kv["running"]))
    serving = m.pool("decode") or m.pools[0]
    if serving.worker.concurrency is not None:
        batches.append(("decode_capacity", "a decode step at a worker's capacity", serving.worker.concurrency))
    budget = scenario.worker_for(name).max_batched_tokens
    batches.append(("prefill_chunk", f"a full prefill chunk of {budget:,} tokens", budget))
    for tag, word, tokens in batches:
        assert tokens is not None
        hit = _hit(roof, tokens)
        add(f"experts_hit_{tag}", f"Experts hit a MoE layer, {word}", name, hit, "experts",
            f"{how}, B = {show(Fraction(tokens), '')}", inputs)
        add(f"weights_read_{tag}_gb", f"Weights read, {word}", name, _read_gb(roof, hit), "GB",
            f"{show(roof.weight_bytes / 10**9, '')} GB resident, less the experts no token of the step picks: "
            f"{s.moe_layers} MoE layers x {show(hit, '')} experts x {show(roof.expert_bytes / 10**6, '')} MB", inputs)
    if roof.all_to_all:
        gpu = roof.gpu
        latency = 2 * s.moe_layers * (gpu.collective_us or Fraction(0)) / 10**6
        ep = roof.expert_parallel
        ep_inputs = (*inputs, f"{arch}.expert_parallel", "hardware.gpu", "hardware.link_gb_s",
                     "hardware.collective_us")
        add("all_to_all_latency_s", "Expert-parallel all-to-alls' latency per step", name, latency, "s",
            f"a dispatch and a combine x {s.moe_layers} MoE layers x {show(gpu.collective_us, '')} us: paid by "
            "every step", ep_inputs)
        add("all_to_all_per_token_s", "Expert-parallel all-to-all per token in a step", name,
            roof.all_to_all_token_s, "s",
            f"2 x {s.moe_layers} MoE layers x {s.experts_per_token} copies x ({ep} - 1) / {ep} x {s.hidden} hidden "
            f"x {show(roof.dtype_bytes, '')} bytes / {show(gpu.link_gb_s, '')} GB/s link each way", ep_inputs)
        if serving.worker.concurrency is not None:
            n = serving.worker.concurrency
            add("all_to_all_step_capacity_s", "All-to-alls of a decode step at a worker's capacity", name,
                latency + n * roof.all_to_all_token_s, "s",
                f"{show(latency, 's')} of latency + {show(n, '')} tokens x {show(roof.all_to_all_token_s, 's')}",
                ep_inputs)
