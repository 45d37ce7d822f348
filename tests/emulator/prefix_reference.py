"""The step-by-step reference (``token_reference.py``) with shared prefixes, a prefix
cache per worker and cache-aware routing: the yardstick for the engine's prefix
caching. Like that model it favours being obviously right over being fast: KV in use
and pinned groups are recounted from the running requests whenever they are needed,
and it imports nothing from ``emulator``.

What it adds to the continuous-batching model of ``token_reference``:

* A request may carry a prefix ``group`` and ``prefix_tokens`` (at most its prompt).
  Prompts are cut into blocks of ``block_tokens``; a worker caches, per group, a
  number of whole blocks, always the group's first ones. Cached blocks count in the
  worker's KV next to the running requests' KV.
* Lookup: a request with prefill target ``T`` finds ``min(cached blocks,
  min(prefix, T - 1) // block)`` blocks; those tokens are neither reserved again nor
  computed (its progress starts there).
* A group is pinned while any running request of the worker belongs to it. Unpinned
  groups are evicted block by block from their end, the least recently released
  group first (a group is released when its last running request leaves; a group
  that (re)appears in the cache counts as released then).
* Step 1: while free KV < |D|, evict unpinned blocks (up to the shortfall), and only
  when there are none preempt as before. Admission: a head that does not fit evicts
  unpinned blocks if that is enough (of its own group only those beyond the ones it
  reuses), and otherwise blocks.
* At the step end that completes a request's prefill, its prefix's whole blocks
  beyond those cached move from its KV to the cache.
* Routing: ``prefix_aware`` picks the worker with the largest cached share of the
  request's prefix (its lookup with ``T`` = prompt, over ``prefix_tokens``), then the
  fewest waiting + running requests, then the lowest index; ``weighted`` the largest
  ``w_prefix * that share + w_queue * (max waiting - waiting) / (max - min waiting)
  (1 when all equal) + w_kv * (1 - (KV in use - unpinned cached KV) / capacity)
  + w_running * (max running - running) / (max - min running) (1 when all equal)``,
  ties as for ``prefix_aware``.
* Admission control (``queue_limit``) as in ``token_reference``, under every policy.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

from token_reference import (
    _STEP_END,
    _STEP_START,
    ReferenceResult,
    TokenRequest,
    WorkerParams,
    _record,
    _Req,
    _Sim,
    _Worker,
)

POLICIES = ("round_robin", "least_loaded", "pull", "prefix_aware", "weighted")


@dataclass(frozen=True)
class PrefixRequest(TokenRequest):
    """A request whose first ``prefix_tokens`` prompt tokens are its group's."""

    group: int = -1
    prefix_tokens: int = 0


@dataclass(frozen=True)
class PrefixResult:
    """The reference's records and totals, and its prefix figures: per worker the
    prefix tokens looked up and found cached, and per request the tokens found at its
    first admission (None: never admitted)."""

    run: ReferenceResult
    seen: tuple[int, ...]
    hit: tuple[int, ...]
    first_hit: tuple[int | None, ...]
    evicted: int = 0  # cached tokens evicted

    @property
    def hit_rate(self) -> float | None:
        seen = sum(self.seen)
        return sum(self.hit) / seen if seen else None


class _PReq(_Req):
    __slots__ = ("group", "prefix", "first_hit")

    def __init__(self, index: int, req: TokenRequest, timeout_s: float | None) -> None:
        super().__init__(index, req, timeout_s)
        self.group = getattr(req, "group", -1)
        self.prefix = getattr(req, "prefix_tokens", 0)
        self.first_hit: int | None = None


@dataclass
class _Cache:
    blocks: dict[int, int] = field(default_factory=dict)  # group -> whole blocks cached
    released: dict[int, int] = field(default_factory=dict)  # group -> when last released
    seen: int = 0
    hit: int = 0


