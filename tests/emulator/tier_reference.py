"""The step-by-step prefix reference (``prefix_reference.py``) with lower KV tiers
under each worker's prefix cache: the yardstick for the engine's ``kv_tiers``. It
keeps each tier's blocks as a set of block numbers per group and recounts what it
needs from them; it imports nothing from ``emulator``.

What it adds:

* Each worker has tiers, fastest first, each of a capacity in blocks and a cost in
  seconds per token loaded. A block the cache evicts (block ``b`` of its group)
  goes to the first tier. A tier keeps, per group, a run of consecutive blocks: a
  block that is not just before the group's run there replaces the run.
* A tier over its capacity evicts one block at a time: the highest block of the
  group used least recently (a group is used when a block of it arrives or is
  loaded), into the next tier; the last tier drops it.
* At an admission with ``hit`` tokens found in the cache, the request's prefix
  blocks from there on are looked for tier by tier: in each tier holding the group,
  the run must start at the next block wanted, and the blocks up to the usable ones
  are loaded (the tier is skipped if it holds none of the group). Loaded tokens are
  not computed (its progress starts after them) but are in its KV, and the seconds
  of the loads lengthen that worker's next step.
* When the cache holds a group's first ``whole`` blocks again, every tier forgets the
  group's blocks below ``whole``.

A shared tier is one set of blocks per group for all the workers (the same dicts in
every worker's list), after the private tiers. It differs in three places: a block
coming down joins the group's blocks there when it is inside their span or next to
it (else it replaces them); at a lookup the block wanted next may be anywhere in the
group's blocks there (none past the first missing one is loaded); and it forgets
nothing when a cache holds the blocks again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from prefix_reference import PrefixRequest, PrefixResult, _PrefixSim, _PReq
from token_reference import ReferenceResult, TokenRequest, WorkerParams, _record, _Worker

__all__ = ["PrefixRequest", "TierParams", "TierResult", "simulate_tiers"]


@dataclass(frozen=True)
class TierParams:
    """One tier: its name, capacity in tokens and seconds to load a token."""

    name: str
    capacity_tokens: int
    s_per_token: float
    shared: bool = False


@dataclass(frozen=True)
class TierResult:
    """The prefix reference's result and, per tier name, the tokens loaded from it
    and the seconds the loads took (all workers)."""

    prefix: PrefixResult
    loaded: dict[str, int]
    load_s: dict[str, float]


class _TierSim(_PrefixSim):
    def __init__(self, *args, tiers: Sequence[TierParams], **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.tiers = list(tiers)
        # per worker, per tier: group -> set of block numbers; and group -> last use
        common: list[dict[int, set[int]]] = [{} for _ in tiers]
        common_use: list[dict[int, int]] = [{} for _ in tiers]
        self.held: list[list[dict[int, set[int]]]] = [
            [common[i] if t.shared else {} for i, t in enumerate(tiers)] for _ in self.workers]
        self.used_at: list[list[dict[int, int]]] = [
            [common_use[i] if t.shared else {} for i, t in enumerate(tiers)] for _ in self.workers]
        self.due = [0.0 for _ in self.workers]
        self.tick = 0
        self.loaded = {t.name: 0 for t in tiers}
        self.load_seconds = {t.name: 0.0 for t in tiers}

    def _use(self, w: int, level: int, group: int) -> None:
        self.tick += 1
        self.used_at[w][level][group] = self.tick

    def _put(self, w: int, level: int, group: int, block: int) -> None:
        if level == len(self.tiers):
            return  # dropped
        held = self.held[w][level]
        run = held.get(group)
        if self.tiers[level].shared:
            if run and not min(run) - 1 <= block <= max(run) + 1:
                run = None
        elif run and min(run) != block + 1:
            run = None  # not joined to the new block: replaced
        held[group] = (run or set()) | {block}
        self._use(w, level, group)
        capacity = self.tiers[level].capacity_tokens // self.bt
        while sum(len(b) for b in held.values()) > capacity:
            victim = min(held, key=lambda g: self.used_at[w][level][g])
            top = max(held[victim])
            held[victim].discard(top)
            if not held[victim]:
                del held[victim]
            self._put(w, level + 1, victim, top)

    def demote(self, w: _Worker, group: int, block: int) -> None:
        self._put(w.index, 0, group, block)

    def load(self, w: _Worker, r: _PReq, hit: int) -> int:
        if r.group < 0:
            return 0
        usable = min(r.prefix, r.target - 1) // self.bt
        pos = hit // self.bt
        start = pos
        for level, tier in enumerate(self.tiers):
            if pos >= usable:
                break
            run = self.held[w.index][level].get(r.group)
            if not run:
                continue
            if (tier.shared and pos not in run and min(run) > pos) or (not tier.shared and min(run) != pos):
                break
            first = pos
            while pos < usable and pos in run:
                pos += 1
            if pos == first:
                continue  # (a shared tier holding only blocks found above)
            tokens = (pos - first) * self.bt
            self.loaded[tier.name] += tokens
            self.load_seconds[tier.name] += tokens * tier.s_per_token
            self.due[w.index] += tokens * tier.s_per_token
            self._use(w.index, level, r.group)
        return (pos - start) * self.bt

    def take_load_s(self, w: _Worker) -> float:
        due, self.due[w.index] = self.due[w.index], 0.0
        return due

    def cached_again(self, w: _Worker, group: int, whole: int) -> None:
        for tier, held in zip(self.tiers, self.held[w.index], strict=True):
            if tier.shared:
                continue
            run = held.get(group)
            if run:
                run -= set(range(whole))
                if not run:
                    del held[group]


def simulate_tiers(
    requests: Sequence[TokenRequest], *, workers: int, params: WorkerParams,
    tiers: Sequence[TierParams], policy: str = "round_robin", block_tokens: int = 16,
    timeout_s: float | None = None, duration_s: float,
) -> TierResult:
    """Run the prefix reference with ``tiers`` under every worker's cache."""
    sim = _TierSim(
        requests, workers, params, policy, timeout_s, duration_s, cache=True,
        block_tokens=block_tokens, weights={"prefix": 3.0, "queue": 2.0}, tiers=tiers,
    )
    sim.run()
    run = ReferenceResult(
        records=tuple(_record(r) for r in sim.reqs), preemptions=sim.preemptions,
        steps=sim.steps, busy_s=tuple(w.busy_s for w in sim.workers), step_log=(),
    )
    prefix = PrefixResult(
        run=run, seen=tuple(c.seen for c in sim.caches), hit=tuple(c.hit for c in sim.caches),
        first_hit=tuple(r.first_hit for r in sim.reqs),  # type: ignore[attr-defined]
        evicted=sim.evicted,
    )
    return TierResult(prefix=prefix, loaded=sim.loaded, load_s=sim.load_seconds)
