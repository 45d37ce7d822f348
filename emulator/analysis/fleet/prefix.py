"""The expected prefix-cache hit rate of a worker: Che's approximation of an LRU cache.

A worker keeps shared-prefix KV blocks in what its running requests leave of its KV
cache, and evicts the least recently released group first (``sim.workers.prefix_cache``),
which is an LRU cache of groups. Che's approximation (Che, Tung and Wang, 2002; exact
in the limit of many items and accurate far beyond it) gives an LRU cache of ``C``
items under independent requests of rates r_i a characteristic time T with

    sum_i (1 - exp(-r_i T)) = C

and item i a hit probability 1 - exp(-r_i T). Here an item is a group's prefix and the
cache's size in groups is the KV left over divided by a prefix's tokens.

Which groups a worker sees depends on the routing: round robin, least loaded and pull
spread every group over every worker; ``prefix_aware`` (and ``weighted`` with a prefix
scorer) keep a group where it is cached, so each worker sees its own share of the
groups at their full rate: groups are dealt to the workers most popular first, each to
the worker with the least traffic so far.
"""

from __future__ import annotations

import numpy as np

__all__ = ["che_group_hits", "che_hit_rate", "distinct", "partition", "routes_by_prefix"]


def routes_by_prefix(policy: str, scorers: tuple[tuple[str, float], ...], sessions: bool = False) -> bool:
    """Whether a policy keeps each prefix group on the workers that cache it: by its
    prefix score, or by session affinity (``sessions``; a session is a prefix group, so
    each group stays on the worker it was first sent to) or a session score."""
    if policy == "prefix_aware" or sessions:
        return True
    if policy == "weighted":
        weights = dict(scorers) if scorers else {"prefix": 3.0, "queue": 2.0}
        return weights.get("prefix", 0.0) > 0 or weights.get("session", 0.0) > 0
    return False


def partition(shares: np.ndarray, workers: int) -> list[np.ndarray]:
    """Indexes of the groups each worker keeps: most popular first, to the least loaded."""
    order = np.argsort(-shares, kind="stable")
    load = np.zeros(workers)
    owned: list[list[int]] = [[] for _ in range(workers)]
    for g in order:
        w = int(np.argmin(load))
        owned[w].append(int(g))
        load[w] += shares[g]
    return [np.array(o, dtype=np.int64) for o in owned]


def che_hit_rate(rates: np.ndarray, capacity: float) -> float:
    """The request-weighted hit probability of an LRU cache of ``capacity`` items under
    independent requests of these rates (any unit: only their ratios matter)."""
    rates = rates[rates > 0]
    if rates.size == 0 or capacity <= 0:
        return 0.0
    if capacity >= rates.size:
        return 1.0
    total = float(rates.sum())
    r = rates / total

    def filled(t: float) -> float:
        return float(np.sum(-np.expm1(-r * t)))

    lo, hi = 0.0, 1.0
    while filled(hi) < capacity:
        hi *= 2.0
        if hi > 1e18:
            return 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if filled(mid) < capacity:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    t = (lo + hi) / 2
    return float(np.sum(r * -np.expm1(-r * t)))


def distinct(shares: np.ndarray, draws: float) -> float:
    """Expected distinct groups among ``draws`` requests of these shares."""
    if draws <= 0:
        return 0.0
    s = shares / shares.sum()
    return float(np.sum(-np.expm1(draws * np.log1p(-np.minimum(s, 1 - 1e-15)))))


def che_group_hits(rates: np.ndarray, capacity: float) -> np.ndarray:
    """Each item's hit probability, 1 - exp(-r_i T), in an LRU cache of ``capacity``
    items under independent requests of these rates (0 for an item of rate 0)."""
    out = np.zeros(rates.size)
    live = rates > 0
    if not live.any() or capacity <= 0:
        return out
    if capacity >= int(live.sum()):
        out[live] = 1.0
        return out
    r = rates[live] / float(rates[live].sum())

    def filled(t: float) -> float:
        return float(np.sum(-np.expm1(-r * t)))

    lo, hi = 0.0, 1.0
    while filled(hi) < capacity:
        hi *= 2.0
        if hi > 1e18:
            out[live] = 1.0
            return out
    for _ in range(100):
        mid = (lo + hi) / 2
        if filled(mid) < capacity:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    out[live] = -np.expm1(-r * (lo + hi) / 2)
    return out
