"""An independent, step-by-step model of disaggregated prefill and decode, built on the
request and worker figures of ``token_reference`` (``TokenRequest``, ``WorkerParams``).

Like ``token_reference`` it favours being obviously right over being fast: every
worker is advanced one scheduler step at a time, with plain lists, and it imports
nothing from ``emulator``. Steps last as ``token_reference`` says, under the linear or
the roofline step model. Faults are left out (the engine's tests check those on
their own).

The model
=========

There are ``prefill_workers`` prefill workers and ``decode_workers`` decode workers,
all with the same ``WorkerParams``. Each keeps a waiting queue and a running list as in
``token_reference``; a prefill worker also holds the KV of the requests it prefilled
until their transfer ends; a decode worker also has ``incoming`` (handoffs with no KV
reserved, FIFO), ``moving`` (KV reserved, transfer under way), ``landed`` (KV
arrived) and a link that carries one transfer at a time.

Arrival at ``t``: a request with ``prompt + output > kv_cache_tokens`` is shed. One
with ``prompt <= threshold_tokens`` goes to a decode worker's waiting queue and is
served there as ``token_reference`` serves it. Any other goes to a prefill worker's
waiting queue. A sleeping worker that gets work starts a step at ``t``.

Routing, per pool (each pool has its own policy): ``round_robin`` cycles over the
pool's workers (one counter for arrivals into the prefill pool; the decode pool's
counter serves both decider-local arrivals and handoffs, in the order they happen);
``least_loaded`` picks the worker holding the fewest of the pool's requests (prefill:
waiting + running + held; decode: incoming + moving + landed + waiting + running),
lowest index on ties. ``pull`` (prefill pool only): an arrival goes to the idle
prefill worker of the lowest index (asleep, nothing waiting, no KV held for a
transfer: a held request whose whole prompt went to the prefix cache holds none), else into one FIFO held queue in front of the pool.

Admission, per pool (``queue_limit``, 0: none): an arrival for a pushing pool is shed
when the requests waiting at that pool's workers (their waiting queues) number the
bound; under ``pull`` one is shed when the held queue holds the bound.

A step start at ``t``, as in ``token_reference`` with two additions:

a. (decode) every landed request joins the end of the running list with
   ``target = prompt``, ``progress = prompt - 1`` and ``kv = prompt`` (reserved
   already): one prompt position is left, whose chunk gives the first token.
b. preemption and the decoders' KV tokens, the budget, and chunks for running
   requests with prefill left (``token_reference`` steps 1-3);
c. (decode) while ``incoming`` is not empty, the free KV holds its head's prompt and
   running + moving < ``max_num_seqs``: reserve ``prompt`` KV, and start the transfer
   at ``max(t, link free)``; it lasts ``prompt * transfer_s_per_token``;
d. admission from the waiting queue (``token_reference`` step 4); then, under ``pull``
   on a prefill worker whose own head did not block, from the held queue in order
   while budget, ``max_num_seqs`` and free KV (for the head's prompt less its cached
   prefix, evicting as for the waiting queue) allow.

At a prefill worker's step end a request whose prefill completes produces a token (its
``prefill_token_s``), leaves the running list keeping its KV, and is handed to a decode
worker (the decode pool's policy), appended to its ``incoming``; a sleeping decode
worker starts a step at once. At a transfer's end the prefill worker frees the KV (and
starts a step if asleep with requests waiting), and the request lands (the decode
worker starts a step if asleep); under ``pull`` the prefill worker starts a step if
asleep whatever it holds (it may take held requests, or be idle again). At a decode worker's step end requests generate
tokens as in ``token_reference``; a landed request's first token is the client's.

Same instant: step and transfer ends in the order they were scheduled, then arrivals,
then step starts. The run ends at ``duration_s`` as in ``token_reference``.

Client timeouts (``timeout_s``): a request's deadline is its arrival + ``timeout_s``. At
any worker's step start at ``t`` (before landed requests join), every request the
worker holds with its deadline at or before ``t`` leaves as ``timed_out``, in arrival
order: waiting or running (its KV freed), held for a transfer (prefill), or incoming,
moving or landed (decode). A handoff leaves both sides: the prefill worker frees the KV
it held, the decode worker the KV it reserved (a transfer under way keeps the link busy
until it would have ended); the other worker starts a step if asleep with requests
waiting (prefill) or incoming (decode). A request that completes after its deadline is
``timed_out``, and one unfinished at the end is if its deadline has passed. Under
``pull``, a prefill worker about to admit from the held queue (its own head did not
block) first drops the held requests whose deadline is at or before ``t``.

Prefix caching (``cache=True``), as ``prefix_reference`` says for one worker, on every
worker of both pools; requests carry ``group`` and ``prefix_tokens`` (``PrefixRequest``):

* A prefill worker looks a request up at admission (its cached prefix is neither
  reserved nor computed), and at the step end that completes its prefill moves its
  prefix's new whole blocks from its KV to the cache before handing it off; the KV it
  then holds for the transfer is the rest. A held request pins its group as a running
  one does; the group is released when the transfer ends. An admission that does not
  fit evicts unpinned blocks if that is enough, of its own group only those beyond
  the ones it reuses (on both pools' workers, as ``prefix_reference`` says).
* A decode worker caches for the requests it serves whole; a handed-off request
  brings its KV whole and has no group there (it neither reads, pins nor fills the
  cache). At step c a handoff whose prompt does not fit evicts unpinned blocks if
  that is enough, and otherwise blocks.
* ``prefix_aware`` in either pool picks the worker with the largest cached share of
  the request's prefix (lookup with ``T`` = prompt, over ``prefix_tokens``), then the
  fewest waiting + running requests, then the lowest index; in the decode pool, for a
  handoff too (its group looked up in the decode workers' caches). ``weighted`` scores
  the pool's workers as ``prefix_reference`` says (``weights``, by default prefix 3 and
  queue 2; KV in use counts reservations for transfers and KV held for them; a decode
  worker's ``incoming`` counts as waiting; ``running`` scores the fewest running
  requests 1 and the most 0, linearly between), ties as for ``prefix_aware``.

The decider, at an arrival that is not shed: the decode pool serves the request whole
if its prompt is at most ``threshold_tokens``; else if ``max_prefill_queue`` > 0 and the
prefill workers' waiting queues (and under ``pull`` the held queue) hold at least that
many requests; else, with
``decider = "uncached"``, if its prompt less its lookup (``T`` = prompt) on the prefill
worker the prefill pool's policy would pick now is at most ``threshold_tokens`` (the
pick is only looked at: the round-robin counter does not move; not with ``pull``,
which picks no worker in advance). Otherwise it is prefilled. The pool's admission
bound is then held against the pool the decider chose.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import count

from token_reference import TokenRequest, WorkerParams

POLICIES = ("round_robin", "least_loaded", "prefix_aware", "weighted", "pull")
DECIDERS = ("prompt", "uncached")
_END, _ARRIVAL, _START = 0, 1, 2  # same-instant order


@dataclass(frozen=True)
class DisaggRecord:
    """What happened to one offered request."""

    outcome: str  # "ok" | "shed" | "in_system"
    prefill_worker: int | None  # None: the decider sent it straight to decode
    decode_worker: int | None
    prefill_token_s: float | None  # the prefill worker's token
    first_token_s: float | None  # the first token the client sees
    done_s: float | None
    ttft_s: float | None
    tpot_s: float | None
    latency_s: float | None


@dataclass(frozen=True)
class DisaggResult:
    """Per-request records (offered requests, input order) and run totals."""

    records: tuple[DisaggRecord, ...]
    preemptions: int
    transfers: int
    seen: int = 0  # prefix tokens looked up at admissions (both pools)
    hit: int = 0  # ... and found cached
    skipped: int = 0  # requests the decider sent to the decode pool whole
    sheds: int = 0  # refused at a pool's waiting bound

    def count(self, outcome: str) -> int:
        """How many offered requests ended with ``outcome``."""
        return sum(1 for r in self.records if r.outcome == outcome)


class _Req:
    def __init__(self, index: int, req: TokenRequest) -> None:
        self.index = index
        self.arrival_s = req.arrival_s
        self.prompt = req.prompt_tokens
        self.output = req.output_tokens
        self.target = self.prompt
        self.progress = 0
        self.generated = 0
        self.kv = 0
        self.remote = False  # handed over from a prefill worker
        self.group = getattr(req, "group", -1)
        self.prefix = getattr(req, "prefix_tokens", 0)
        self.held_kv = 0  # KV its prefill worker holds for the transfer
        self.pw: int | None = None
        self.dw: int | None = None
        self.prefill_token_s: float | None = None
        self.first_token_s: float | None = None
        self.done_s: float | None = None
        self.outcome: str | None = None
        self.deadline = float("inf")


class _Worker:
    def __init__(self, index: int, decode: bool) -> None:
        self.index = index
        self.decode = decode
        self.waiting: deque[_Req] = deque()
        self.running: list[_Req] = []
        self.kv_used = 0
        self.asleep = True
        self.held: list[_Req] = []  # prefill: KV held for a transfer
        self.incoming: deque[_Req] = deque()  # decode
        self.moving: list[_Req] = []
        self.landed: list[_Req] = []
        self.link_free = 0.0
        self.chunks: list[tuple[_Req, int]] = []
        self.decoding: list[_Req] = []
        self.blocks: dict[int, int] = {}  # group -> whole prefix blocks cached
        self.released: dict[int, int] = {}  # group -> when last released

    def load(self) -> int:
        return (
            len(self.waiting) + len(self.running) + len(self.held) + len(self.incoming)
            + len(self.moving) + len(self.landed)
        )


class _Sim:
    def __init__(
        self, requests: Sequence[TokenRequest], prefill: int, decode: int, p: WorkerParams,
        policy: dict[str, str], threshold: int, s_per_token: float, duration_s: float,
        limit: dict[str, int], *, cache: bool = False, block_tokens: int = 16,
        decider: str = "prompt", max_prefill_queue: int = 0, timeout_s: float | None = None,
        weights: dict[str, float] | None = None,
    ) -> None:
        self.p = p
        self.weights = weights or {"prefix": 3.0, "queue": 2.0}
        self.timeout_s = timeout_s
        self.policy = policy
        self.limit = limit
        self.held: deque[_Req] = deque()  # under pull: in front of the prefill pool
        self.sheds = 0
        self.threshold = threshold
        self.cache_on = cache
        self.bt = block_tokens
        self.decider = decider
        self.max_queue = max_prefill_queue
        self.clock = 0  # orders releases
        self.seen = self.hit = self.skipped = 0
        self.s_per_token = s_per_token
        self.duration_s = duration_s
        self.reqs = [_Req(i, r) for i, r in enumerate(requests) if r.arrival_s <= duration_s]
        if timeout_s is not None:
            for r in self.reqs:
                r.deadline = r.arrival_s + timeout_s
        self.pool = {
            "prefill": [_Worker(i, False) for i in range(prefill)],
            "decode": [_Worker(i, True) for i in range(decode)],
        }
        self.rr = {"prefill": 0, "decode": 0}
        self.heap: list[tuple[float, int, int, object]] = []
        self.seq = count()
        self.preemptions = 0
        self.transfers = 0

    def push(self, t: float, kind: int, what: object) -> None:
        heapq.heappush(self.heap, (t, kind, next(self.seq), what))

    def run(self) -> None:
        for r in self.reqs:
            self.push(r.arrival_s, _ARRIVAL, r)
        while self.heap:
            t, kind, _, what = heapq.heappop(self.heap)
            if t > self.duration_s or (kind == _START and t >= self.duration_s):
                break
            if kind == _ARRIVAL:
                self.arrive(what, t)  # type: ignore[arg-type]
            elif kind == _START:
                self.start_step(what, t)  # type: ignore[arg-type]
            elif isinstance(what, _Worker):
                self.end_step(what, t)
            else:
                self.transfer_end(what, t)  # type: ignore[arg-type]
        for r in self.reqs:
            if r.outcome is None:
                r.outcome = "timed_out" if r.deadline <= self.duration_s else "in_system"

    def wake(self, w: _Worker, t: float) -> None:
        if w.asleep:
            w.asleep = False
            self.push(t, _START, w)

    # -- the prefix cache ----------------------------------------------------------

    def group(self, w: _Worker, r: _Req) -> int:
        """``r``'s group at ``w`` (-1: none; a handoff has none at its decode worker)."""
        return -1 if not self.cache_on or (w.decode and r.remote) else r.group

    def pinned(self, w: _Worker) -> set[int]:
        return {self.group(w, r) for r in (*w.running, *w.held)} - {-1}

    def used(self, w: _Worker) -> int:
        return w.kv_used + self.bt * sum(w.blocks.values())

    def evictable(self, w: _Worker, keep: int = -1, spare: int = 0) -> int:
        """Tokens of unpinned blocks; group ``keep`` keeps its first ``spare`` blocks."""
        pinned = self.pinned(w)
        return self.bt * sum(
            n - (min(n, spare) if g == keep else 0) for g, n in w.blocks.items() if g not in pinned
        )

    def evict(self, w: _Worker, need: int, keep: int = -1, spare: int = 0) -> None:
        pinned = self.pinned(w)
        order = sorted((g for g in w.blocks if g not in pinned), key=lambda g: w.released[g])
        freed = 0
        for g in order:
            floor = spare if g == keep else 0
            while freed < need and w.blocks.get(g, 0) > floor:
                w.blocks[g] -= 1
                freed += self.bt
            if w.blocks[g] == 0:
                del w.blocks[g]
            if freed >= need:
                return

    def lookup(self, w: _Worker, r: _Req, target: int) -> int:
        g = self.group(w, r)
        if g < 0:
            return 0
        return min(w.blocks.get(g, 0), min(r.prefix, target - 1) // self.bt) * self.bt

    def insert(self, w: _Worker, r: _Req) -> None:
        g = self.group(w, r)
        if g < 0:
            return
        whole, have = r.prefix // self.bt, w.blocks.get(g, 0)
        if whole > have:
            if have == 0:
                self.clock += 1
                w.released[g] = self.clock  # (re)appears: counts as released now
            w.blocks[g] = whole
            moved = (whole - have) * self.bt
            r.kv -= moved
            w.kv_used -= moved

    def leaving(self, w: _Worker, r: _Req) -> None:
        """``r`` just left ``w``'s running (or held) list: release its group if last."""
        g = self.group(w, r)
        if g >= 0 and g not in self.pinned(w):
            self.clock += 1
            w.released[g] = self.clock

    # -- routing ---------------------------------------------------------------------

    def pick(self, pool: str, r: _Req, peek: bool = False) -> _Worker:
        workers = self.pool[pool]
        if self.policy[pool] == "round_robin":
            w = workers[self.rr[pool]]
            if not peek:
                self.rr[pool] = (self.rr[pool] + 1) % len(workers)
            return w
        if self.policy[pool] in ("prefix_aware", "weighted"):
            def share(w: _Worker) -> float:
                if not self.cache_on or r.group < 0 or r.prefix <= 0:
                    return 0.0
                g = w.blocks.get(r.group, 0)
                return min(g, min(r.prefix, r.prompt - 1) // self.bt) * self.bt / r.prefix
            score = {w.index: share(w) for w in workers}
            if self.policy[pool] == "weighted":
                wp, wq, wk, wr = (
                    self.weights.get(k, 0.0) for k in ("prefix", "queue", "kv_free", "running")
                )
                queue = {w.index: len(w.waiting) + len(w.incoming) for w in workers}
                lo, hi = min(queue.values()), max(queue.values())
                active = {w.index: len(w.running) for w in workers}
                r_lo, r_hi = min(active.values()), max(active.values())
                for w in workers:
                    busy = (self.used(w) - self.evictable(w)) / self.p.kv_cache_tokens
                    q, a = queue[w.index], active[w.index]
                    score[w.index] = (
                        (wp * score[w.index] if wp else 0.0)
                        + (wq * (1.0 if hi == lo else (hi - q) / (hi - lo)) if wq else 0.0)
                        + (wk * (1.0 - max(0.0, min(1.0, busy))) if wk else 0.0)
                        + (wr * (1.0 if r_hi == r_lo else (r_hi - a) / (r_hi - r_lo)) if wr else 0.0)
                    )
            return max(workers, key=lambda w: (score[w.index], -len(w.waiting) - len(w.running), -w.index))
        return min(workers, key=lambda w: (w.load(), w.index))

    def held_kv(self, w: _Worker) -> int:
        """KV ``w`` holds for handoffs (0 also when a held request's whole prompt went
        to the prefix cache)."""
        return sum(r.held_kv for r in w.held)

    def prefill_queue(self) -> int:
        """Requests waiting at the prefill workers, and under ``pull`` in the held queue."""
        return sum(len(w.waiting) for w in self.pool["prefill"]) + len(self.held)

    def to_decode(self, r: _Req) -> bool:
        """The decider (see the module docstring)."""
        if r.prompt <= self.threshold:
            return True
        if self.max_queue and self.prefill_queue() >= self.max_queue:
            return True
        if self.decider == "uncached":
            w = self.pick("prefill", r, peek=True)
            return r.prompt - self.lookup(w, r, r.prompt) <= self.threshold
        return False

    def arrive(self, r: _Req, t: float) -> None:
        if r.prompt + r.output > self.p.kv_cache_tokens:
            r.outcome = "shed"
            return
        pool = "decode" if self.to_decode(r) else "prefill"
        limit = self.limit[pool]
        if self.policy[pool] == "pull":
            idle = [w for w in self.pool[pool] if w.asleep and not w.waiting and not self.held_kv(w)]
            if not idle:
                if limit and len(self.held) >= limit:
                    r.outcome = "shed"
                    self.sheds += 1
                else:
                    self.held.append(r)
                return
            w = idle[0]
            r.pw = w.index
            w.waiting.append(r)
            self.wake(w, t)
            return
        if limit and sum(len(w.waiting) for w in self.pool[pool]) >= limit:
            r.outcome = "shed"
            self.sheds += 1
            return
        self.skipped += pool == "decode"
        w = self.pick(pool, r)
        if pool == "decode":
            r.dw = w.index
        else:
            r.pw = w.index
        w.waiting.append(r)
        self.wake(w, t)

    def drop_expired(self, w: _Worker, t: float) -> None:
        mine = (*w.waiting, *w.running, *w.held, *w.incoming, *w.moving, *w.landed)
        for r in sorted((r for r in mine if r.deadline <= t), key=lambda r: r.index):
            r.outcome = "timed_out"
            if r in w.waiting:
                w.waiting.remove(r)
            elif r in w.running:
                w.running.remove(r)
                w.kv_used -= r.kv
                r.kv = 0
                self.leaving(w, r)
            else:  # a handoff: it leaves both sides
                src = self.pool["prefill"][r.pw]  # type: ignore[index]
                dst = self.pool["decode"][r.dw]  # type: ignore[index]
                if r in src.held:
                    src.held.remove(r)
                    src.kv_used -= r.held_kv
                    self.leaving(src, r)
                    if src is not w and (src.waiting or self.policy["prefill"] == "pull"):
                        self.wake(src, t)
                if r in dst.incoming:
                    dst.incoming.remove(r)
                elif r in dst.moving or r in dst.landed:
                    (dst.moving if r in dst.moving else dst.landed).remove(r)
                    dst.kv_used -= r.prompt
                if dst is not w and dst.incoming:
                    self.wake(dst, t)

    def start_step(self, w: _Worker, t: float) -> None:
        p = self.p
        if self.timeout_s is not None:
            self.drop_expired(w, t)
        for r in w.landed:  # a: they join with one prompt position to run
            r.target, r.progress, r.kv = r.prompt, r.prompt - 1, r.prompt
            w.running.append(r)
        w.landed = []
        # b: preemption, the decoders' tokens, the budget, chunks in progress.
        decoding = [r for r in w.running if r.progress == r.target]
        while p.kv_cache_tokens - self.used(w) < len(decoding):
            if self.evictable(w) > 0:  # unpinned cached blocks go before anything is preempted
                self.evict(w, len(decoding) - (p.kv_cache_tokens - self.used(w)))
                continue
            r = w.running.pop()
            w.kv_used -= r.kv
            r.kv, r.target, r.progress = 0, r.prompt + r.generated, 0
            w.waiting.appendleft(r)
            self.preemptions += 1
            self.leaving(w, r)
            decoding = [r for r in w.running if r.progress == r.target]
        for r in decoding:
            r.kv += 1
            w.kv_used += 1
        budget = max(0, p.max_batched_tokens - len(decoding))
        chunks: list[tuple[_Req, int]] = []
        for r in w.running:
            if r.progress < r.target and budget > 0:
                c = min(r.target - r.progress, budget)
                chunks.append((r, c))
                budget -= c
        # c: reserve KV for handoffs and start their transfers.
        while w.incoming and len(w.running) + len(w.moving) < p.max_num_seqs:
            short = w.incoming[0].prompt - (p.kv_cache_tokens - self.used(w))
            if short > 0:
                if self.evictable(w) < short:
                    break
                self.evict(w, short)
            r = w.incoming.popleft()
            w.kv_used += r.prompt
            w.moving.append(r)
            start = max(t, w.link_free)
            w.link_free = start + r.prompt * self.s_per_token
            self.push(w.link_free, _END, (w, r))
        # d: admission, then (pull, on a prefill worker whose own head did not block)
        # from the held queue.
        blocked = False
        while w.waiting and budget > 0 and len(w.running) < p.max_num_seqs:
            if not self.fits(w, w.waiting[0]):
                blocked = True
                break
            budget = self.admit(w, w.waiting.popleft(), chunks, budget)
        if not w.decode and self.policy["prefill"] == "pull" and not blocked and self.held:
            while self.held and self.held[0].deadline <= t:  # their clients gave up
                self.held.popleft().outcome = "timed_out"
            while self.held and budget > 0 and len(w.running) < p.max_num_seqs:
                if not self.fits(w, self.held[0]):
                    break
                r = self.held.popleft()
                r.pw = w.index
                budget = self.admit(w, r, chunks, budget)
        if not w.running:
            w.asleep = True
            return
        if p.roofline is not None:  # as token_reference: KV read, tokens computed
            read = sum(r.kv for r in decoding) + sum(r.progress + c for r, c in chunks)
            duration = p.roofline.step_s(read, len(decoding) + sum(c for _, c in chunks))
        else:
            duration = (
                p.step_base_s + p.prefill_token_s * sum(c for _, c in chunks)
                + p.prefill_attn_s * sum(c * (r.progress + c) for r, c in chunks)
                + p.decode_seq_s * len(decoding) + p.kv_token_s * sum(r.kv for r in decoding)
            )
        w.chunks, w.decoding = chunks, decoding
        self.push(t + duration, _END, w)

    def fits(self, w: _Worker, head: _Req) -> bool:
        """Whether ``head`` fits ``w``'s free KV after its lookup, evicting unpinned
        cached blocks (of its own group only those beyond the ones it reuses) if that is
        enough."""
        hit = self.lookup(w, head, head.target)
        short = head.target - hit - (self.p.kv_cache_tokens - self.used(w))
        if short > 0:
            group, spare = self.group(w, head), hit // self.bt
            if self.evictable(w, group, spare) < short:
                return False
            self.evict(w, short, group, spare)
        return True

    def admit(self, w: _Worker, r: _Req, chunks: list[tuple[_Req, int]], budget: int) -> int:
        """``r`` starts running on ``w`` (its cached prefix read in place) with a chunk
        of the budget; returns the budget left."""
        hit = self.lookup(w, r, r.target)
        r.kv, r.progress = r.target - hit, hit
        w.kv_used += r.kv
        w.running.append(r)
        if r.group >= 0 and not (w.decode and r.remote):  # (counted with or without a cache)
            self.seen += r.prefix
            self.hit += hit
        c = min(r.kv, budget)
        chunks.append((r, c))
        return budget - c

    def end_step(self, w: _Worker, t: float) -> None:
        producing = list(w.decoding)
        for r, c in w.chunks:
            r.progress += c
            if r.progress == r.target:
                self.insert(w, r)
                if not w.decode:  # prefilled: hand it off, keeping its KV
                    r.prefill_token_s = t
                    w.running.remove(r)
                    w.held.append(r)
                    r.held_kv = r.kv
                    d = self.pick("decode", r)
                    r.dw = d.index
                    r.remote = True
                    d.incoming.append(r)
                    self.wake(d, t)
                else:
                    producing.append(r)
        for r in producing:
            r.generated += 1
            if r.first_token_s is None:
                r.first_token_s = t
            if r.generated == r.output:
                r.done_s, r.outcome = t, "ok" if t <= r.deadline else "timed_out"
                w.running.remove(r)
                w.kv_used -= r.kv
                r.kv = 0
                self.leaving(w, r)
        w.chunks, w.decoding = [], []
        self.push(t, _START, w)

    def transfer_end(self, move: tuple[_Worker, _Req], t: float) -> None:
        d, r = move
        if r not in d.moving:
            return  # its client gave up: the handoff is gone
        self.transfers += 1
        src = self.pool["prefill"][r.pw]  # type: ignore[index]
        src.held.remove(r)
        src.kv_used -= r.held_kv
        self.leaving(src, r)
        if src.waiting or self.policy["prefill"] == "pull":
            self.wake(src, t)
        d.moving.remove(r)
        d.landed.append(r)
        self.wake(d, t)


def _record(r: _Req) -> DisaggRecord:
    ttft = tpot = latency = None
    if r.first_token_s is not None:
        ttft = r.first_token_s - r.arrival_s
    if r.done_s is not None:
        latency = r.done_s - r.arrival_s
        if r.output > 1 and r.first_token_s is not None:
            tpot = (r.done_s - r.first_token_s) / (r.output - 1)
    return DisaggRecord(
        outcome=r.outcome or "in_system", prefill_worker=r.pw, decode_worker=r.dw,
        prefill_token_s=r.prefill_token_s, first_token_s=r.first_token_s, done_s=r.done_s,
        ttft_s=ttft, tpot_s=tpot, latency_s=latency,
    )


def simulate_disagg(
    requests: Sequence[TokenRequest],
    *,
    prefill_workers: int,
    decode_workers: int,
    params: WorkerParams,
    transfer_s_per_token: float,
    threshold_tokens: int = 0,
    policy: str | dict[str, str] = "round_robin",
    queue_limit: int | dict[str, int] = 0,
    duration_s: float,
    cache: bool = False,
    block_tokens: int = 16,
    decider: str = "prompt",
    max_prefill_queue: int = 0,
    timeout_s: float | None = None,
    weights: dict[str, float] | None = None,
) -> DisaggResult:
    """Run the model until ``duration_s`` (see the module docstring). ``policy`` and
    ``queue_limit`` are both pools', or ``{"prefill": ..., "decode": ...}``."""
    policies = policy if isinstance(policy, dict) else {"prefill": policy, "decode": policy}
    limits = queue_limit if isinstance(queue_limit, dict) else {"prefill": queue_limit, "decode": queue_limit}
    for pool in ("prefill", "decode"):
        if policies[pool] not in POLICIES or (pool == "decode" and policies[pool] == "pull"):
            raise ValueError(f"policy {policies[pool]!r} cannot route the {pool} pool")
    if decider not in DECIDERS:
        raise ValueError(f"decider {decider!r} is not one of {', '.join(DECIDERS)}")
    if decider == "uncached" and policies["prefill"] == "pull":
        raise ValueError('decider "uncached" looks at the pick of a pushing prefill pool')
    if prefill_workers < 1 or decode_workers < 1:
        raise ValueError("each pool needs a worker")
    for i, r in enumerate(requests):
        if i and r.arrival_s < requests[i - 1].arrival_s:
            raise ValueError(f"request {i}: requests must be sorted by arrival_s")
    sim = _Sim(requests, prefill_workers, decode_workers, params, policies, threshold_tokens,
               transfer_s_per_token, duration_s, limits, cache=cache, block_tokens=block_tokens,
               decider=decider, max_prefill_queue=max_prefill_queue, timeout_s=timeout_s,
               weights=weights)
    sim.run()
    return DisaggResult(
        records=tuple(_record(r) for r in sim.reqs),
        preemptions=sim.preemptions,
        transfers=sim.transfers,
        seen=sim.seen,
        hit=sim.hit,
        skipped=sim.skipped,
        sheds=sim.sheds,
    )
