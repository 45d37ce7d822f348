"""The continuous worker's step time, as the engine charges it, for the analysis.

Linear (``step_model = "linear"``): a step lasts

    step_base_s + prefill_token_s x prefill tokens + prefill_attn_s x sum of chunk x
    (chunk start + chunk) + decode_seq_s x decoders + kv_token_s x their context tokens

Roofline: max(weights + KV read over the bandwidth, tokens computed over the FLOPs),
each scaled by ``mbu`` and ``mfu``, plus a fixed cost a step (launch, collectives'
latency) and each token's tensor-parallel communication (``emulator.scenario.Roofline``);
for a mixture of experts the weights read are those of the experts the step's tokens hit.

Table: a(decoders) + b(decoders) x their contexts + P(prefill tokens) + e x the
attention term, fitted to a table of step times (``emulator.scenario.step_table``); a
prompt adds to a step what P and e say of its tokens, as under the linear model.

What a prompt adds to the step that takes it differs between the linear model and the
roofline. Under the linear
model its terms add to the step whatever else is in it. Under the roofline a decode step
of a large batch is bound by memory, and a prompt's compute first fills the time the
step spends reading weights: the first prompt of a step costs only what its compute
adds beyond that, a second one its whole compute. With prompts reaching a worker at
random, the prompts that share a step are Poisson with mean mu = (arrivals per step),
and (1 - exp(-mu)) / mu of them are the first in theirs.

Speculative decoding (``worker.speculative``): a decode-only step is a verification
pass of k + 1 tokens per sequence plus the draft's k passes, and gives each sequence
tau tokens on average, one every (verification + draft) / tau (``token_step``, as the
engine spreads them); a step that prefills decodes one token per sequence, as without
speculation (``decode``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

from emulator.scenario import Roofline, Scenario, SpeculativeSpec, WorkerSpec
from emulator.scenario.step_table import StepTable, load_step_table

__all__ = ["StepCost", "step_cost"]


@dataclass(frozen=True)
class StepCost:
    """One model's step time: linear coefficients, or the roofline's three."""

    spec: WorkerSpec
    roof: Roofline | None  # set when step_model = "roofline"
    inputs: tuple[str, ...]
    w: float = 0.0  # roofline: reading the weights once
    k: float = 0.0  # roofline: reading one KV token
    f: float = 0.0  # roofline: computing one token
    o: float = 0.0  # roofline: a step's fixed cost (launch, collectives' latency)
    m: float = 0.0  # roofline: one token's tensor-parallel communication
    table: StepTable | None = None  # set when step_model = "table"
    # roofline, a mixture of experts: the weights read are the non-routed ones (w_rest)
    # plus w_expert for each distinct expert hit, of moe_e routed experts, moe_k a token
    moe_e: int = 0
    moe_k: int = 0
    w_rest: float = 0.0
    w_expert: float = 0.0

    @property
    def roofline(self) -> bool:
        return self.roof is not None

    def weights(self, tokens: float) -> float:
        """Roofline: reading the weights a step of ``tokens`` tokens reads (a mixture:
        those of the experts hit, E (1 - (1 - k/E)^tokens) of each MoE layer's E; at a
        mean batch size this is the hit of the mean, a little above the mean hit)."""
        if not self.moe_e:
            return self.w
        e = self.moe_e
        return self.w_rest + self.w_expert * (e - e * (1 - self.moe_k / e) ** max(tokens, 0.0))

    def decode(self, n: float, context: float) -> float:
        """A decode-only step of ``n`` sequences of ``context`` tokens each."""
        if n <= 0:
            return 0.0
        if self.roof is not None:
            return max(self.weights(n) + self.k * n * context, self.f * n) + self.o + self.m * n
        if self.table is not None:
            a, b = self.table.decode_terms(n)
            return a + b * n * context
        s = self.spec
        return s.step_base_s + s.decode_seq_s * n + s.kv_token_s * n * context

    @property
    def speculative(self) -> SpeculativeSpec | None:
        return self.spec.speculative

    def verify(self, n: float, context: float) -> float:
        """Speculation: a verification pass of ``n`` sequences of ``context`` tokens
        each, k + 1 tokens computed per sequence (the linear model counts each drafted
        token as a prefill token)."""
        sp = self.spec.speculative
        assert sp is not None
        tokens = n * (sp.draft_tokens + 1)
        if self.roof is not None:
            return max(self.w + self.k * n * context, self.f * tokens) + self.o + self.m * tokens
        s = self.spec
        return (s.step_base_s + s.decode_seq_s * n + s.prefill_token_s * sp.draft_tokens * n
                + s.kv_token_s * n * context)

    def token_step(self, n: float, context: float) -> float:
        """The time between a decoder's tokens in decode-only steps: ``decode``, or
        under speculation (verification + the draft's passes) / tau."""
        sp = self.spec.speculative
        if sp is None or n <= 0:
            return self.decode(n, context)
        return (self.verify(n, context) + sp.draft_s(n)) / sp.tokens_per_step

    def token_alone_s(self, context: int) -> Fraction:
        """Exactly: the time between the tokens of one sequence of ``context`` tokens
        decoding alone (the TPOT floor): ``decode_alone_s``, or under speculation its
        verification pass and the draft's passes over tau."""
        sp = self.spec.speculative
        if sp is None:
            return self.decode_alone_s(context)
        k = sp.draft_tokens
        if self.roof is not None:
            verify = self.roof.step_s(context, k + 1)
        else:
            s = self.spec
            verify = (_x(s.step_base_s) + _x(s.decode_seq_s) + _x(s.prefill_token_s) * k
                      + _x(s.kv_token_s) * context)
        draft = k * (_x(sp.draft_step_s) + _x(sp.draft_seq_s))
        alpha = _x(sp.acceptance_rate)
        return (verify + draft) / sum(alpha ** i for i in range(k + 1))

    def prompt_terms(self, new: float, read: float, attn: float) -> float:
        """Linear: what one prompt adds to a step, prefilling ``new`` tokens whose
        attention term is ``attn`` (sum of chunk x (start + chunk))."""
        if self.table is not None:
            return self.table.prefill(new) + self.table.e * attn
        s = self.spec
        return s.prefill_token_s * new + s.prefill_attn_s * attn

    def prompt_extra(self, n: float, context: float, new: float, read: float, attn: float,
                     per_step: float) -> float:
        """What one prompt adds, on average, to the time of the steps of a worker with
        ``n`` decoders of ``context`` tokens, prefilling ``new`` tokens whose KV spans
        ``read`` at the end, when ``per_step`` prompts reach a step on average."""
        if self.roof is None:
            return self.prompt_terms(new, read, attn)
        decode = self.decode(n, context)
        memory = self.weights(n + new) + self.k * (n * context + read)
        first = max(memory, self.f * (n + new)) + self.o + self.m * (n + new) - decode
        more = max(self.f * new, self.k * read) + self.m * new
        return more + (first - more) * first_share(per_step)

    def prefill_steps(self, prompt: int, start: int = 0) -> float:
        """Prefilling one prompt alone, chunk by chunk, from ``start`` (cached tokens)."""
        budget = self.spec.max_batched_tokens
        total, at = 0.0, start
        while at < prompt:
            c = min(budget, prompt - at)
            if self.roof is not None:
                total += max(self.weights(c) + self.k * (at + c), self.f * c) + self.o + self.m * c
            elif self.table is not None:
                total += self.table.step_s(0, 0, c, c * (at + c))
            else:
                s = self.spec
                total += s.step_base_s + s.prefill_token_s * c + s.prefill_attn_s * c * (at + c)
            at += c
        return total

    def prefill_alone_s(self, prompt: int) -> Fraction:
        """Exactly: prefilling one prompt alone, chunk by chunk (the TTFT floor's steps)."""
        budget = self.spec.max_batched_tokens
        total, at = Fraction(0), 0
        while at < prompt:
            c = min(budget, prompt - at)
            if self.roof is not None:
                total += self.roof.step_s(at + c, c)
            elif self.table is not None:
                total += Fraction(self.table.step_s(0, 0, c, c * (at + c)))
            else:
                s = self.spec
                total += (_x(s.step_base_s) + _x(s.prefill_token_s) * c + _x(s.prefill_attn_s) * c * (at + c))
            at += c
        return total

    def decode_alone_s(self, context: int) -> Fraction:
        """Exactly: a decode step of one sequence of ``context`` tokens (the TPOT floor)."""
        if self.roof is not None:
            return self.roof.step_s(context, 1)
        if self.table is not None:
            return Fraction(self.table.step_s(1, context, 0, 0))
        s = self.spec
        return _x(s.step_base_s) + _x(s.decode_seq_s) + _x(s.kv_token_s) * context

    def full_prefill_step(self, prompt: float, attn_per_token: float) -> float:
        """A prefill-only step packed to the token budget with prompts of ``prompt``
        tokens: its time per prefill token."""
        budget = self.spec.max_batched_tokens
        if self.roof is not None:
            return (max(self.weights(budget) + self.k * budget, self.f * budget) + self.o + self.m * budget) / budget
        if self.table is not None:
            return self.table.step_s(0, 0, budget, 0) / budget + self.table.e * attn_per_token
        s = self.spec
        return (s.step_base_s + s.prefill_token_s * budget) / budget + s.prefill_attn_s * attn_per_token


def _x(value: float) -> Fraction:
    """A user number read by its decimal spelling (2.5e-05 is exactly 1/40000)."""
    return Fraction(repr(value))


def first_share(mu: float) -> float:
    """Of Poisson(mu) prompts per step, the share that are the first in their step."""
    if mu <= 1e-9:
        return 1.0
    return -math.expm1(-mu) / mu


def step_cost(scenario: Scenario, name: str) -> StepCost:
    """``name``'s step time, and the key paths it stands on."""
    spec = scenario.worker_for(name)
    own = dict(scenario.models[name].worker_overrides)

    def key(k: str) -> str:
        return f"models.{name}.worker.{k}" if k in own else f"worker.{k}"

    if spec.step_model == "roofline":
        roof = scenario.roofline_for(name)
        assert roof is not None, "validation requires arch and hardware for the roofline"
        inputs: tuple[str, ...] = (key("mbu"), key("mfu"), "hardware.gpu", f"models.{name}.arch.model",
                  f"models.{name}.worker_units", key("step_model"))
        if roof.step_overhead_s:
            inputs += (key("step_overhead_s"),)
        if spec.speculative is not None:
            inputs += (key("speculative"),)
        if roof.communicates:  # the catalog's link and hidden size stand on hardware.gpu and arch.model
            hw, arch = scenario.hardware, scenario.models[name].arch
            inputs += tuple(f"hardware.{k}" for k in ("link_gb_s", "collective_us")
                            if hw is not None and getattr(hw, k) is not None)
            if arch is not None and arch.hidden_size is not None:
                inputs += (f"models.{name}.arch.hidden_size",)
        if roof.moe:
            arch = scenario.models[name].arch
            inputs += tuple(f"models.{name}.arch.{k}" for k in
                            ("experts", "experts_per_token", "moe_layers", "expert_params_b",
                             "expert_parallel", "experts_read")
                            if arch is not None and getattr(arch, k) not in (None, 1, "hit"))
        cost = StepCost(spec, roof, inputs, float(roof.weights_read_s), float(roof.kv_token_read_s),
                        float(roof.token_compute_s), float(roof.fixed_step_s), float(roof.comm_token_s))
        if roof.moe and roof.experts_read == "hit":
            per_s = roof.units * roof.gpu.bytes_per_s * roof.mbu
            cost = replace(cost, moe_e=roof.shape.experts, moe_k=roof.shape.experts_per_token,
                           w_rest=float(roof.weight_bytes_read(0) / per_s),
                           w_expert=float(roof.shape.moe_layers * roof.expert_bytes / per_s))
        return cost
    if spec.step_model == "table":
        assert spec.step_table is not None, "validation requires the table"
        return StepCost(spec, None, (key("step_model"), key("step_table")), table=load_step_table(spec.step_table))
    used = ["step_base_s", "prefill_token_s", "decode_seq_s"]
    used += [k for k in ("prefill_attn_s", "kv_token_s", "speculative") if getattr(spec, k)]
    return StepCost(spec, None, tuple(key(k) for k in used))
