"""What SLO-aware admission does not predict of a split model's prompt's TTFT, from the
packing of prefill steps: the rule (``emulator/sim/admission.py``) costs the step that
completes a prompt full, the rest of its budget taken by fresh tokens of a later
arrival, and adds the prompt's transfer and one decode step. Two things of that step
it leaves out:

* Later arrivals' tier copies. On a busy worker the prompts waiting behind take the
  rest of the step's budget, and each whose prefix is found in a lower KV tier
  (``worker.kv_tiers``) brings its copy, whose seconds go to the step it starts in:
  the step is that much longer, and so is the prompt's TTFT. (Their chunks' attention
  over their cached prefixes also differs from the fresh tokens the rule costs: more
  for each chunk's cached start, less for the one chunk the rule costs the rest as;
  that difference is left out.)
* The queue on the decode worker's KV link. All the prompts a step completes get their
  first token at its end and are handed off together; the decode pool's policy, which
  counts the decode workers' running and waiting requests and not the handoffs on
  their way, sends them all to the same decode worker, whose link moves one transfer
  at a time in the order handed off. A prompt waits for the transfers of the prompts
  completed before it in its step. (The next burst goes to the decode worker with the
  fewest requests, seldom the one the last burst went to, so the link's work left from
  earlier bursts is left out: a link moves a step's transfers in well under a step.)

Both come from one picture of full steps: the prompts' uncached tokens run as one
stream cut every ``budget`` tokens, first come first served, so the point at which a
prompt ends falls uniformly within its step, U tokens from its start (U uniform on
[0, budget)). The k-th prompt before it (k >= 1) ended in the same step when its own
tokens X_0 and those of the k - 1 between sum to at most U; the k-th behind it starts
in the step when the tokens of the k - 1 between it and the prompt sum to less than
budget - U (the first always does). So with (X_j, Y_j) the tokens and the cost of the
j-th prompt counted (its transfer ahead; its tier copy behind),
P(k counted, Y_1 + ... + Y_k = y) = P(a sum of tokens <= U) - P(that sum with one more
prompt's tokens <= U), stepped on a grid of tokens by seconds with the prompt points'
pairs. The two waits are taken as independent and added; the prompt's TTFT is the
rule's prediction plus their sum (``queueing.admitted_share`` takes its law).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from emulator.analysis.fleet.queueing import _prompt_points
from emulator.analysis.fleet.steps import StepCost
from emulator.analysis.fleet.workload import Workload

__all__ = ["cached_prefix_tokens", "late_wait", "prompt_pairs", "quantile", "step_sum"]

#: Token bins of a prefill step's budget.
TOKEN_BINS = 128
#: Seconds of a bin of the wait.
WAIT_BIN_S = 0.001


def cached_prefix_tokens(load: Workload, block: int) -> float:
    """The tokens of a mean prefix a cache holds: its whole blocks (0 without prefixes)."""
    pre = load.prefix
    if pre is None or not pre.groups:
        return 0.0
    return math.floor(float(np.sum(pre.shares * pre.tokens) / np.sum(pre.shares)) / block) * block


def quantile(values: np.ndarray, shares: np.ndarray, q: float) -> float:
    """The least value whose cumulative share reaches ``q``."""
    return float(values[min(values.size - 1, int(np.searchsorted(np.cumsum(shares), q)))])


def step_sum(tokens: np.ndarray, cost_s: np.ndarray, weights: np.ndarray, budget: int, horizon_s: float,
             own: bool) -> np.ndarray:
    """The law of the sum of ``cost_s`` over the prompts counted with a prompt in its
    step (see the module docstring), on bins of ``WAIT_BIN_S`` from 0 to ``horizon_s``
    (the last bin holding all beyond): ``own`` the prompts ended before it (its own
    tokens count against U), else those starting behind it. ``tokens`` each prompt
    point's uncached tokens, ``weights`` its share."""
    w = np.asarray(weights, dtype=np.float64)
    w = w / w.sum()
    size = budget / TOKEN_BINS
    n_w = int(math.ceil(horizon_s / WAIT_BIN_S)) + 1
    s_bin = np.floor(np.asarray(tokens, dtype=np.float64) / size).astype(np.int64)
    y_bin = np.minimum(np.rint(np.asarray(cost_s, dtype=np.float64) / WAIT_BIN_S).astype(np.int64), n_w - 1)
    inside = s_bin < TOKEN_BINS  # a prompt of a step or more: none past it is in the step
    rows = TOKEN_BINS
    passes = 1.0 - (np.arange(rows) + 0.5) / TOKEN_BINS  # P(U past each token bin's middle)
    kernel = np.zeros((rows, n_w))
    np.add.at(kernel, (s_bin[inside], y_bin[inside]), w[inside])
    y_law = np.bincount(y_bin, weights=w, minlength=n_w)[:n_w]
    shape = (2 * rows, 2 * n_w)
    kernel_fft = np.fft.rfft2(kernel, shape)
    # g: the tokens that decide whether the next prompt is counted, and the costs so far.
    g = np.zeros((rows, n_w))
    if own:
        np.add.at(g[:, 0], s_bin[inside], w[inside])
    else:
        g[0, 0] = 1.0
    law = np.zeros(n_w)
    law[0] = 1.0 - float(passes @ g[:, 0]) if own else 0.0  # none counted (behind: the first is)
    first = not own
    while float(g.sum()) > 1e-9:
        counted = g.sum(axis=0) if first else passes @ g  # the next prompt is counted (its cost not yet added)
        first = False
        with_it = np.convolve(counted, y_law)[:n_w]
        with_it[-1] += float(counted.sum() - with_it.sum())  # what passes the horizon
        g = np.maximum(np.fft.irfft2(np.fft.rfft2(g, shape) * kernel_fft, shape)[:rows, :n_w], 0.0)
        law += with_it - passes @ g  # exactly this many: this one counted, not the next
    law = np.maximum(law, 0.0)
    return law / law.sum()