class _PrefixSim(_Sim):
    def __init__(
        self, requests: Sequence[TokenRequest], workers: int, params: WorkerParams,
        policy: str, timeout_s: float | None, duration_s: float, *, cache: bool,
        block_tokens: int, weights: dict[str, float], queue_limit: int = 0,
    ) -> None:
        super().__init__(
            requests, workers, params, policy, timeout_s, duration_s, False, queue_limit
        )
        self.reqs = [
            _PReq(i, r, timeout_s) for i, r in enumerate(requests) if r.arrival_s <= duration_s
        ]
        self.cache_on = cache
        self.bt = block_tokens
        self.weights = weights
        self.caches = [_Cache() for _ in self.workers]
        self.clock = 0  # orders releases
        self.evicted = 0

    # -- the cache -----------------------------------------------------------------

    def pinned(self, w: _Worker) -> set[int]:
        return {r.group for r in w.running if r.group >= 0}  # type: ignore[attr-defined]

    def cached_tokens(self, w: _Worker) -> int:
        return self.bt * sum(self.caches[w.index].blocks.values())

    def used(self, w: _Worker) -> int:
        return sum(r.kv for r in w.running) + self.cached_tokens(w)

    def evictable(self, w: _Worker, keep: int = -1, spare: int = 0) -> int:
        """Tokens of unpinned blocks; group ``keep`` keeps its first ``spare`` blocks."""
        pinned = self.pinned(w)
        blocks = self.caches[w.index].blocks
        return self.bt * sum(
            n - (min(n, spare) if g == keep else 0)
            for g, n in blocks.items() if g not in pinned
        )

    def evict(self, w: _Worker, need: int, keep: int = -1, spare: int = 0) -> None:
        c = self.caches[w.index]
        pinned = self.pinned(w)
        order = sorted((g for g in c.blocks if g not in pinned), key=lambda g: c.released[g])
        freed = 0
        for g in order:
            floor = spare if g == keep else 0
            while freed < need and c.blocks.get(g, 0) > floor:
                c.blocks[g] -= 1
                freed += self.bt
                self.evicted += self.bt
                self.demote(w, g, c.blocks[g])
            if c.blocks[g] == 0:
                del c.blocks[g]
            if freed >= need:
                return

    def lookup(self, w: _Worker, r: _PReq, target: int) -> int:
        if not self.cache_on or r.group < 0:
            return 0
        usable = min(r.prefix, target - 1) // self.bt
        return min(self.caches[w.index].blocks.get(r.group, 0), usable) * self.bt

    def leaving(self, w: _Worker, r: _PReq) -> None:
        """``r`` was just taken out of ``w.running``: release its group if it was the last."""
        if r.group >= 0 and r.group not in self.pinned(w):
            self.clock += 1
            self.caches[w.index].released[r.group] = self.clock

    # -- dispatching -----------------------------------------------------------------

    def arrive(self, r: _Req, t: float) -> None:  # type: ignore[override]
        if self.policy not in ("prefix_aware", "weighted"):
            super().arrive(r, t)
            return
        assert isinstance(r, _PReq)
        if r.prompt + r.output > self.p.kv_cache_tokens or self.waiting_full():
            r.outcome = "shed"
            return
        share = [
            self.lookup(w, r, r.prompt) / r.prefix if r.group >= 0 and r.prefix > 0 else 0.0
            for w in self.workers
        ]
        load = [len(w.waiting) + len(w.running) for w in self.workers]
        if self.policy == "prefix_aware":
            scores = share
        else:
            wp, wq, wk, wr = (
                self.weights.get(k, 0.0) for k in ("prefix", "queue", "kv_free", "running")
            )
            waiting = [len(w.waiting) for w in self.workers]
            lo, hi = min(waiting), max(waiting)
            active = [len(w.running) for w in self.workers]
            r_lo, r_hi = min(active), max(active)
            scores = []
            for i, w in enumerate(self.workers):
                s = 0.0
                if wp:
                    s += wp * share[i]
                if wq:
                    s += wq * (1.0 if hi == lo else (hi - waiting[i]) / (hi - lo))
                if wk:
                    busy = (self.used(w) - self.evictable(w)) / self.p.kv_cache_tokens
                    s += wk * (1.0 - max(0.0, min(1.0, busy)))
                if wr:
                    s += wr * (1.0 if r_hi == r_lo else (r_hi - active[i]) / (r_hi - r_lo))
                scores.append(s)
        best = max(range(len(self.workers)), key=lambda i: (scores[i], -load[i], -i))
        target = self.workers[best]
        r.worker = target.index
        target.waiting.append(r)
        if target.asleep:
            self.wake(target, t)

    # -- one step --------------------------------------------------------------------

    def start_step(self, w: _Worker, t: float) -> None:
        p = self.p
        if self.timeout_s is not None:
            self.drop_expired(w, t)
        decoding = [r for r in w.running if r.progress == r.target]
        while p.kv_cache_tokens - self.used(w) < len(decoding):
            short = len(decoding) - (p.kv_cache_tokens - self.used(w))
            if self.evictable(w) > 0:
                self.evict(w, short)
            else:
                self.preempt(w)
            decoding = [r for r in w.running if r.progress == r.target]
        for r in decoding:
            r.kv += 1

        budget = max(0, p.max_batched_tokens - len(decoding))
        chunks: list[tuple[_Req, int]] = []
        for r in w.running:
            if r.progress < r.target and budget > 0:
                chunk = min(r.target - r.progress, budget)
                chunks.append((r, chunk))
                budget -= chunk

        queues = [w.waiting]
        if self.policy == "pull":
            queues.append(self.dispatch_queue)
        blocked = False
        for queue in queues:
            while queue and budget > 0 and len(w.running) < p.max_num_seqs:
                head = queue[0]
                assert isinstance(head, _PReq)
                hit = self.lookup(w, head, head.target)
                need = head.target - hit
                free = p.kv_cache_tokens - self.used(w)
                if free < need:
                    # Unpinned blocks go, but not those the head reuses.
                    spare = hit // self.bt
                    if self.cache_on and self.evictable(w, head.group, spare) >= need - free:
                        self.evict(w, need - free, head.group, spare)
                    else:
                        blocked = True
                        break
                queue.popleft()
                head.worker = w.index
                head.kv = need
                loaded = self.load(w, head, hit)  # from lower KV tiers (none here)
                head.progress = hit + loaded
                if head.admitted_s is None:
                    head.admitted_s = t
                if head.group >= 0:
                    c = self.caches[w.index]
                    c.seen += head.prefix
                    c.hit += hit + loaded
                    if head.first_hit is None:
                        head.first_hit = hit
                w.running.append(head)
                chunk = min(need - loaded, budget)
                chunks.append((head, chunk))
                budget -= chunk
            if blocked or queue:
                break

        if not w.running:
            assert not w.waiting, "an idle worker left a request waiting"
            w.asleep = True
            return
        prefill = sum(c for _, c in chunks)
        attention = sum(c * (r.progress + c) for r, c in chunks)
        context = sum(r.kv for r in decoding)
        assert p.roofline is None, "the prefix reference uses the linear step model"
        duration = (
            p.step_base_s + p.prefill_token_s * prefill + p.prefill_attn_s * attention
            + p.decode_seq_s * len(decoding) + p.kv_token_s * context
        )
        w.step_start_s = t
        w.step_end_s = t + self.take_load_s(w) + duration
        w.chunks = chunks
        w.decoding = decoding
        heapq.heappush(self.heap, (w.step_end_s, _STEP_END, w.index))

    def drop_expired(self, w: _Worker, t: float) -> None:
        for r in [r for r in w.waiting if r.expired(t)]:
            w.waiting.remove(r)
            r.outcome = "timed_out"
        for r in [r for r in w.running if r.expired(t)]:
            w.running.remove(r)
            r.kv = 0
            r.outcome = "timed_out"
            self.leaving(w, r)  # type: ignore[arg-type]
        while self.dispatch_queue and self.dispatch_queue[0].expired(t):
            self.dispatch_queue.popleft().outcome = "timed_out"

    def preempt(self, w: _Worker) -> None:
        r = w.running.pop()
        r.kv = 0
        r.target = r.prompt + r.generated
        r.progress = 0
        r.preemptions += 1
        w.waiting.appendleft(r)
        self.preemptions += 1
        self.leaving(w, r)  # type: ignore[arg-type]

    def end_step(self, w: _Worker, t: float) -> None:
        w.busy_s += t - w.step_start_s
        w.step_end_s = None
        self.steps += 1
        producing = list(w.decoding)
        for r, chunk in w.chunks:
            r.progress += chunk
            if r.progress == r.target:
                producing.append(r)
                self.insert(w, r)  # type: ignore[arg-type]
        for r in producing:
            r.generated += 1
            if r.first_token_s is None:
                r.first_token_s = t
            if r.generated == r.output:
                r.done_s = t
                late = r.deadline_s is not None and t > r.deadline_s
                r.outcome = "timed_out" if late else "ok"
                w.running.remove(r)
                r.kv = 0
                self.leaving(w, r)  # type: ignore[arg-type]
        w.chunks = []
        w.decoding = []
        heapq.heappush(self.heap, (t, _STEP_START, w.index))

    def insert(self, w: _Worker, r: _PReq) -> None:
        if not self.cache_on or r.group < 0:
            return
        c = self.caches[w.index]
        whole = r.prefix // self.bt
        have = c.blocks.get(r.group, 0)
        if whole > have:
            if have == 0:
                self.clock += 1
                c.released[r.group] = self.clock  # (re)appears: counts as released now
            c.blocks[r.group] = whole
            r.kv -= (whole - have) * self.bt
            self.cached_again(w, r.group, whole)

    # -- hooks for lower KV tiers (``tier_reference.py``): none here -----------------

    def demote(self, w: _Worker, group: int, block: int) -> None:
        """Block ``block`` of ``group`` was evicted from ``w``'s cache."""

    def load(self, w: _Worker, r: _PReq, hit: int) -> int:
        """Prefix tokens ``r``, admitted with ``hit`` cached, loads from lower tiers."""
        return 0

    def take_load_s(self, w: _Worker) -> float:
        """Seconds of loads the step starting at ``w`` spends first."""
        return 0.0

    def cached_again(self, w: _Worker, group: int, whole: int) -> None:
        """``w``'s cache holds ``group``'s first ``whole`` blocks again."""


