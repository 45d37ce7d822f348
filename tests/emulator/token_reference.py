"""An independent, deliberately straightforward step-by-step model of continuous batching.

It is the yardstick the fast engine is held against, so it favours being obviously
right over being fast: every worker is advanced one scheduler step at a time, and it
imports nothing from ``emulator``. Used by ``test_token_reference.py`` and, on
integration, by the engine's agreement tests and benchmarks.

The model
=========

Each worker holds a waiting queue (FIFO) and a running list (in admission order).
Per request: ``target`` (prefill target, initially ``prompt_tokens``), ``progress``
(prefill tokens done toward it), ``generated`` (output tokens so far) and ``kv`` (KV
tokens held; 0 unless running). A worker with nothing to do sleeps; otherwise steps
run back to back. At the start of a step at time ``t``:

0. Timeouts (only with ``timeout_s``): every request of the worker, waiting or
   running, with ``arrival_s + timeout_s <= t`` is removed as ``timed_out`` and its KV
   freed. Under ``pull`` the same is done to the dispatcher queue.
KV is counted in blocks of ``kv_block_tokens`` (``kv_cache_tokens //
kv_block_tokens`` of them): a request holding ``kv`` tokens holds ``ceil(kv /
kv_block_tokens)`` blocks, and ``watermark = int(kv_watermark x blocks)``. With the
defaults (1 and 0) that is KV counted token by token.

1. ``D`` = running requests whose prefill is complete; each needs one more KV token.
   While the running requests' blocks, with that token added to each member of ``D``,
   exceed the blocks: preempt the most recently admitted running request (in
   ``D`` or not): free its KV, set ``target = prompt_tokens + generated`` and
   ``progress = 0``, and put it at the FRONT of the waiting queue (recompute); count
   one preemption; recount ``D``. Then each member of ``D`` takes its KV token.
2. ``budget = max_batched_tokens - |D|``.
3. Running requests with prefill left, in admission order, each take a chunk
   ``min(target - progress, budget)``; the budget shrinks by each chunk.
4. Admission, from the worker's waiting queue and then (``pull`` only) from the
   dispatcher queue, in FIFO order while ``budget > 0``, ``len(running) <
   max_num_seqs`` and free blocks - the head's ``ceil(target / kv_block_tokens)`` >=
   ``watermark``: reserve ``kv = target``,
   append to running, take a chunk ``min(target, budget)``. A head that does not fit
   blocks everything behind it; when the worker's own head blocks, the dispatcher
   queue is not looked at either.
5. ``duration = step_base_s + prefill_token_s * sum(chunks)
   + prefill_attn_s * sum(chunk * (progress_before + chunk))
   + decode_seq_s * |D| + kv_token_s * sum(kv of D after step 1)``; or, with
   ``roofline``, the longer of memory time (weights + KV bytes of the sum of kv of D
   after step 1 and of every chunk's progress_before + chunk, over units x bandwidth x
   mbu) and compute time (2 x active parameters x (|D| + sum(chunks)) over units x
   FLOPs x mfu).
6. At ``t + duration``: chunks are applied; every member of ``D`` generates a token,
   and so does every request whose prefill completed in this step. The first token
   ever sets ``first_token_s`` (a recomputed request keeps its original one). A
   request with ``generated == output_tokens`` completes: ``ok`` if ``done_s <=
   arrival_s + timeout_s`` (or no timeout), else ``timed_out``; its KV is freed.

With ``scheduler = "prefill_first"`` and ``D`` not empty, steps 3-4 come first with
``budget = max_batched_tokens``; if they give any chunk, the step has no decoders (no
member of ``D`` takes a KV token or generates, nothing is preempted); if not, step 1
runs and the step is decode only.

Every output token after a request's first records a gap: its time minus the time of
the request's previous token (``ReferenceResult.gaps``, and each request's longest in
``longest_gap_s``).

If a step start finds running empty and nothing admissible, the worker sleeps.

Dispatching: a request with ``prompt_tokens + output_tokens > (blocks - watermark) x
kv_block_tokens`` is ``shed`` on arrival. ``round_robin`` sends arrivals to workers 0, 1, ..., N-1, 0, ...;
``least_loaded`` to the worker with the fewest waiting + running (lowest index on
ties); ``pull`` gives the request to the lowest-index sleeping worker, or else appends
it to one dispatcher FIFO queue that workers admit from at step starts. A sleeping
worker that receives a request starts a step at the arrival time.

Admission control (``queue_limit`` > 0): an arrival is ``shed`` when the waiting
requests it would join are at the bound: under ``pull`` the dispatcher queue, when no
worker is asleep to take it; under the other policies the requests waiting at all
the workers (preempted ones included), counted before the pick.

SLO-aware admission (``admission_s`` set): after the size check, an arrival whose
predicted TTFT exceeds ``admission_s`` is ``shed`` (its prediction kept in
``ReferenceResult.refused``). The prediction at a worker: the rest of the step in
flight (0 if none), then steps of ``budget = max_batched_tokens - d`` tokens (``d``
the running requests whose prefill is complete; 0 under ``prefill_first``) through,
in order, the prefill left of the running requests (less any chunk in flight), the
waiting requests' targets and the arrival's prompt; each step costs ``step_base_s +
prefill_token_s * tokens + prefill_attn_s * sum(chunk * (start + chunk)) +
decode_seq_s * d``, and the step that completes the prompt is costed full (the rest of
its budget a chunk starting at 0). ``round_robin`` and ``least_loaded`` predict at the
worker they would pick (without picking it); ``pull`` takes the least over the
workers, each with the dispatcher queue's tokens shared out evenly (rounded up) ahead
of the arrival. Only the linear step model without ``kv_token_s``.

Order of things at the same instant ``T``: step ends at ``T``, then arrivals at ``T``
(in input order), then step starts at ``T``. Choices the specification leaves open:

* Step starts at the same instant run in worker index order (this matters only under
  ``pull``, where they admit from the shared queue).
* Under ``pull`` a worker that has been handed a request and will start a step at
  ``T`` is no longer asleep: a second arrival at ``T`` goes to the next sleeping
  worker, or to the dispatcher queue.
* Decodes are never limited by the token budget; if ``|D| > max_batched_tokens``
  (only possible when ``max_num_seqs > max_batched_tokens``) the budget is 0.
* ``least_loaded`` counts requests whose deadline has passed but which the worker has
  not yet removed (that happens at its next step start).
* A timed-out request keeps ``first_token_s`` (and so ``ttft_s``) if it had produced a
  token; ``done_s`` / ``latency_s`` are set only if it completed (late).

The run ends at ``duration_s``: requests arriving after it are not offered at all,
so ``records`` covers the offered requests only, which (inputs being sorted by
arrival) are exactly ``requests[:len(records)]``. No step starts at or after
``duration_s``; a step ending exactly at ``duration_s`` is applied, one ending after
it is not. Unfinished requests are ``timed_out`` if their deadline is ``<=
duration_s``, else ``in_system``. ``steps`` counts applied steps; ``preemptions``
counts every preemption made at a step start before ``duration_s``; ``busy_s`` is
each worker's time in steps within ``[0, duration_s]`` (a cut step counts up to
``duration_s``).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

POLICIES = ("round_robin", "least_loaded", "pull")

# Same-instant ordering: step ends, then arrivals, then step starts.
_STEP_END, _ARRIVAL, _STEP_START = 0, 1, 2


@dataclass(frozen=True)
class TokenRequest:
    """One request: when it arrives and how many tokens go in and come out."""

    arrival_s: float
    prompt_tokens: int
    output_tokens: int  # >= 1


@dataclass(frozen=True)
class RooflineParams:
    """The roofline step model from physical figures: a step lasts the longer of
    reading the weights and the KV it attends over from memory, and computing
    2 FLOPs per active parameter for every token in it; plus a launch overhead, and on
    more than one GPU two all-reduces a layer (each a latency, and a ring moving
    2 (units - 1) / units of the step's activations over each GPU's link)."""

    weight_bytes: float
    kv_bytes_per_token: float
    active_params: float
    units: int
    bytes_per_s: float  # per GPU
    flops: float  # per GPU
    mbu: float = 1.0
    mfu: float = 1.0
    step_overhead_s: float = 0.0
    layers: int = 0  # with hidden and link_bytes_per_s: tensor-parallel communication
    hidden: int = 0
    dtype_bytes: float = 2.0
    link_bytes_per_s: float = 0.0  # per GPU, each way
    collective_s: float = 0.0
    # A mixture of experts: routed experts a MoE layer, picked a token, MoE layers, one
    # expert's bytes; and expert parallelism over this many GPUs (1: none).
    experts: int = 0
    experts_per_token: int = 0
    moe_layers: int = 0
    expert_bytes: float = 0.0
    expert_parallel: int = 1

    def weights_read(self, tokens: int) -> float:
        """Bytes of weights a step of ``tokens`` tokens reads: a mixture reads, in each
        MoE layer, each routed expert at least one of its tokens picked; with uniform
        routing, expert i is missed by all of them with probability (1 - k/E)^tokens."""
        if not self.experts:
            return self.weight_bytes
        routed = self.moe_layers * self.experts * self.expert_bytes
        p_hit = 1.0 - (1.0 - self.experts_per_token / self.experts) ** tokens
        return self.weight_bytes - routed + self.moe_layers * self.expert_bytes * sum(
            p_hit for _ in range(self.experts))

    def step_s(self, kv_tokens_read: int, tokens: int) -> float:
        memory = (self.weights_read(tokens) + self.kv_bytes_per_token * kv_tokens_read) / (
            self.units * self.bytes_per_s * self.mbu
        )
        compute = 2.0 * self.active_params * tokens / (self.units * self.flops * self.mfu)
        return max(memory, compute) + self.step_overhead_s + self.communication_s(tokens)

    def communication_s(self, tokens: int) -> float:
        if self.units == 1 or not (self.layers and self.hidden and self.link_bytes_per_s):
            return 0.0
        activations = tokens * self.hidden * self.dtype_bytes
        ring = 2 * (self.units - 1) / self.units * activations
        if self.expert_parallel == 1:
            return 2 * self.layers * (self.collective_s + ring / self.link_bytes_per_s)
        # Each MoE layer dispatches every token's k copies to the GPUs holding their
        # experts and combines them back: (EP - 1) / EP of them cross the link each way.
        ep = self.expert_parallel
        copies = activations * self.experts_per_token * (ep - 1) / ep
        all_reduces = 2 * self.layers - self.moe_layers
        return (all_reduces * (self.collective_s + ring / self.link_bytes_per_s)
                + 2 * self.moe_layers * (self.collective_s + copies / self.link_bytes_per_s))

    def bound(self, kv_tokens_read: int, tokens: int) -> str:
        memory = (self.weights_read(tokens) + self.kv_bytes_per_token * kv_tokens_read) / (
            self.units * self.bytes_per_s * self.mbu
        )
        compute = 2.0 * self.active_params * tokens / (self.units * self.flops * self.mfu)
        return "memory" if memory >= compute else "compute"


@dataclass(frozen=True)
class TableParams:
    """A step-time table's fitted pieces: a step lasts a(n) + b(n) x the decoders'
    contexts + P(prefill tokens) + e x the chunks' attention term, with a and b linear
    between their knots over decoders and P between its knots over prefill tokens
    (P(0) = 0), each going on along its end segment."""

    n_knots: tuple[float, ...]
    a: tuple[float, ...]
    b: tuple[float, ...]
    p_knots: tuple[float, ...]
    p: tuple[float, ...]
    e: float

    def step_s(self, n: int, context: int, prefill: int, attention: int) -> float:
        duration = _line(self.n_knots, self.a, n) + _line(self.n_knots, self.b, n) * context
        if prefill:
            duration += _line(self.p_knots, self.p, prefill)
        return duration + self.e * attention


def _line(knots: tuple[float, ...], values: tuple[float, ...], x: float) -> float:
    """Piecewise linear through the points, on along the first or last segment outside."""
    i = 0
    while i < len(knots) - 2 and x >= knots[i + 1]:
        i += 1
    x0, x1, y0, y1 = knots[i], knots[i + 1], values[i], values[i + 1]
    return y0 + (x - x0) / (x1 - x0) * (y1 - y0)


@dataclass(frozen=True)
class SpeculativeParams:
    """Speculative decoding, as the spreading model has it: a step with decoders and
    no prefill chunk drafts k tokens per decoder (k passes of ``draft_step_s`` +
    ``draft_seq_s`` x decoders), verifies k + 1 per decoder, and emits
    tau = 1 + alpha + ... + alpha^k tokens per decoder on average, which the model
    gives out one at a time: such a step gives each decoder one token and lasts the
    verification plus the draft over tau."""

    draft_tokens: int
    acceptance_rate: float
    draft_step_s: float = 0.0
    draft_seq_s: float = 0.0
    method: str = "draft"

    @property
    def tau(self) -> float:
        return sum(self.acceptance_rate ** i for i in range(self.draft_tokens + 1))


@dataclass(frozen=True)
class WorkerParams:
    """Scheduler limits and the step-time model of one worker."""

    max_num_seqs: int = 256  # running sequences per worker
    max_batched_tokens: int = 8192  # tokens per step: one per decoding sequence + prefill chunks
    kv_cache_tokens: int = 200000  # KV capacity per worker, in tokens
    step_base_s: float = 0.005
    prefill_token_s: float = 2e-5
    prefill_attn_s: float = 0.0
    decode_seq_s: float = 1e-4
    kv_token_s: float = 0.0
    #: When set, steps follow the roofline and the linear terms above are not used.
    roofline: RooflineParams | None = None
    #: When set, steps follow the table (and the linear terms are not used).
    table: TableParams | None = None
    #: KV in blocks of this many tokens, and the share of the blocks an admission
    #: must leave free (1 and 0: KV counted token by token, no watermark).
    kv_block_tokens: int = 1
    kv_watermark: float = 0.0
    #: "mixed" or "prefill_first" (see the module docstring).
    scheduler: str = "mixed"
    #: Speculative decoding: a step with decoders and no prefill chunk is a
    #: verification step, see ``SpeculativeParams``.
    speculative: SpeculativeParams | None = None

    @property
    def kv_blocks(self) -> int:
        return self.kv_cache_tokens // self.kv_block_tokens

    @property
    def watermark_blocks(self) -> int:
        return int(self.kv_watermark * self.kv_blocks)


@dataclass(frozen=True)
class RequestRecord:
    """What happened to one offered request."""

    outcome: str  # "ok" | "timed_out" | "shed" | "in_system"
    worker: int | None
    admitted_s: float | None  # first admission into a running batch
    first_token_s: float | None
    done_s: float | None
    ttft_s: float | None
    tpot_s: float | None
    latency_s: float | None
    preemptions: int
    longest_gap_s: float  # its longest time between two consecutive output tokens (0: none)


@dataclass(frozen=True)
class StepRecord:
    """One applied step (kept only with ``record_steps=True``)."""

    worker: int
    start_s: float
    end_s: float
    running: int  # sequences in the batch, decoding or prefilling
    decoding: int
    prefill_tokens: int
    bound: str  # "linear", or under the roofline "memory" or "compute"


@dataclass(frozen=True)
class ReferenceResult:
    """Per-request records (offered requests, input order) and run totals."""

    records: tuple[RequestRecord, ...]
    preemptions: int
    steps: int
    busy_s: tuple[float, ...]
    step_log: tuple[StepRecord, ...]
    #: Every time between two consecutive output tokens of any request (TBT), in the
    #: order the second tokens came.
    gaps: tuple[float, ...] = ()
    #: With ``admission_s``: (request index, predicted TTFT) of each arrival refused.
    refused: tuple[tuple[int, float], ...] = ()

    def count(self, outcome: str) -> int:
        """How many offered requests ended with ``outcome``."""
        return sum(1 for r in self.records if r.outcome == outcome)


class _Req:
    __slots__ = (
        "index", "arrival_s", "prompt", "output", "deadline_s", "target", "progress",
        "generated", "kv", "worker", "admitted_s", "first_token_s", "done_s", "outcome",
        "preemptions", "last_token_s", "longest_gap_s",
    )

    def __init__(self, index: int, req: TokenRequest, timeout_s: float | None) -> None:
        self.index = index
        self.arrival_s = req.arrival_s
        self.prompt = req.prompt_tokens
        self.output = req.output_tokens
        self.deadline_s = None if timeout_s is None else req.arrival_s + timeout_s
        self.target = req.prompt_tokens
        self.progress = 0
        self.generated = 0
        self.kv = 0
        self.worker: int | None = None
        self.admitted_s: float | None = None
        self.first_token_s: float | None = None
        self.done_s: float | None = None
        self.outcome: str | None = None
        self.preemptions = 0
        self.last_token_s = 0.0
        self.longest_gap_s = 0.0

    def expired(self, t: float) -> bool:
        return self.deadline_s is not None and self.deadline_s <= t


class _Worker:
    __slots__ = (
        "index", "waiting", "running", "asleep", "busy_s", "step_start_s",
        "step_end_s", "chunks", "decoding", "bound",
    )

    def __init__(self, index: int) -> None:
        self.index = index
        self.waiting: deque[_Req] = deque()
        self.running: list[_Req] = []
        self.asleep = True
        self.busy_s = 0.0
        self.step_start_s = 0.0
        self.step_end_s: float | None = None  # set while a step is in flight
        self.chunks: list[tuple[_Req, int]] = []
        self.decoding: list[_Req] = []
        self.bound = "linear"


class _Sim:
    def __init__(
        self, requests: Sequence[TokenRequest], workers: int, params: WorkerParams,
        policy: str, timeout_s: float | None, duration_s: float, record_steps: bool,
        queue_limit: int = 0, admission_s: float | None = None,
    ) -> None:
        self.p = params
        self.queue_limit = queue_limit
        self.admission_s = admission_s
        self.refused: list[tuple[int, float]] = []
        self.policy = policy
        self.timeout_s = timeout_s
        self.duration_s = duration_s
        self.record_steps = record_steps
        self.reqs = [
            _Req(i, r, timeout_s) for i, r in enumerate(requests) if r.arrival_s <= duration_s
        ]
        self.workers = [_Worker(w) for w in range(workers)]
        self.dispatch_queue: deque[_Req] = deque()  # pull only
        self.next_rr = 0
        self.heap: list[tuple[float, int, int]] = []
        self.preemptions = 0
        self.steps = 0
        self.step_log: list[StepRecord] = []
        self.gaps: list[float] = []
        self.block = params.kv_block_tokens
        self.total_blocks = params.kv_blocks
        self.wm = params.watermark_blocks

    def blocks(self, tokens: int) -> int:
        return -(-tokens // self.block)

    def used(self, w: _Worker, growing: Sequence[_Req] = ()) -> int:
        """KV blocks the worker's running requests hold (with one more token for each
        of ``growing``)."""
        grow = {id(r) for r in growing}
        return sum(self.blocks(r.kv + (id(r) in grow)) for r in w.running)

    # -- the event loop ------------------------------------------------------------

    def run(self) -> None:
        for r in self.reqs:
            heapq.heappush(self.heap, (r.arrival_s, _ARRIVAL, r.index))
        while self.heap:
            t, kind, ident = heapq.heappop(self.heap)
            if t > self.duration_s or (kind == _STEP_START and t >= self.duration_s):
                break
            if kind == _STEP_END:
                self.end_step(self.workers[ident], t)
            elif kind == _ARRIVAL:
                self.arrive(self.reqs[ident], t)
            else:
                self.start_step(self.workers[ident], t)
        for w in self.workers:
            if w.step_end_s is not None:  # cut by the end of the run
                w.busy_s += self.duration_s - w.step_start_s
        for r in self.reqs:
            if r.outcome is None:
                r.outcome = "timed_out" if r.expired(self.duration_s) else "in_system"

    def wake(self, w: _Worker, t: float) -> None:
        w.asleep = False
        heapq.heappush(self.heap, (t, _STEP_START, w.index))

    # -- dispatching ---------------------------------------------------------------

    def arrive(self, r: _Req, t: float) -> None:
        if r.prompt + r.output > (self.total_blocks - self.wm) * self.block:
            r.outcome = "shed"
            return
        if self.admission_s is not None:
            predicted = self.predicted_ttft(r, t)
            if predicted > self.admission_s:
                r.outcome = "shed"
                self.refused.append((r.index, predicted))
                return
        if self.policy == "pull":
            idle = [w for w in self.workers if w.asleep]
            if not idle:
                if self.queue_limit and len(self.dispatch_queue) >= self.queue_limit:
                    r.outcome = "shed"
                    return
                self.dispatch_queue.append(r)
                return
            target = idle[0]
        elif self.waiting_full():
            r.outcome = "shed"
            return
        elif self.policy == "round_robin":
            target = self.workers[self.next_rr]
            self.next_rr = (self.next_rr + 1) % len(self.workers)
        else:
            target = min(self.workers, key=lambda w: (len(w.waiting) + len(w.running), w.index))
        r.worker = target.index
        target.waiting.append(r)
        if target.asleep:
            self.wake(target, t)

    # -- SLO-aware admission ---------------------------------------------------------

    def predicted_ttft(self, r: _Req, t: float) -> float:
        """The arrival's predicted TTFT (see the module docstring)."""
        if self.policy == "round_robin":
            return self.predicted_at(self.workers[self.next_rr], r, t, 0)
        if self.policy == "least_loaded":
            target = min(self.workers, key=lambda w: (len(w.waiting) + len(w.running), w.index))
            return self.predicted_at(target, r, t, 0)
        held = sum(q.target for q in self.dispatch_queue)
        share = -(-held // len(self.workers))
        return min(self.predicted_at(w, r, t, share) for w in self.workers)

    def predicted_at(self, w: _Worker, r: _Req, t: float, shared: int) -> float:
        p = self.p
        in_flight = {id(q): c for q, c in w.chunks} if w.step_end_s is not None else {}
        ahead = []  # (tokens left, tokens done) in the order they would be prefilled
        for q in w.running:
            done = q.progress + in_flight.get(id(q), 0)
            if q.progress < q.target and done < q.target:
                ahead.append((q.target - done, done))
        ahead += [(q.target - q.progress, q.progress) for q in w.waiting]
        if shared:
            ahead.append((shared, 0))
        ahead.append((r.prompt, 0))
        decoders = 0 if p.scheduler == "prefill_first" else sum(
            1 for q in w.running if q.progress == q.target)
        budget = p.max_batched_tokens - decoders
        clock = w.step_end_s - t if w.step_end_s is not None else 0.0
        while ahead:
            room, chunks = budget, []
            while ahead and room > 0:
                left, done = ahead[0]
                c = min(left, room)
                chunks.append((c, done))
                room -= c
                if c == left:
                    ahead.pop(0)
                else:
                    ahead[0] = (left - c, done + c)
            if not ahead and room > 0:
                chunks.append((room, 0))  # the completing step, costed full
            clock += (p.step_base_s + p.decode_seq_s * decoders
                      + sum(p.prefill_token_s * c + p.prefill_attn_s * c * (done + c) for c, done in chunks))
        return clock

    def waiting_full(self) -> bool:
        """A pushing policy's admission bound: the workers' waiting requests at it."""
        return bool(self.queue_limit) and (
            sum(len(w.waiting) for w in self.workers) >= self.queue_limit
        )

    # -- one step ------------------------------------------------------------------

    def start_step(self, w: _Worker, t: float) -> None:
        p = self.p
        if self.timeout_s is not None:
            self.drop_expired(w, t)

        decoding = [r for r in w.running if r.progress == r.target]
        if p.scheduler == "prefill_first" and decoding:
            # Prefill work first, with the whole budget; the decoders wait if any.
            chunks = self.prefill_chunks(w, t, p.max_batched_tokens)
            decoding = [] if chunks else self.grow(w)
        else:
            decoding = self.grow(w)
            chunks = self.prefill_chunks(w, t, max(0, p.max_batched_tokens - len(decoding)))

        if not w.running:
            # With nothing running the whole cache and budget are free, and no unshed
            # request needs more, so the queues must be empty here.
            assert not w.waiting, "an idle worker left a request waiting"
            w.asleep = True
            return
        prefill = sum(c for _, c in chunks)
        attention = sum(c * (r.progress + c) for r, c in chunks)
        context = sum(r.kv for r in decoding)
        sp = p.speculative if decoding and not chunks else None
        # Under speculation a decode step verifies k drafted tokens per decoder too.
        verified = len(decoding) * (sp.draft_tokens if sp is not None else 0)
        if p.roofline is not None:
            # KV read: each decoder's context, and each chunk's prompt up to its end.
            read = context + sum(r.progress + c for r, c in chunks)
            computed = len(decoding) + prefill + verified
            duration = p.roofline.step_s(read, computed)
            w.bound = p.roofline.bound(read, computed)
        elif p.table is not None:
            duration = p.table.step_s(len(decoding), context, prefill, attention)
        else:
            duration = (
                p.step_base_s + p.prefill_token_s * (prefill + verified) + p.prefill_attn_s * attention
                + p.decode_seq_s * len(decoding) + p.kv_token_s * context
            )
        if sp is not None:
            draft = sp.draft_tokens * (sp.draft_step_s + sp.draft_seq_s * len(decoding))
            duration = (duration + draft) / sp.tau
        w.step_start_s = t
        w.step_end_s = t + duration
        w.chunks = chunks
        w.decoding = decoding
        heapq.heappush(self.heap, (w.step_end_s, _STEP_END, w.index))

    def grow(self, w: _Worker) -> list[_Req]:
        """Step 1: preempt while the decoders' next tokens do not fit in the blocks,
        then give each its token; returns the decoders."""
        decoding = [r for r in w.running if r.progress == r.target]
        while self.used(w, decoding) > self.total_blocks:
            self.preempt(w)
            decoding = [r for r in w.running if r.progress == r.target]
        for r in decoding:
            r.kv += 1
        return decoding

    def prefill_chunks(self, w: _Worker, t: float, budget: int) -> list[tuple[_Req, int]]:
        """Steps 3-4: chunks for prefills in progress, then admissions (which leave the
        watermark's blocks free)."""
        p = self.p
        chunks: list[tuple[_Req, int]] = []
        for r in w.running:
            if r.progress < r.target and budget > 0:
                chunk = min(r.target - r.progress, budget)
                chunks.append((r, chunk))
                budget -= chunk
        queues = [w.waiting]
        if self.policy == "pull":
            queues.append(self.dispatch_queue)
        for queue in queues:
            while (
                queue and budget > 0 and len(w.running) < p.max_num_seqs
                and self.total_blocks - self.used(w) - self.blocks(queue[0].target) >= self.wm
            ):
                r = queue.popleft()
                r.worker = w.index
                r.kv = r.target
                if r.admitted_s is None:
                    r.admitted_s = t
                w.running.append(r)
                chunk = min(r.target, budget)
                chunks.append((r, chunk))
                budget -= chunk
            if queue:  # its head blocks; nothing behind it, nor in the next queue, may pass
                break
        return chunks

    def drop_expired(self, w: _Worker, t: float) -> None:
        for r in [r for r in w.waiting if r.expired(t)]:
            w.waiting.remove(r)
            r.outcome = "timed_out"
        for r in [r for r in w.running if r.expired(t)]:
            w.running.remove(r)
            r.kv = 0
            r.outcome = "timed_out"
        # One timeout for all and FIFO order: the expired ones are at the front.
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

    def end_step(self, w: _Worker, t: float) -> None:
        w.busy_s += t - w.step_start_s
        w.step_end_s = None
        self.steps += 1
        if self.record_steps:
            self.step_log.append(StepRecord(
                w.index, w.step_start_s, t, len(w.running), len(w.decoding),
                sum(c for _, c in w.chunks), w.bound,
            ))
        producing = list(w.decoding)
        for r, chunk in w.chunks:
            r.progress += chunk
            if r.progress == r.target:
                producing.append(r)
        for r in producing:
            if r.generated:
                gap = t - r.last_token_s
                self.gaps.append(gap)
                r.longest_gap_s = max(r.longest_gap_s, gap)
            r.last_token_s = t
            r.generated += 1
            if r.first_token_s is None:
                r.first_token_s = t
            if r.generated == r.output:
                r.done_s = t
                late = r.deadline_s is not None and t > r.deadline_s
                r.outcome = "timed_out" if late else "ok"
                w.running.remove(r)
                r.kv = 0
        w.chunks = []
        w.decoding = []
        heapq.heappush(self.heap, (t, _STEP_START, w.index))


def _record(r: _Req) -> RequestRecord:
    ttft = None if r.first_token_s is None else r.first_token_s - r.arrival_s
    tpot = None
    latency = None
    if r.done_s is not None:
        latency = r.done_s - r.arrival_s
        if r.output > 1 and r.first_token_s is not None:
            tpot = (r.done_s - r.first_token_s) / (r.output - 1)
    return RequestRecord(
        outcome=r.outcome or "in_system", worker=r.worker, admitted_s=r.admitted_s,
        first_token_s=r.first_token_s, done_s=r.done_s, ttft_s=ttft, tpot_s=tpot,
        latency_s=latency, preemptions=r.preemptions, longest_gap_s=r.longest_gap_s,
    )


def simulate(
    requests: Sequence[TokenRequest],
    *,
    workers: int,
    params: WorkerParams,
    policy: str = "round_robin",
    timeout_s: float | None = None,
    duration_s: float,
    record_steps: bool = False,
    queue_limit: int = 0,
    admission_s: float | None = None,
) -> ReferenceResult:
    """Run the step-by-step model until ``duration_s`` (see the module docstring)."""
    if policy not in POLICIES:
        raise ValueError(f"policy {policy!r} is not one of {', '.join(POLICIES)}")
    if workers < 1:
        raise ValueError("workers must be 1 or more")
    if min(params.max_num_seqs, params.max_batched_tokens, params.kv_cache_tokens) < 1:
        raise ValueError("max_num_seqs, max_batched_tokens and kv_cache_tokens must be >= 1")
    if params.kv_block_tokens < 1 or params.kv_blocks < 1 or not 0 <= params.kv_watermark < 1:
        raise ValueError("kv_block_tokens must be 1 to kv_cache_tokens, kv_watermark in [0, 1)")
    if params.scheduler not in ("mixed", "prefill_first"):
        raise ValueError(f"scheduler {params.scheduler!r} is not mixed or prefill_first")
    for i, r in enumerate(requests):
        if r.prompt_tokens < 1 or r.output_tokens < 1:
            raise ValueError(f"request {i}: prompt_tokens and output_tokens must be >= 1")
        if i and r.arrival_s < requests[i - 1].arrival_s:
            raise ValueError(f"request {i}: requests must be sorted by arrival_s")
    if queue_limit < 0:
        raise ValueError("queue_limit must be 0 (no bound) or more")
    if admission_s is not None and (params.roofline or params.table or params.kv_token_s):
        raise ValueError("admission_s predicts on the linear step model without kv_token_s")
    sim = _Sim(requests, workers, params, policy, timeout_s, duration_s, record_steps, queue_limit,
               admission_s)
    sim.run()
    return ReferenceResult(
        records=tuple(_record(r) for r in sim.reqs),
        preemptions=sim.preemptions,
        steps=sim.steps,
        busy_s=tuple(w.busy_s for w in sim.workers),
        step_log=tuple(sim.step_log),
        gaps=tuple(sim.gaps),
        refused=tuple(sim.refused),
    )