def prompt_pairs(load: Workload, hit: float, cached_tokens: float, tiers: Sequence[tuple[str, float, float]],
                 seconds_per_token: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each prompt point found cached (``hit``: in the GPU cache or a tier, by the
    tiers' shares, ``tiers`` as ``queueing.prefill_times`` reads them) or not: its
    uncached tokens, its tier copy's seconds, its transfer (its whole prompt's KV,
    ``seconds_per_token``) and its share."""
    sizes = _prompt_points(load)
    cached = np.minimum(cached_tokens, np.maximum(sizes - 1, 0.0))
    lower = [(share, load_s / share) for _, share, load_s in tiers if share > 0]
    found = [(max(0.0, hit - sum(share for share, _ in lower)), 0.0), *lower] if hit > 0 else []
    tokens, copies, transfer, weights = [], [], [], []
    for start, share, copy_s in [*((cached, s, c) for s, c in found), (np.zeros_like(sizes), 1.0 - hit, 0.0)]:
        if share <= 0:
            continue
        tokens.append(sizes - start)
        copies.append(np.full(sizes.size, copy_s))
        transfer.append(sizes * seconds_per_token)
        weights.append(np.full(sizes.size, share / sizes.size))
    return np.concatenate(tokens), np.concatenate(copies), np.concatenate(transfer), np.concatenate(weights)


def late_wait(load: Workload, cost: StepCost, hit: float, cached_tokens: float,
              tiers: Sequence[tuple[str, float, float]], links: int, seconds_per_token: float,
              horizon_s: float) -> tuple[np.ndarray, np.ndarray]:
    """The law of what the rule leaves out of a split model's prompt's TTFT (the module
    docstring): values (s, on bins of ``WAIT_BIN_S``) and their shares; the prompt
    points as ``prompt_pairs`` gives them, ``links`` decode workers."""
    tokens, copies, transfer, weights = prompt_pairs(load, hit, cached_tokens, tiers, seconds_per_token)
    budget = cost.spec.max_batched_tokens
    law = step_sum(tokens, copies, weights, budget, horizon_s, own=False)
    if links > 0 and seconds_per_token > 0:
        ahead = step_sum(tokens, transfer, weights, budget, horizon_s, own=True)
        law = np.convolve(law, ahead)[: law.size]
        law[-1] += max(0.0, 1.0 - float(law.sum()))
    return np.arange(law.size) * WAIT_BIN_S, law