def simulate_prefix(
    requests: Sequence[TokenRequest],
    *,
    workers: int,
    params: WorkerParams,
    policy: str = "round_robin",
    cache: bool = True,
    block_tokens: int = 16,
    weights: dict[str, float] | None = None,
    timeout_s: float | None = None,
    duration_s: float,
    queue_limit: int = 0,
) -> PrefixResult:
    """Run the step-by-step model with prefix caching until ``duration_s``."""
    if policy not in POLICIES:
        raise ValueError(f"policy {policy!r} is not one of {', '.join(POLICIES)}")
    for i, r in enumerate(requests):
        if i and r.arrival_s < requests[i - 1].arrival_s:
            raise ValueError(f"request {i}: requests must be sorted by arrival_s")
        if getattr(r, "prefix_tokens", 0) > r.prompt_tokens:
            raise ValueError(f"request {i}: prefix_tokens is more than prompt_tokens")
    sim = _PrefixSim(
        requests, workers, params, policy, timeout_s, duration_s, cache=cache,
        block_tokens=block_tokens, weights=weights or {"prefix": 3.0, "queue": 2.0},
        queue_limit=queue_limit,
    )
    sim.run()
    run = ReferenceResult(
        records=tuple(_record(r) for r in sim.reqs),
        preemptions=sim.preemptions,
        steps=sim.steps,
        busy_s=tuple(w.busy_s for w in sim.workers),
        step_log=(),
    )
    return PrefixResult(
        run=run,
        seen=tuple(c.seen for c in sim.caches),
        hit=tuple(c.hit for c in sim.caches),
        first_hit=tuple(r.first_hit for r in sim.reqs),  # type: ignore[attr-defined]
        evicted=sim.evicted,
    )


