"""What one worker of a pool serves: the static batch formula, or the continuous step
model at the concurrency its KV cache and limits allow.

Static: a batch holds ``max_batch_tokens // tokens`` requests and takes ``batch_s``
(scaled by its tokens when ``service = "linear"``); a worker serves one batch at a time.

Continuous: with ``n`` sequences decoding, a worker runs steps back to back, each
carrying the ``n`` decoders and the prompts that arrived. Per second its ``X`` requests
need ``X (O - 1)`` decode tokens, ``n`` a step, and each prompt adds its prefill to the
step that takes it, so

    1 = X (O - 1) / n x decode step(n) + X x prefill extra      X(n) = 1 / (...)

and the time per output token is the mean step, ``n / (X (O - 1))``. Concurrency grows
with load up to the most the worker allows: ``max_num_seqs``, the sequences its KV cache
holds (a running sequence's KV weighted by how long it runs, see ``workload``), and the
token budget of a step. The worker's capacity is X at the best concurrency it can
reach whose time per output token meets the TPOT goal. With a prefix cache, what the
running sequences leave of the KV cache holds prefixes, so more concurrency means fewer
cached prefixes and more prefill (``prefix``): the best concurrency can be below the
limit.

A prefill pool's worker runs prompts only, in steps packed to the token budget at
saturation; a decode pool's worker takes each request with its prompt's KV and one
token still to compute (and serves the prompts under the decider's threshold whole).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from emulator.analysis.fleet.cache_model import PrefixCacheModel
from emulator.analysis.fleet.steps import StepCost, first_share
from emulator.analysis.fleet.workload import Workload
from emulator.scenario import Scenario, WorkerSpec

__all__ = ["DirectPrompts", "WorkerCapacity", "continuous_worker", "direct_prompts", "static_worker"]

#: Largest concurrency scanned one by one; beyond it a geometric grid.
SCAN_ALL = 2048
#: A goal that more than this share of requests misses at any load leaves no capacity.
MISS_SHARE = 0.1


@dataclass(frozen=True)
class WorkerCapacity:
    """One worker of a pool at its capacity. Figures are exact (``Fraction``) where the
    arithmetic is rational (the batch formula), the float's exact value otherwise."""

    qps: Fraction  # most requests a second it serves with the goals met
    throughput_qps: Fraction  # most it completes at its concurrency limit, goals aside
    concurrency: Fraction  # sequences running at capacity (static: requests in a batch)
    limit: int  # the most sequences it may run (static: requests per batch)
    kv_sequences: int | None  # sequences its KV cache holds (None: static)
    binding: str  # what caps it: batch, kv_cache, max_num_seqs, token_budget, tpot_goal, ...
    step_s: Fraction | None  # a decode step at capacity (static: a batch's service time)
    tpot_s: Fraction | None  # mean time per output token at capacity
    prefill_s: Fraction | None  # what one request's prefill adds to the worker's busy time
    hit_rate: Fraction | None  # expected share of prefix tokens found cached
    how: str  # one line: how the capacity was found
    inputs: tuple[str, ...]
    notes: tuple[str, ...] = field(default=())
    #: Goals no load meets (``tpot_s``, ``ttft_s``), left out of ``qps``.
    goals_left_out: tuple[str, ...] = field(default=())
    #: The mean time per output token at the concurrency limit (throughput_qps's).
    full_tpot_s: Fraction | None = None
    #: Per lower KV tier, fastest first: its name, its expected share of a request's
    #: usable prefix found there (not above it) and the seconds a request spends loading.
    tiers: tuple[tuple[str, float, float], ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {k: ([list(t) if isinstance(t, tuple) else t for t in v] if isinstance(v, tuple) else _plain(v))
                for k, v in self.__dict__.items()}


def _plain(value: Any) -> Any:
    return float(value) if isinstance(value, Fraction) else value


def _q(value: float | None) -> Fraction | None:
    """A float's exact value (None stays None)."""
    return None if value is None else Fraction(value)


def static_worker(scenario: Scenario, name: str) -> WorkerCapacity:
    """The batch formula: requests per batch over the batch's service time."""
    spec = scenario.models[name]
    d, w = scenario.dispatcher, scenario.worker_for(name)
    b = d.max_batch_tokens // spec.tokens if spec.tokens > 0 else 0
    service = Fraction(repr(w.batch_s))
    if w.service == "linear" and b > 0:
        service = service * Fraction(b * spec.tokens, d.max_batch_tokens)
    qps = Fraction(b) / service
    inputs = ("dispatcher.max_batch_tokens", f"models.{name}.tokens", "worker.batch_s", "worker.service")
    how = (f"{d.max_batch_tokens} max batch tokens // {spec.tokens} tokens = {b} requests a batch, "
           f"one batch per {float(service):g} s")
    binding = "batch" if b else "no_fit"
    return WorkerCapacity(qps, qps, Fraction(b), b, None, binding, service, None, None, None, how, inputs)


@dataclass
class _Point:
    n: float
    qps: float
    tpot: float
    step: float
    extra: float
    hit: float | None


def continuous_worker(scenario: Scenario, name: str, load: Workload, cost: StepCost, *, role: str = "whole",
                      pool_workers: int = 1, prefix_routed: bool = False, direct_share: float = 0.0,
                      tpot_goal: float | None = None, ttft_goal: float | None = None,
                      transfer_s: float = 0.0, decode_shares: np.ndarray | None = None,
                      direct: DirectPrompts | None = None) -> WorkerCapacity:
    """A continuous worker of ``role`` (whole, prefill or decode) at its capacity; a
    decode worker serves ``direct``'s prompts whole (the decider's, by their sizes)."""
    w = scenario.worker_for(name)
    if role == "prefill":
        return _prefill_worker(scenario, name, load, cost, pool_workers, prefix_routed, transfer_s)
    p, o = load.prompt, load.output
    out = o.mean
    context = load.kv_running
    # A decode worker's cache serves the requests the decider sends it whole (those it
    # prefills itself); a handed-off request brings its KV and shares no blocks.
    cached_share = 1.0 if role == "whole" else direct_share
    cache = (PrefixCacheModel.of(scenario, name, load, pool_workers, prefix_routed,
                             decode_shares if role == "decode" else None)
             if cached_share > 0 else None)
    private = context - (cache.moved * cached_share if cache else 0.0)
    by_kv = int(w.kv_cache_tokens // private) if private > 0 else w.max_num_seqs
    if cache is not None and role == "whole":
        by_kv = cache.most_running(w.kv_cache_tokens, private, w.max_num_seqs)
    budget = w.max_batched_tokens - 1
    limit = min(w.max_num_seqs, by_kv, budget)
    binding = "max_num_seqs" if limit == w.max_num_seqs else "kv_cache" if limit == by_kv else "token_budget"

    def at(n: float) -> _Point:
        hit = cache.hit(w.kv_cache_tokens - n * private) if cache is not None else None
        saved = (hit or 0.0) * (cache.usable if cache else 0.0)
        if role == "decode":
            landed = cost.prompt_extra(n, context, 1.0, p.mean, p.mean, n / max(out - 1, 1))
            if direct is not None:
                # The prompts the decider sends are its own sizes (the short ones, and
                # those whose uncached rest is short), found cached with probability hit.
                h = hit or 0.0
                new = h * direct.new_cached + (1 - h) * direct.mean
                attn = h * direct.attn_cached + (1 - h) * direct.sq
                whole = cost.prompt_extra(n, context, new, direct.mean, attn, n / max(out - 1, 1))
            else:
                whole = cost.prompt_extra(n, context, p.mean - saved, p.mean, p.sq - saved * p.mean,
                                          n / max(out - 1, 1))
            extra = (1 - direct_share) * landed + direct_share * whole
        else:
            new = p.mean - saved
            extra = cost.prompt_extra(n, context, new, p.mean, p.sq - saved * p.mean, n / max(out - 1, 1))
        if cost.speculative is None:
            step = cost.decode(n, context)
            per_request = (out - 1) * step / n + extra if out > 1 else extra
        else:
            step, per_request = _speculative_request(w, cost, n, context, out, extra)
        qps = 1.0 / per_request if per_request > 0 else 0.0
        tpot = n / (qps * (out - 1)) if out > 1 and qps > 0 else step
        return _Point(n, qps, tpot, step, extra, hit)

    if limit < 1:
        return WorkerCapacity(Fraction(0), Fraction(0), Fraction(0), 0, by_kv, "kv_cache", None, None, None, None,
                              f"the KV cache ({w.kv_cache_tokens:,} tokens) holds no sequence of {private:.0f}",
                              _inputs(name, load, cost, cache is not None))
    points = [at(n) for n in _grid(limit)]
    top = max(points, key=lambda q: q.qps)
    best, goal_binding = top, None
    notes: list[str] = []
    left_out: list[str] = []
    if tpot_goal is not None:
        meets = [q for q in points if q.tpot <= tpot_goal]
        if not meets:
            # No load meets it: the goal is left out of the capacity (a finding says so).
            left_out.append("tpot_s")
            notes.append(f"no load meets the TPOT goal ({points[0].tpot * 1000:.3g} ms with one sequence alone): "
                         "it is left out of the capacity")
        else:
            best = max(meets, key=lambda q: q.qps)
            if best.qps < top.qps:
                goal_binding = "tpot_goal"
    if ttft_goal is not None:
        missed = _ttft_missed(load, cost, ttft_goal, cache.usable if cache else 0.0, best.hit or 0.0)
        if missed > MISS_SHARE:
            left_out.append("ttft_s")
            notes.append(f"{missed:.0%} of prompts cannot prefill within the TTFT goal at any load: it is left "
                         "out of the capacity")
    if cache is not None and top.n < limit and goal_binding is None:
        binding = "prefix_cache"
    how = (f"{best.n:g} sequences decoding ({binding if goal_binding is None else goal_binding} binds): "
           f"1 / ((output {out:g} - 1) x {best.step * 1000:.3g} ms a step / {best.n:g} + "
           f"{best.extra * 1000:.3g} ms of prefill a request)")
    return WorkerCapacity(
        Fraction(best.qps), Fraction(top.qps), Fraction(best.n), limit, by_kv, goal_binding or binding,
        _q(best.step), _q(best.tpot), _q(best.extra), _q(best.hit), how,
        _inputs(name, load, cost, cache is not None), tuple(notes), tuple(left_out), _q(top.tpot))


def _speculative_request(w: WorkerSpec, cost: StepCost, n: float, context: float, out: float,
                         extra: float) -> tuple[float, float]:
    """Under speculation: the time between a decoder's tokens in decode-only steps, and
    a worker's time per request. The step that takes a prompt (under ``mixed``) gives
    each decoder one plain token; with prompts reaching steps as Poisson arrivals,
    (1 - exp(-mu)) / mu such steps a prompt, mu = n / (output - 1) prompts a step.
    The rest of the request's output - 1 tokens come from token-steps."""
    step = cost.token_step(n, context)
    if out <= 1:
        return step, extra
    tokens = (out - 1) / n  # steps a request's share of decode takes, n tokens each
    mixed = 0.0 if w.scheduler == "prefill_first" else min(first_share(n / (out - 1)), tokens)
    return step, mixed * cost.decode(n, context) + (tokens - mixed) * step + extra


def _grid(limit: int) -> list[float]:
    if limit <= SCAN_ALL:
        return [float(n) for n in range(1, limit + 1)]
    values = sorted({int(round(x)) for x in np.geomspace(1, limit, SCAN_ALL)} | {limit})
    return [float(v) for v in values]


def _ttft_missed(load: Workload, cost: StepCost, goal: float, usable: float, hit: float) -> float:
    """The share of prompts that take longer than ``goal`` to prefill even alone."""
    if cost.prefill_steps(max(1, int(load.prompt.mean))) > goal and load.prompt.cv == 0:
        return 1.0
    lo, hi = 1, 1 << 24
    if cost.prefill_steps(hi, int(hit * usable)) <= goal:
        return 0.0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if cost.prefill_steps(mid, min(mid - 1, int(hit * usable))) <= goal:
            lo = mid
        else:
            hi = mid
    return 1.0 - load.prompt.share_at_most(lo)


def _prefill_worker(scenario: Scenario, name: str, load: Workload, cost: StepCost, pool_workers: int,
                    prefix_routed: bool, transfer_s: float = 0.0) -> WorkerCapacity:
    """A prefill-pool worker: prompts only, in steps packed to the token budget.

    With a prefix cache, a prompt's cached prefix is not prefilled: the worker computes
    its new tokens only (their attention reaching back over the prefix). What its
    prompts in flight leave of its KV holds the cached prefixes: a step's prompts, and
    by Little's law the prompts whose KV it holds while their transfer (of
    ``transfer_s``) runs."""
    w = scenario.worker_for(name)
    p = load.prompt
    cache, per_token, qps, new, hit, free = _prefill_cache(scenario, name, load, cost, pool_workers,
                                                             prefix_routed, transfer_s)
    tiers = cache.tier_hits(free) if cache is not None else ()
    loading = sum(t[2] for t in tiers)
    how = (f"steps packed with {w.max_batched_tokens} prompt tokens: {per_token * 1e6:.3g} us a token x "
           f"{new:.0f} tokens a prompt" + ("" if hit is None else
                                           f" ({p.mean:.0f} less {p.mean - new:.0f} found cached, {hit:.0%} of "
                                           "the cacheable prefix)")
           + (f" + {loading * 1e3:.3g} ms a prompt loading prefix KV from "
              + ", ".join(t[0] for t in tiers) if tiers else ""))
    by_kv = int(w.kv_cache_tokens // p.mean)
    inputs = _inputs(name, load, cost, cache is not None) + (("worker.kv_tiers", f"models.{name}.arch")
                                                              if tiers else ())
    return WorkerCapacity(Fraction(qps), Fraction(qps), Fraction(w.max_batched_tokens / new), by_kv, by_kv,
                          "token_budget", _q(per_token * w.max_batched_tokens), None,
                          _q(per_token * new + loading), _q(hit), how, inputs, tiers=tuple(tiers))


def _prefill_cache(scenario: Scenario, name: str, load: Workload, cost: StepCost, pool_workers: int,
                   prefix_routed: bool, transfer_s: float
                   ) -> tuple[PrefixCacheModel | None, float, float, float, float | None, float]:
    """A prefill worker's cache and prefill at capacity: the cache model, the time a
    prefill token takes, requests a second, new tokens a prompt, the hit rate (None:
    no cache) and the KV tokens left for cached prefixes."""
    w = scenario.worker_for(name)
    p = load.prompt
    cache = PrefixCacheModel.of(scenario, name, load, pool_workers, prefix_routed)
    per_token = cost.full_prefill_step(p.mean, p.sq / p.mean)
    qps, new, hit, free = 1.0 / (per_token * p.mean), p.mean, None, float(w.kv_cache_tokens)
    if cache is not None:
        private = p.mean - cache.moved
        for _ in range(3):  # the hit rate and the prompts held for transfers settle at once
            held = w.max_batched_tokens / max(new, 1.0) + qps * transfer_s
            free = w.kv_cache_tokens - held * private
            # Hits in every level save prefill; a lower tier's hit stalls the step
            # while its blocks load.
            hit = cache.hit_all(free)
            saved = hit * cache.usable
            new = max(1.0, p.mean - saved)
            per_token = cost.full_prefill_step(new, max(0.0, p.sq - saved * p.mean) / new)
            qps = 1.0 / (per_token * new + sum(t[2] for t in cache.tier_hits(free)))
    return cache, per_token, qps, new, hit, free


def direct_group_shares(scenario: Scenario, name: str, load: Workload, cost: StepCost, pool_workers: int,
                        prefix_routed: bool, transfer_s: float, threshold: int) -> np.ndarray | None:
    """Under ``decider = "uncached"``: each prefix group's share of the requests the
    decider sends to the decode pool whole. A request goes there when its prompt is at
    most the threshold, or when its group is found cached on the prefill worker (with
    that group's own hit probability) and its prompt less the prefix is at most the
    threshold, so the decode workers see the popular groups most (None: no cache)."""
    cache, *_, free = _prefill_cache(scenario, name, load, cost, pool_workers, prefix_routed, transfer_s)
    pre = load.prefix
    if cache is None or pre is None:
        return None
    short = load.prompt.share_at_most(threshold)
    cached = max(0.0, load.prompt.share_at_most(threshold + cache.group_tokens) - short)
    return pre.shares * (short + cache.group_hits(free) * cached)


@dataclass(frozen=True)
class DirectPrompts:
    """The prompts a split model's decider sends to the decode pool whole, per such
    request: their mean and E[P^2], and, when the decode worker finds the prefix
    cached, the new tokens it prefills and their attention term (E[new x P])."""

    share: float
    mean: float
    sq: float
    new_cached: float
    attn_cached: float


def direct_prompts(load: Workload, threshold: int, hit: float | None, block: int) -> DirectPrompts | None:
    """The decider's direct prompts by size: every prompt of at most ``threshold``
    tokens, and under ``decider = "uncached"`` (``hit`` the prefill worker's hit rate)
    those whose prompt less its cached prefix's whole blocks is, found cached with
    probability ``hit``. A cached prefix of G tokens (whole blocks) leaves a prompt of
    P > G its P - G tokens to prefill and a shorter one its last block's (half a block
    on average). None when no prompt is sent."""
    p, pre = load.prompt, load.prefix
    tokens = 0.0
    if pre is not None and pre.groups:
        tokens = math.floor(float(np.sum(pre.shares * pre.tokens) / np.sum(pre.shares)) / block) * block
    pieces = [(0.0, float(threshold), 1.0)]
    if hit is not None and tokens > 0:
        pieces.append((float(threshold), threshold + tokens, hit * (pre.prefixed if pre else 0.0)))
    share = mean = sq = new_cached = attn_cached = 0.0
    for lo, hi, weight in pieces:
        for a, b, above in ((lo, min(hi, tokens), False), (max(lo, tokens), hi, True)):
            m0, m1, m2 = p.moments_between(a, b)
            share += weight * m0
            mean += weight * m1
            sq += weight * m2
            if above:
                new_cached += weight * (m1 - tokens * m0)
                attn_cached += weight * (m2 - tokens * m1)
            else:
                new_cached += weight * block / 2 * m0
                attn_cached += weight * block / 2 * m1
    if share <= 0:
        return None
    return DirectPrompts(share, mean / share, sq / share, new_cached / share, attn_cached / share)


def uncached_direct_share(load: Workload, threshold: int, hit: float | None, block: int) -> float:
    """Under ``decider = "uncached"``: the share of requests served whole on the decode
    pool, those whose prompt is at most ``threshold`` or whose prompt less its cached
    prefix is (a request finding its prefix cached with the prefill pool's hit rate)."""
    found = direct_prompts(load, threshold, hit, block)
    return 0.0 if found is None else found.share


def _inputs(name: str, load: Workload, cost: StepCost, prefix: bool) -> tuple[str, ...]:
    keys = [*load.inputs, *cost.inputs, "worker.kv_cache_tokens", "worker.max_num_seqs",
            "worker.max_batched_tokens", "worker.batching"]
    if prefix:
        keys += ["worker.prefix_cache", "worker.block_tokens", "dispatcher.policy"]
    return tuple(dict.fromkeys(keys))
