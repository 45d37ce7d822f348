"""Waiting for a prefill worker: the load at which a split model's prefill pool still
gives GOODPUT of its prompts their first token within the TTFT goal.

The fluid capacity of a prefill pool is the rate at which its workers are busy all the
time; well before it, prompts queue. A prefill worker runs its prompts first come first
served at the token rate of packed steps, so a prompt's prefill TTFT is its wait for the
work ahead of it, its own prefill, and then the transfer and the decode worker's first
step. The pool is taken as M/G/c (Poisson arrivals, ``c`` workers fed from one queue):

* a prompt waits with Erlang's C probability, and then an exponential time of mean
  (1 + cs^2) / 2 / (c mu - lambda) (Allen and Cunneen's mean wait, cs^2 the squared cv
  of the prefill times; the tail of M/G/c under heavy traffic is exponential);
* its own prefill is its new tokens (its prompt, less its prefix's whole blocks when
  found cached, with the pool's hit rate) at the packed steps' cost a token plus the
  attention of its chunks, scaled so that the mean is the worker's time per request;
* with ``dispatcher.queue_limit`` = K, an arrival that finds K waiting is refused: one
  that would wait longer than K mean prefills spread over the c workers.

A prompt is served well when it is admitted and its wait, prefill and the hand-off
overhead fit the goal. The capacity is the highest rate at which GOODPUT of them are.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from statistics import NormalDist

import numpy as np

from emulator.analysis.fleet.steps import StepCost
from emulator.analysis.fleet.workload import Workload

__all__ = ["admitted_bound_qps", "admitted_share", "boundary", "prefill_times", "ttft_bound_qps"]

#: Quantiles of the prompt sizes a lognormal law is cut into.
POINTS = 256


def _prompt_points(load: Workload) -> np.ndarray:
    """Prompt sizes standing for the law, each with an equal share."""
    p = load.prompt
    if p.rows is not None:
        return p.rows.astype(np.float64)
    if p.cv == 0:
        return np.array([p.mean])
    sigma = math.sqrt(math.log1p(p.cv * p.cv))
    mu = math.log(p.mean) - sigma * sigma / 2
    z = np.array([NormalDist().inv_cdf((k + 0.5) / POINTS) for k in range(POINTS)])
    return np.exp(mu + sigma * z)


def _attention(cost: StepCost, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Sum of chunk x (chunk start + chunk) over a prompt's chunks from ``start`` to ``end``."""
    budget = float(cost.spec.max_batched_tokens)
    total = np.zeros_like(start)
    at = start.copy()
    while True:
        left = end - at
        live = left > 0
        if not live.any():
            return total
        c = np.where(live, np.minimum(budget, left), 0.0)
        total += c * (at + c)
        at = at + c


def prefill_times(load: Workload, cost: StepCost, hit: float, cached_tokens: float,
                  mean_s: float, tiers: Sequence[tuple[str, float, float]] = ()) -> tuple[np.ndarray, np.ndarray]:
    """A prefill worker's time per prompt (scaled to the mean ``mean_s``) and each
    one's share: every prompt size found cached (``hit``) or not.

    With lower KV tiers (``tiers``: name, the share of the prefix found there, the
    seconds a request spends loading it), a prompt found in a tier pays that tier's
    load, the same whatever its size, beside its uncached work: of the found prompts,
    each tier's share is found there, the rest in the GPU cache. Only the uncached
    work is scaled to the mean."""
    sizes = _prompt_points(load)
    spec = cost.spec
    per_token = spec.step_base_s / spec.max_batched_tokens + spec.prefill_token_s
    cached = np.minimum(cached_tokens, np.maximum(sizes - 1, 0.0))
    lower = [(share, load_s / share) for _, share, load_s in tiers if share > 0]
    found_in = [(max(0.0, hit - sum(share for share, _ in lower)), 0.0), *lower] if hit > 0 else []
    none = np.zeros_like(sizes)
    hit_work = per_token * (sizes - cached) + spec.prefill_attn_s * _attention(cost, cached, sizes)
    miss_work = per_token * sizes + spec.prefill_attn_s * _attention(cost, none, sizes)
    works, adds, weights = [], [], []
    for part, share, extra in [*((hit_work, s, a) for s, a in found_in), (miss_work, 1.0 - hit, 0.0)]:
        if share <= 0:
            continue
        works.append(part)
        adds.append(np.full(sizes.size, extra))
        weights.append(np.full(sizes.size, share / sizes.size))
    work, add, w = np.concatenate(works), np.concatenate(adds), np.concatenate(weights)
    mean = float(np.dot(work, w))
    loading = float(np.dot(add, w))
    if mean > 0:
        work = work * (max(0.0, mean_s - loading) / mean)
    return work + add, w


#: A chance of meeting the goal too small to change any figure the analysis prints.
NEGLIGIBLE = 1e-13


