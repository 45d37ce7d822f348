"""Lower KV tiers under a worker's GPU prefix cache (``[[worker.kv_tiers]]``), as
KV block managers that offload to CPU memory, SSD or a remote pool keep them.

A group's prefix blocks are spread over the levels in order: the GPU cache holds its
first ``c`` blocks, the first tier the blocks ``[c, e1)``, the next ``[e1, e2)``, and
so on (a level may hold none, and blocks past a gap cannot be reused).

* When the GPU cache evicts the last blocks of a group, they move to the first tier
  (joined to the group's run there). A tier over its capacity evicts in turn: the
  least recently used group first, each from its last block back, into the tier
  below; the last tier drops them.
* A request whose prefix runs past the GPU blocks into a tier's blocks loads them:
  its prefill skips them, but its step first spends tokens x KV bytes per token /
  the tier's bandwidth on each tier's copy. The loaded blocks take GPU KV like
  prefilled ones, and join the GPU cache when the prefill ends; a tier then forgets
  the blocks the GPU holds again.
* A dead worker loses its tiers with its cache.

A tier with ``shared = true`` is one store for every worker of the model's pool (a
remote pool in the manner of Mooncake's distributed store), below every private
tier; its capacity is the store's total. Each worker's chain ends in the pool's
shared tiers, so blocks any worker demotes can be loaded by any other, each load at
the tier's bandwidth (every worker's own link: loads do not share it). A shared
store differs from a private tier in three ways:

* it keeps what it holds when a worker loads blocks (the GPU holding them again
  makes them no less useful to the other workers), so a lookup finds the wanted block
  anywhere in the group's run there, not only at its start;
* a run coming down joins the group's run there when its last block falls within it
  or just past it (the union of the two); otherwise it replaces it, as in a private tier;
* a dead worker leaves it intact.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

from emulator.scenario.kv_tier_checks import tier_tokens
from emulator.scenario.pools import kv_bytes_per_token

if TYPE_CHECKING:
    from emulator.scenario import Scenario


class Tier:
    """One tier of one worker: runs of blocks by group, least recently used first."""

    __slots__ = ("blocks", "capacity", "hit_tokens", "load_s", "lower", "name", "runs",
                 "s_per_token", "shared")

    def __init__(self, name: str, capacity_blocks: int, s_per_token: float, shared: bool = False) -> None:
        self.name = name
        #: One store for the pool's workers (see the module docstring).
        self.shared = shared
        self.capacity = capacity_blocks
        #: Seconds to copy one token's KV from this tier to the GPU.
        self.s_per_token = s_per_token
        #: Group -> [first block, end block) held here.
        self.runs: OrderedDict[int, list[int]] = OrderedDict()
        self.blocks = 0
        self.lower: Tier | None = None
        #: Prefix tokens loaded from this tier and the seconds their copies took.
        self.hit_tokens = 0
        self.load_s = 0.0

    def put(self, group: int, start: int, end: int) -> None:
        """Blocks ``[start, end)`` of ``group`` come down from the level above."""
        run = self.runs.get(group)
        if run is not None and run[0] == end:
            run[0] = start
            self.runs.move_to_end(group)
        elif self.shared and run is not None and run[0] <= end <= run[1] + 1:
            low, high = min(run[0], start), max(run[1], end)
            self.blocks += (high - low) - (run[1] - run[0])
            run[0], run[1] = low, high
            self.runs.move_to_end(group)
            if self.blocks > self.capacity:
                self._evict(self.blocks - self.capacity)
            return
        else:
            if run is not None:  # not joined to the new blocks: it could not be reached
                self.blocks -= run[1] - run[0]
                del self.runs[group]
            self.runs[group] = [start, end]
        self.blocks += end - start
        if self.blocks > self.capacity:
            self._evict(self.blocks - self.capacity)

    def _evict(self, need: int) -> None:
        """Move ``need`` blocks down (or drop them at the last tier), least recently
        used group first, each from its end."""
        runs, lower = self.runs, self.lower
        while need > 0:
            g, run = next(iter(runs.items()))
            take = min(need, run[1] - run[0])
            end = run[1]
            run[1] = end - take
            if run[1] == run[0]:
                del runs[g]
            if lower is not None:
                lower.put(g, end - take, end)
            self.blocks -= take
            need -= take

    def forget_below(self, group: int, end: int) -> None:
        """The level above holds ``group``'s blocks before ``end`` again (a shared
        store keeps them for the other workers)."""
        if self.shared:
            return
        run = self.runs.get(group)
        if run is not None and run[0] < end:
            if run[1] <= end:
                self.blocks -= run[1] - run[0]
                del self.runs[group]
            else:
                self.blocks -= end - run[0]
                run[0] = end

    def clear(self) -> None:
        """The worker died (a shared store outlives it)."""
        if self.shared:
            return
        self.runs.clear()
        self.blocks = 0


def tier_specs(scenario: Scenario, model: str) -> list[tuple[str, int, float, bool]]:
    """``model``'s tiers as (name, capacity in tokens, seconds to copy a token, shared)."""
    per_token = kv_bytes_per_token(scenario.models[model])
    assert per_token is not None, "validation requires the model's KV bytes per token"
    return [
        (t.name, tier_tokens(t, per_token), per_token / (t.bandwidth_gb_s * 1e9), t.shared)
        for t in scenario.worker_for(model).kv_tiers
    ]


def build(specs: list[tuple[str, int, float, bool]], block_tokens: int,
          stores: list[Tier] | None = None) -> Tier:
    """The chain of tiers from (name, capacity in tokens, seconds a token, shared),
    fastest first; returns the first. Capacities are whole blocks of ``block_tokens``.
    The shared tiers are taken from ``stores``, the pool's (filled with new ones the
    first time, for the pool's next workers)."""
    tiers = [Tier(n, cap // block_tokens, s) for n, cap, s, shared in specs if not shared]
    wanted = [(n, cap, s) for n, cap, s, shared in specs if shared]
    if wanted:
        if stores is None:
            stores = []
        if not stores:
            stores.extend(Tier(n, cap // block_tokens, s, shared=True) for n, cap, s in wanted)
            for upper, lower in zip(stores, stores[1:], strict=False):
                upper.lower = lower
        tiers = [*tiers, *stores]
    for upper, lower in zip(tiers, tiers[1:], strict=False):
        upper.lower = lower
    return tiers[0]


def chain(first: Tier | None) -> list[Tier]:
    """The tiers from ``first`` down."""
    out: list[Tier] = []
    while first is not None:
        out.append(first)
        first = first.lower
    return out


def lookup(first: Tier, group: int, pos: int, usable: int) -> list[tuple[Tier, int]]:
    """The blocks a request of ``group`` reusing ``usable`` blocks, of which the GPU
    holds the first ``pos``, finds in each tier: (tier, blocks), in order."""
    out: list[tuple[Tier, int]] = []
    tier: Tier | None = first
    while tier is not None and pos < usable:
        run = tier.runs.get(group)
        if run is not None:  # (a tier may hold none of the group's blocks)
            if run[0] != pos and not (tier.shared and run[0] < pos):
                break  # a gap: the blocks past it cannot be reused
            take = min(run[1], usable) - pos
            if take > 0:  # (a shared store may hold only blocks already found above)
                out.append((tier, take))
                pos += take
        tier = tier.lower
    return out
