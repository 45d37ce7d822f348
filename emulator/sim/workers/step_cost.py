"""The step cost of the continuous worker model: how long one step lasts.

Linear (the default): ``step_base_s + prefill_token_s * chunks + prefill_attn_s * sum
of chunk * (chunk start + chunk) + decode_seq_s * |D| + kv_token_s * D's contexts``.

Roofline (``step_model = "roofline"``): max(memory, compute), the weights plus the KV
read (D's contexts, and each chunk's start + chunk) over the bandwidth, and 2 x active
parameters x (|D| + chunks) over the FLOPs; plus a fixed cost a step (its launch and
its collectives' latency) and each token's tensor-parallel communication.

For a mixture of experts the weights term is that of the experts the step's tokens
(decoders and chunk tokens) hit, looked up by their count (``Worker.r_wtab``).

Table (``step_model = "table"``): a(|D|) + b(|D|) x D's contexts + P(chunk tokens) + e x
the chunks' attention term, read from lists the worker model fills once
(``emulator.scenario.step_table``).

A decode-only step is a line in the decoders' contexts (``decode_line``): under the
roofline max(W + K (C + n (j - 1)), F n) + O + M n, a rising line and a constant (the
fixed cost and the communication of n tokens add to both), so the steps are
compute-bound first and memory-bound after at most one switch.

Speculative decoding (``worker.speculative``, docs/speculative-decoding.md) changes the
decode-only steps only: one is a verification pass of k + 1 tokens per sequence (k
drafted, each verified as a prefill token is computed under the linear model, counted
in the FLOPs and the communication under the roofline; the KV read is the contexts'),
after the draft's k passes, and it emits tau tokens per sequence on average. The engine
spreads them evenly: each decoder gains one token every (verification + draft) / tau,
so ``decode_line`` returns the line of that token-step, a + b scaled by 1 / tau, and
the closed-form stretch holds as it is. A step that prefills runs no draft (one token
per decoder, as without speculation).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from emulator.scenario.specs import SpeculativeSpec
    from emulator.sim.workers.entities import Seq, Worker


def step_time(wk: Worker, chunks: list[tuple[Seq, int]]) -> float:
    """A step of ``wk``'s decoders (their next tokens reserved; none under
    ``prefill_first`` while they wait) and ``chunks``."""
    n_dec = wk.n_dec if wk.ahead else 0
    if wk.roofline:
        # The decoders read their contexts' KV and a chunk the KV of its prompt so
        # far; every decoder and chunk token is computed.
        read = wk.dec_base + n_dec * (wk.clock + 1) if n_dec else 0
        tokens = n_dec
        for s, c in chunks:
            read += s.progress + c
            tokens += c
        weights = wk.r_weights if wk.r_wtab is None else wk.r_wtab[tokens]
        return max(weights + wk.r_kv * read, wk.r_token * tokens) + wk.r_fixed + wk.r_comm * tokens
    if wk.table is not None:
        a, b, prefill, e = wk.table
        tokens = attn = 0
        for s, c in chunks:
            tokens += c
            attn += c * (s.progress + c)
        duration = a[n_dec] + prefill[tokens] + e * attn
        if n_dec:
            duration += b[n_dec] * (wk.dec_base + n_dec * (wk.clock + 1))
        return duration
    spec = wk.spec
    duration = spec.step_base_s + spec.decode_seq_s * n_dec
    for s, c in chunks:
        duration += spec.prefill_token_s * c + spec.prefill_attn_s * c * (s.progress + c)
    if spec.kv_token_s and n_dec:
        duration += spec.kv_token_s * (wk.dec_base + n_dec * (wk.clock + 1))
    return duration


def decode_line(wk: Worker, n: int) -> tuple[float, float, int]:
    """A decode-only step j of ``n`` decoders whose contexts sum to ``wk.c`` in step 1
    lasts a + b (C + n (j - 1)): returns a, b and, under the roofline while compute
    bounds the steps, the last step that stays compute-bound (0: none)."""
    if wk.table is not None:
        return wk.table[0][n], wk.table[1][n], 0
    sp = wk.spec.speculative
    if sp is not None:
        return _speculative_line(wk, n, sp)
    if not wk.roofline:
        spec = wk.spec
        return spec.step_base_s + spec.decode_seq_s * n, spec.kv_token_s, 0
    return _roofline_line(wk, n, n)


def _roofline_line(wk: Worker, n: int, tokens: int) -> tuple[float, float, int]:
    """``decode_line`` under the roofline for ``n`` decoders computing ``tokens``."""
    # Step j reads the weights and C + n (j - 1) tokens of KV and computes the tokens:
    # compute-bound steps come first, so the stretch is one line or the other,
    # ending at the switch.
    # A mixture's weights term is that of the step's tokens' experts: fixed while n is.
    compute = wk.r_token * tokens
    fixed = wk.r_fixed + wk.r_comm * tokens
    weights = wk.r_weights if wk.r_wtab is None else wk.r_wtab[tokens]
    if weights + wk.r_kv * wk.c >= compute:
        return weights + fixed, wk.r_kv, 0
    # The last j with weights + r_kv (C + n (j - 1)) <= compute.
    rise = wk.r_kv * n
    switch = int((compute - weights - wk.r_kv * wk.c) // rise) + 1 if rise else 0
    return compute + fixed, 0.0, switch


def _speculative_line(wk: Worker, n: int, sp: SpeculativeSpec) -> tuple[float, float, int]:
    """``decode_line`` of a token-step under speculation: the verification pass of
    k + 1 tokens per decoder plus the draft's passes, over tau."""
    k = sp.draft_tokens
    tau = sp.tokens_per_step
    draft = sp.draft_s(n)
    if wk.roofline:
        a, b, switch = _roofline_line(wk, n, n * (k + 1))
    else:
        spec = wk.spec
        a = spec.step_base_s + spec.decode_seq_s * n + spec.prefill_token_s * k * n
        b, switch = spec.kv_token_s, 0
    # (A token-step's KV read grows as the context does: one token a token-step.)
    return (a + draft) / tau, b / tau, switch
