"""One continuous-batching worker's cache of shared-prefix KV blocks
(``worker.prefix_cache``), as engines with automatic prefix caching keep one.

A prompt's KV is cut into blocks of ``block_tokens``; a block is known by its group's
prefix and its place in it (as engines hash a block with the blocks before it), and
only whole blocks are kept. So a group's cached blocks are always its first ``c``, and
a request of that group whose prefix spans ``n`` whole blocks reuses
``min(c, n)`` of them, skipping their prefill; it still computes at least its last
prompt token (the one whose output is its first token).

* Cached blocks sit in the worker's one KV budget beside the running requests' KV.
  A request reads the blocks it reuses in place: its own reservation is its prefill
  target less them.
* When a request finishes its prefill, its prefix's whole blocks that the group had
  not cached yet move from the request's KV to the cache (no KV changes hands twice).
* A group's blocks are pinned while a request of that group runs on the worker. When
  running requests need room (an admission, or the decoders' next tokens), unpinned
  blocks are evicted, least recently released group first, each group from its last
  block back, before anything is preempted or blocked. A group is released when its
  last running request leaves.
* With lower KV tiers (``kv_tiers.py``) evicted blocks move to the first tier rather
  than being dropped.
* A worker that dies loses its cache; it comes back empty.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from emulator.sim.workers.kv_tiers import Tier


class PrefixCache:
    """Cached prefix blocks of one worker; see the module docstring."""

    __slots__ = ("block", "blocks", "refs", "tier", "tokens")

    def __init__(self, block_tokens: int, tier: Tier | None = None) -> None:
        self.block = block_tokens
        #: The first lower tier, where evicted blocks go (None: they are dropped).
        self.tier = tier
        #: Cached blocks by group, least recently released first.
        self.blocks: OrderedDict[int, int] = OrderedDict()
        #: Running requests of each group on the worker (a group here is pinned).
        self.refs: dict[int, int] = {}
        #: KV tokens the cached blocks hold.
        self.tokens = 0

    def hit(self, group: int, prefix: int, target: int) -> int:
        """Prefill tokens a request of ``group`` with ``prefix`` shared tokens and this
        prefill target finds cached (whole blocks, leaving at least one to compute)."""
        usable = min(prefix, target - 1) // self.block
        cached = self.blocks.get(group, 0)
        return (cached if cached < usable else usable) * self.block

    def pin(self, group: int) -> None:
        """A request of ``group`` starts running here."""
        self.refs[group] = self.refs.get(group, 0) + 1

    def unpin(self, group: int) -> None:
        """A running request of ``group`` leaves (finished, preempted, gone)."""
        left = self.refs[group] - 1
        if left:
            self.refs[group] = left
            return
        del self.refs[group]
        if group in self.blocks:
            self.blocks.move_to_end(group)  # released now: the most recent

    def insert(self, group: int, prefix: int) -> int:
        """A request of ``group`` finished prefilling its ``prefix``: cache the whole
        blocks the group lacks. Returns the tokens moved into the cache."""
        whole = prefix // self.block
        cached = self.blocks.get(group, 0)
        if whole <= cached:
            return 0
        self.blocks[group] = whole  # a new group goes last; it is pinned until released
        tier = self.tier
        while tier is not None:  # the GPU holds these blocks again
            tier.forget_below(group, whole)
            tier = tier.lower
        moved = (whole - cached) * self.block
        self.tokens += moved
        return moved

    def evictable(self, keep: int = -1, spare: int = 0) -> int:
        """Tokens of unpinned blocks (the first ``spare`` blocks of group ``keep``, those
        a request being admitted reuses, not counted)."""
        refs = self.refs
        return self.block * sum(
            (n if g != keep else max(0, n - spare))
            for g, n in self.blocks.items() if g not in refs
        )

    def evict(self, need: int, keep: int = -1, spare: int = 0) -> int:
        """Evict unpinned blocks, least recently released group first and each from its
        end, until ``need`` tokens are free or none is left (group ``keep``'s first
        ``spare`` blocks are spared). Returns the tokens freed."""
        refs, blocks, size = self.refs, self.blocks, self.block
        freed = 0
        for g in list(blocks):
            if freed >= need:
                break
            if g in refs:
                continue
            have = blocks[g]
            floor = spare if g == keep else 0
            if have <= floor:
                continue
            take = min(have - floor, -(-(need - freed) // size))
            if take == have:
                del blocks[g]
            else:
                blocks[g] = have - take
            if self.tier is not None:
                self.tier.put(g, have - take, have)
            freed += take * size
        self.tokens -= freed
        return freed

    def clear(self) -> None:
        """The worker died: everything cached is gone."""
        self.blocks.clear()
        self.refs.clear()
        self.tokens = 0
        tier = self.tier
        while tier is not None:
            tier.clear()
            tier = tier.lower