def _erlang_tail(k: int, x: np.ndarray) -> np.ndarray:
    """P(an Erlang of ``k`` unit-mean... stages of rate 1 sums past ``x``): e^-x sum_{i<k} x^i / i!."""
    term = np.exp(-x)
    total = term.copy()
    for i in range(1, k):
        term = term * x / i
        total += term
    return total


def good_share(lam: float, workers: int, times: np.ndarray, weights: np.ndarray, slack: float,
               queue_limit: int) -> float:
    """The share of prompts admitted and prefilled within ``slack`` at ``lam`` a second.

    The number in the pool an arrival finds (Poisson arrivals see time averages): below
    ``workers`` as M/M/c, and beyond, j waiting with a ratio r^j, r the diffusion
    approximation's exp(-2 (1 - rho) / (rho (1 + cs^2))) (rho itself for exponential
    prefills), cut at ``queue_limit`` waiting (an arrival finding that many is refused;
    0: no limit). With j waiting ahead it waits for j + 1 of the busy workers' ends: an
    Erlang of j + 1 stages whose mean is (j + (1 + cs^2) / 2) mean prefills over c (the
    first end a residual prefill's)."""
    mean = float(np.dot(times, weights))
    c = workers
    if lam * mean / c <= 0:
        return float(np.dot((times <= slack).astype(float), weights))
    states = _states(lam, workers, times, weights, queue_limit)
    if states is None:
        return 0.0
    idle, waiting, total, cs2 = states
    depth = waiting.size - (1 if queue_limit > 0 else 0)
    ok = sum(idle) / total * float(np.dot((times <= slack).astype(float), weights))
    room = np.maximum(slack - times, 0.0)
    served = times <= slack
    longest = float(room.max())
    for j in range(depth):
        mean_wait = (j + (1.0 + cs2) / 2.0) * mean / c
        stages = j + 1
        within = 1.0 - _erlang_tail(stages, room * stages / mean_wait)
        ok += float(waiting[j]) / total * float(np.dot(np.where(served, within, 0.0), weights))
        if mean_wait > longest and float(within.max()) < NEGLIGIBLE:
            # Past every prompt's room the chance of a wait within it only falls with
            # more ahead: what the deeper states add is below NEGLIGIBLE of their mass.
            break
    return ok


def _states(lam: float, workers: int, times: np.ndarray, weights: np.ndarray, queue_limit: int
            ) -> tuple[list[float], np.ndarray, float, float] | None:
    """The unnormalised shares of the pool's states an arrival finds (see
    ``good_share``): each count below ``workers`` busy, and each count waiting (up to
    ``queue_limit``, the last one refused), their total, and cs^2; None when an
    unbounded queue grows without end."""
    mean = float(np.dot(times, weights))
    c = workers
    a = lam * mean
    rho = a / c
    cs2 = max(0.0, float(np.dot(times * times, weights)) / (mean * mean) - 1.0)
    r = math.exp(-2.0 * (1.0 - rho) / (rho * (1.0 + cs2)))
    if queue_limit <= 0 and r >= 1.0:
        return None
    idle = [1.0]
    for n in range(1, c):
        idle.append(idle[-1] * a / n)
    busy = idle[-1] * a / c  # all c busy, none waiting
    depth = queue_limit if queue_limit > 0 else None
    if depth is None:
        # Enough waiting states that the rest of the geometric is negligible.
        depth = int(math.ceil(math.log(1e-9) / math.log(r))) if r > 0 else 1
    waiting = busy * r ** np.arange(depth + (1 if queue_limit > 0 else 0))
    total = sum(idle) + float(waiting.sum())
    return idle, waiting, total, cs2


def ttft_bound_qps(workers: int, fluid_qps: float, times: np.ndarray, weights: np.ndarray, slack: float,
                   queue_limit: int, goodput: float) -> float | None:
    """The highest rate of prompts the pool serves with ``goodput`` of them within
    ``slack``; None when not even a light load does (the goal is then another
    finding's: prompts too long to prefill within it)."""
    if good_share(fluid_qps * 1e-6, workers, times, weights, slack, queue_limit) < goodput:
        return None
    return boundary(lambda lam: good_share(lam, workers, times, weights, slack, queue_limit) >= goodput,
                    0.0, fluid_qps, 60)[0]


def boundary(holds: Callable[[float], bool], lo: float, hi: float, steps: int) -> tuple[float, float]:
    """Bisection of a load at which ``holds`` turns false, ``holds(lo)`` being true and
    ``holds(hi)`` false: the bracket left after ``steps`` halvings."""
    for _ in range(steps):
        mid = (lo + hi) / 2
        if holds(mid):
            lo = mid
        else:
            hi = mid
    return lo, hi


#: The least steps of the workload grid of ``admitted_share``.
GRID = 600


