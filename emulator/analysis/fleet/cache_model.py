"""A worker's prefix cache as the analysis sees it: Che's approximation of each level
(the GPU cache with what the running sequences leave of the KV cache, the lower tiers
private to the worker, the stores shared by the pool), the groups each worker keeps
when routing follows the prefix, and the most sequences whose KV and pinned prefixes
fit. ``capacity`` builds one per worker of a pool (``PrefixCacheModel.of``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from emulator.analysis.fleet.prefix import che_group_hits, che_hit_rate, distinct, partition
from emulator.analysis.fleet.workload import Workload
from emulator.scenario import Scenario
from emulator.scenario.kv_tier_checks import tier_tokens
from emulator.scenario.pools import kv_bytes_per_token

__all__ = ["PrefixCacheModel"]


@dataclass
class PrefixCacheModel:
    """A worker's prefix cache as Che's approximation sees it."""

    rates: list[np.ndarray]  # per worker: its groups' shares of the model's requests
    owned: list[np.ndarray]  # per worker: the indexes of its groups (in rates' order)
    seen: list[np.ndarray]  # per worker: the groups it sees, as shares of its own requests
    group_tokens: float  # a cached group's KV tokens
    usable: float  # prefix tokens a request could find cached (its prefix's whole blocks, cut by its prompt)
    moved: float  # prefix tokens of a running sequence held by the cache, not by it
    block: int
    #: Lower KV tiers private to each worker, fastest first: name, capacity in KV
    #: tokens, seconds to load a token.
    tiers: tuple[tuple[str, float, float], ...] = ()
    #: The tiers shared by the pool's workers, below the private ones (the same form;
    #: a capacity is the store's total).
    shared: tuple[tuple[str, float, float], ...] = ()
    #: The groups' shares of the pool's requests, all workers together.
    pool_rates: np.ndarray | None = None

    @property
    def tier_tokens(self) -> float:
        """KV tokens a worker's private lower tiers hold together."""
        return sum(t[1] for t in self.tiers)

    def hit_all(self, free_tokens: float, shared_tokens: float | None = None) -> float:
        """The share of a request's usable prefix found in any level: the GPU cache
        with ``free_tokens`` for cached groups, the private tiers and the shared ones
        (``shared_tokens`` of them; None: all). A shared store is fed by what every
        worker's own levels miss: it sees the pool's stream of misses, each group at
        its rate times its chance of missing at its worker, and Che's approximation
        over that stream at the store's capacity gives each group's chance of being
        there (the filtering approximation of a cache below caches)."""
        if not self.shared:
            return self.hit(free_tokens + self.tier_tokens)
        store = sum(t[1] for t in self.shared) if shared_tokens is None else shared_tokens
        own = self.group_hits(free_tokens + self.tier_tokens)
        assert self.pool_rates is not None
        rates = self.pool_rates
        groups = store / self.group_tokens if self.group_tokens else 0.0
        there = che_group_hits(rates * (1.0 - own), groups)
        return float(np.dot(own + (1.0 - own) * there, rates) / rates.sum())

    def tier_hits(self, free_tokens: float) -> list[tuple[str, float, float]]:
        """Per lower tier: its name, the share of a request's usable prefix found there
        and not above (Che's hit rate of the cache down to it less that of the levels
        above: an LRU stack whose evictions move down; a shared tier's by ``hit_all``),
        and the seconds a request spends loading it (that share x the usable prefix x
        seconds a token)."""
        out = []
        above = max(0.0, free_tokens)
        before = self.hit(above)
        for name, tokens, s_per_token in self.tiers:
            above += tokens
            now = self.hit(above)
            share = max(0.0, now - before)
            out.append((name, share, share * self.usable * s_per_token))
            before = now
        store = 0.0
        for name, tokens, s_per_token in self.shared:
            store += tokens
            now = self.hit_all(free_tokens, store)
            share = max(0.0, now - before)
            out.append((name, share, share * self.usable * s_per_token))
            before = now
        return out

    @classmethod
    def of(cls, scenario: Scenario, name: str, load: Workload, workers: int, routed: bool,
           shares: np.ndarray | None = None) -> PrefixCacheModel | None:
        """The cache of a worker among ``workers``; ``shares`` are the groups' shares of
        the requests it caches for, when not the workload's (a decode worker's)."""
        w = scenario.worker_for(name)
        pre = load.prefix
        if not w.prefix_cache or pre is None or pre.groups == 0:
            return None
        block = w.block_tokens
        shares = pre.shares if shares is None else shares
        if not np.sum(shares) > 0:
            return None
        tokens = float(np.sum(shares * pre.tokens) / np.sum(shares))
        group_tokens = math.floor(tokens / block) * block
        # Whole blocks of the prefix, leaving the prompt's last token to compute.
        usable = max(0.0, pre.prefixed * (pre.mean_tokens - block / 2))
        workers = max(1, workers)
        if routed:
            owned = [o for o in partition(shares, workers) if o.size]
        else:
            owned = [np.arange(shares.size)]
        rates = [shares[o] for o in owned]
        seen = [r / r.sum() for r in rates]
        per_token = kv_bytes_per_token(scenario.models[name])
        levels = {False: [], True: []}  # type: dict[bool, list[tuple[str, float, float]]]
        for t in w.kv_tiers if per_token else ():
            assert per_token is not None
            levels[t.shared].append((t.name, float(tier_tokens(t, per_token)), per_token / (t.bandwidth_gb_s * 1e9)))
        return cls(rates, owned, seen, float(group_tokens), usable, usable, block, tuple(levels[False]),
                   tuple(levels[True]), shares if levels[True] else None)

    def group_hits(self, free_tokens: float) -> np.ndarray:
        """Each group's probability of being found cached, with ``free_tokens`` of KV
        for cached groups (at the worker that keeps it, when routed by prefix)."""
        groups = max(0.0, free_tokens) / self.group_tokens if self.group_tokens else 0.0
        out = np.zeros(sum(o.size for o in self.owned))
        for r, o in zip(self.rates, self.owned, strict=True):
            out[o] = che_group_hits(r, groups)
        return out

    def hit(self, free_tokens: float) -> float:
        """The share of a request's usable prefix found cached, with ``free_tokens`` of
        KV for cached groups (the mean over the workers)."""
        groups = max(0.0, free_tokens) / self.group_tokens if self.group_tokens else 0.0
        hits = [che_hit_rate(r, groups) for r in self.rates]
        weights = [float(r.sum()) for r in self.rates]
        return float(np.dot(hits, weights) / sum(weights))

    def most_running(self, kv_tokens: int, private: float, cap: int) -> int:
        """The most sequences whose own KV and their groups' pinned prefixes fit."""
        seen = max(self.seen, key=lambda s: s.size)
        n = min(cap, int(kv_tokens // private))
        while n > 0 and n * private + distinct(seen, n) * self.group_tokens > kv_tokens:
            n -= 1
        return n
