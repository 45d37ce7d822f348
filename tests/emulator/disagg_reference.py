"""An independent, step-by-step model of disaggregated prefill and decode, built on the
request and worker figures of ``token_reference`` (``TokenRequest``, ``WorkerParams``).

Like ``token_reference`` it favours being obviously right over being fast: every
worker is advanced one scheduler step at a time, with plain lists, and it imports
nothing from ``emulator``. Steps last as ``token_reference`` says, under the linear or
the roofline step model. Client timeouts and faults are left out (the engine's tests
check those on their own).

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
transfer), else into one FIFO held queue in front of the pool.

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
   while budget, ``max_num_seqs`` and free KV (for the head's prompt) allow.

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
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import count

from token_reference import TokenRequest, WorkerParams

POLICIES = ("round_robin", "least_loaded", "pull")
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
        self.pw: int | None = None
        self.dw: int | None = None
        self.prefill_token_s: float | None = None
        self.first_token_s: float | None = None
        self.done_s: float | None = None
        self.outcome: str | None = None


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

    def load(self) -> int:
        return (
            len(self.waiting) + len(self.running) + len(self.held) + len(self.incoming)
            + len(self.moving) + len(self.landed)
        )


class _Sim:
    def __init__(
        self, requests: Sequence[TokenRequest], prefill: int, decode: int, p: WorkerParams,
        policy: dict[str, str], threshold: int, s_per_token: float, duration_s: float,
        limit: dict[str, int],
    ) -> None:
        self.p = p
        self.policy = policy
        self.limit = limit
        self.held: deque[_Req] = deque()  # under pull: in front of the prefill pool
        self.sheds = 0
        self.threshold = threshold
        self.s_per_token = s_per_token
        self.duration_s = duration_s
        self.reqs = [_Req(i, r) for i, r in enumerate(requests) if r.arrival_s <= duration_s]
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
                r.outcome = "in_system"

    def wake(self, w: _Worker, t: float) -> None:
        if w.asleep:
            w.asleep = False
            self.push(t, _START, w)

    def pick(self, pool: str) -> _Worker:
        workers = self.pool[pool]
        if self.policy[pool] == "round_robin":
            w = workers[self.rr[pool]]
            self.rr[pool] = (self.rr[pool] + 1) % len(workers)
            return w
        return min(workers, key=lambda w: (w.load(), w.index))

    def arrive(self, r: _Req, t: float) -> None:
        if r.prompt + r.output > self.p.kv_cache_tokens:
            r.outcome = "shed"
            return
        pool = "decode" if r.prompt <= self.threshold else "prefill"
        limit = self.limit[pool]
        if self.policy[pool] == "pull":
            idle = [w for w in self.pool[pool] if w.asleep and not w.waiting and not w.held]
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
        w = self.pick(pool)
        if pool == "decode":
            r.dw = w.index
        else:
            r.pw = w.index
        w.waiting.append(r)
        self.wake(w, t)

    def start_step(self, w: _Worker, t: float) -> None:
        p = self.p
        for r in w.landed:  # a: they join with one prompt position to run
            r.target, r.progress, r.kv = r.prompt, r.prompt - 1, r.prompt
            w.running.append(r)
        w.landed = []
        # b: preemption, the decoders' tokens, the budget, chunks in progress.
        decoding = [r for r in w.running if r.progress == r.target]
        while p.kv_cache_tokens - w.kv_used < len(decoding):
            r = w.running.pop()
            w.kv_used -= r.kv
            r.kv, r.target, r.progress = 0, r.prompt + r.generated, 0
            w.waiting.appendleft(r)
            self.preemptions += 1
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
        while (
            w.incoming and p.kv_cache_tokens - w.kv_used >= w.incoming[0].prompt
            and len(w.running) + len(w.moving) < p.max_num_seqs
        ):
            r = w.incoming.popleft()
            w.kv_used += r.prompt
            w.moving.append(r)
            start = max(t, w.link_free)
            w.link_free = start + r.prompt * self.s_per_token
            self.push(w.link_free, _END, (w, r))
        # d: admission, then (pull) from the held queue.
        while (
            w.waiting and budget > 0 and len(w.running) < p.max_num_seqs
            and p.kv_cache_tokens - w.kv_used >= w.waiting[0].target
        ):
            r = w.waiting.popleft()
            r.kv = r.target
            w.kv_used += r.kv
            w.running.append(r)
            c = min(r.target, budget)
            chunks.append((r, c))
            budget -= c
        if not w.decode and self.policy["prefill"] == "pull" and not w.waiting:
            while (
                self.held and budget > 0 and len(w.running) < p.max_num_seqs
                and p.kv_cache_tokens - w.kv_used >= self.held[0].target
            ):
                r = self.held.popleft()
                r.pw = w.index
                r.kv = r.target
                w.kv_used += r.kv
                w.running.append(r)
                c = min(r.target, budget)
                chunks.append((r, c))
                budget -= c
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

    def end_step(self, w: _Worker, t: float) -> None:
        producing = list(w.decoding)
        for r, c in w.chunks:
            r.progress += c
            if r.progress == r.target:
                if not w.decode:  # prefilled: hand it off, keeping its KV
                    r.prefill_token_s = t
                    w.running.remove(r)
                    w.held.append(r)
                    d = self.pick("decode")
                    r.dw = d.index
                    d.incoming.append(r)
                    self.wake(d, t)
                else:
                    producing.append(r)
        for r in producing:
            r.generated += 1
            if r.first_token_s is None:
                r.first_token_s = t
            if r.generated == r.output:
                r.done_s, r.outcome = t, "ok"
                w.running.remove(r)
                w.kv_used -= r.kv
                r.kv = 0
        w.chunks, w.decoding = [], []
        self.push(t, _START, w)

    def transfer_end(self, move: tuple[_Worker, _Req], t: float) -> None:
        d, r = move
        self.transfers += 1
        src = self.pool["prefill"][r.pw]  # type: ignore[index]
        src.held.remove(r)
        src.kv_used -= r.prompt
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
) -> DisaggResult:
    """Run the model until ``duration_s`` (see the module docstring). ``policy`` and
    ``queue_limit`` are both pools', or ``{"prefill": ..., "decode": ...}``."""
    policies = policy if isinstance(policy, dict) else {"prefill": policy, "decode": policy}
    limits = queue_limit if isinstance(queue_limit, dict) else {"prefill": queue_limit, "decode": queue_limit}
    for pool in ("prefill", "decode"):
        if policies[pool] not in POLICIES or (pool == "decode" and policies[pool] == "pull"):
            raise ValueError(f"policy {policies[pool]!r} cannot route the {pool} pool")
    if prefill_workers < 1 or decode_workers < 1:
        raise ValueError("each pool needs a worker")
    for i, r in enumerate(requests):
        if i and r.arrival_s < requests[i - 1].arrival_s:
            raise ValueError(f"request {i}: requests must be sorted by arrival_s")
    sim = _Sim(requests, prefill_workers, decode_workers, params, policies, threshold_tokens,
               transfer_s_per_token, duration_s, limits)
    sim.run()
    return DisaggResult(
        records=tuple(_record(r) for r in sim.reqs),
        preemptions=sim.preemptions,
        transfers=sim.transfers,
        sheds=sim.sheds,
    )