#: The law of a wait past the rule's prediction: its values (s, evenly spaced from 0)
#: and their shares (``late_wait.late_wait``).
Late = tuple[np.ndarray, np.ndarray]


def admitted_share(lam: float, workers: int, times: np.ndarray, weights: np.ndarray, admit_room: float,
                   goal_room: float, late: Late | None = None) -> tuple[float, float]:
    """Under a rule that admits a prompt only when its predicted wait and its own
    prefill fit ``admit_room``: the share of arrivals at ``lam`` a second admitted, and
    the share admitted whose wait and prefill also fit ``goal_room`` (the TTFT goal's).

    The rule refuses by size as well as by load: a long prompt is refused at a queue a
    short one still joins, so near and past saturation the pool serves the short ones.
    The pool's work is taken as one queue drained by its ``workers`` together (the work
    ahead of an arrival, over c, is its wait: heavy traffic, where the rule acts), and
    its stationary law comes from level crossing: at each level v of that wait, the
    rate it is crossed downward (its density) equals the rate admitted prompts jump it,
    each prompt of time s admitted from a wait u <= room - s and adding s / c. The
    resulting Volterra equation for the cumulative law G is stepped on a grid,
    implicitly where the jump starts at v itself.

    With ``late`` (the law of a wait the rule does not predict) an admitted prompt is good when that wait also fits what is left of
    ``goal_room``: the share is averaged over the wait's law."""
    s = np.asarray(times, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    c = max(1, workers)
    admit = admit_room - s  # the largest wait at which each prompt is admitted
    ok = admit >= 0
    if lam <= 0 or not ok.any():
        share = float(w[ok].sum())
        return share, float(w[goal_room - s >= 0].sum()) if lam <= 0 else 0.0
    a, jump, wa = admit[ok], s[ok] / c, w[ok]
    top = float((a + jump).max())
    steps = max(GRID, math.ceil(4 * lam * top))  # at most a quarter of an arrival a step
    h = top / steps
    grid = np.arange(steps + 1) * h
    cum = np.zeros(steps + 1)
    cum[0] = 1.0  # the mass of an empty queue (unnormalised: the equation is linear)
    for i in range(1, steps + 1):
        v = grid[i]
        known = grid[:i]
        back = v - jump
        lower = np.where(back >= 0, np.interp(np.maximum(back, 0.0), known, cum[:i]), 0.0)
        below = a < v  # admitted only from waits under v: from u in [v - s / c, a]
        upper = np.interp(a[below], known, cum[:i])
        rest = float(np.dot(wa[below], np.maximum(upper - lower[below], 0.0)))
        rest -= float(np.dot(wa[~below], lower[~below]))
        stay = float(wa[~below].sum())
        cum[i] = (cum[i - 1] + h * lam * rest) / (1.0 - h * lam * stay)
        if cum[i] > 1e100:  # heavy load: the law grows fast with the wait; rescale
            cum[: i + 1] /= cum[i]
    total = cum[-1]
    admitted = float(np.dot(wa, np.interp(a, grid, cum))) / total
    if late is None:
        good_at = np.minimum(a, goal_room - s[ok])
        fits = good_at >= 0
        return admitted, float(np.dot(wa[fits], np.interp(good_at[fits], grid, cum))) / total
    # A prompt admitted from a wait u is good when u + D fits goal_room - s, D the late
    # wait: u <= a - (D - (goal_room - admit_room))+, so its share is E[G(a - that)],
    # a convolution of G with the law of the excess, on the late wait's bins.
    values, shares = late
    width = float(values[1] - values[0]) if values.size > 1 else h
    excess = np.rint(np.maximum(values - (goal_room - admit_room), 0.0) / width).astype(np.int64)
    at = np.arange(int(math.ceil(top / width)) + 1) * width
    held = np.convolve(np.interp(at, grid, cum), np.bincount(excess, weights=shares))[: at.size]
    return admitted, float(np.dot(wa, np.interp(a, at, held))) / total


def admitted_bound_qps(workers: int, fluid_qps: float, times: np.ndarray, weights: np.ndarray, admit_room: float,
                       goal_room: float, goodput: float, late: Late | None = None) -> float | None:
    """The highest rate of prompts at which ``goodput`` of the arrivals are admitted by
    the predicted-TTFT rule and served within the goal (``admitted_share``); it may
    pass the pool's fluid rate, the rule serving the short prompts of a heavier load.
    None when not even a light load does."""
    def good(lam: float) -> float:
        return admitted_share(lam, workers, times, weights, admit_room, goal_room, late)[1]

    if good(fluid_qps * 1e-6) < goodput:
        return None
    lo, hi = 0.0, fluid_qps
    while good(hi) >= goodput:
        lo, hi = hi, 2 * hi
    return boundary(lambda lam: good(lam) >= goodput, lo, hi, 40)[0]
