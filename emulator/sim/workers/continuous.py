"""The ``continuous`` worker model: iteration-level batching with a KV cache, as engines
such as vLLM, SGLang and TensorRT-LLM serve.

Each worker keeps a waiting queue and a running list (in admission order) and, while it
has work, runs steps back to back. At the start of a step at time t:

0. Requests whose client gave up (deadline <= t) leave, freeing their KV.
1. D = the running requests whose prefill is complete; each needs one more KV token.
   While free KV < |D|, the most recently admitted running request is preempted: its KV
   is freed, its prefill target becomes prompt + tokens generated so far, and it goes
   to the front of the waiting queue (recompute).
2. The step's token budget is ``max_batched_tokens`` - |D|.
3. Running requests with prefill left take chunks of it, in admission order.
4. Waiting requests are admitted in FIFO order (then, under ``pull``, the dispatcher's
   held ones) while budget, ``max_num_seqs`` and free KV allow; admission reserves KV
   for the whole prefill target, and each admitted request takes a chunk. A head that
   does not fit blocks those behind it.
5. The step lasts ``step_base_s + prefill_token_s * chunks + prefill_attn_s * sum of
   chunk * (chunk start + chunk) + decode_seq_s * |D| + kv_token_s * D's contexts``;
   or, under the roofline step model, max(memory, compute): the weights plus the KV
   read (D's contexts, and each chunk's start + chunk) over the bandwidth, and
   2 x active parameters x (|D| + chunks) over the FLOPs.
6. At its end each member of D generates a token, and so does each request whose
   prefill completed in it; a request with all its output tokens completes.

With ``worker.prefix_cache`` a worker also keeps shared-prefix KV blocks in the same
budget (``prefix_cache.py``): a request's cached prefix is neither reserved nor
prefilled again (its progress starts after it), and unpinned cached blocks are evicted
before a step preempts or an admission blocks.

Speed: a step with no prefill and no admission starts a *stretch* of decode-only steps
that is one event, not one per step. Within it |D| = n is fixed and every context grows
by one per step, so step j lasts a + b (C + n (j - 1)) (a = base + decode_seq_s n,
b = kv_token_s, C = D's contexts in the first step), and the end of step k is

    T(k) = t0 + k a + b (k C + n k (k - 1) / 2)

Under the roofline a decode step lasts max(W + K (C + n (j - 1)), F n): a rising line
and a constant, so the steps are compute-bound first and memory-bound after at most one
switch. A stretch is the one or the other (a = F n, b = 0, or a = W, b = K), and a
compute-bound stretch ends at the switch, where a memory-bound one begins.

The stretch ends at the first completion, the first step that would need a preemption,
or the first step start at or after a waiting or running request's deadline, whichever
comes first; new work for the worker (an arrival, or a held request it could admit)
cuts it at the end of the step in progress.

Decoding requests all advance together, so a worker keeps a *decode clock* (decode
steps done) instead of touching every request each step: a decoding request's tokens
and KV are its values when it joined the decoding set plus the clock's advance since,
the set's KV and context sums are ``base + n * clock``, and the next completion is the
top of a heap keyed by the clock value at which each request finishes. A stretch costs
O(1) to start and end, plus the requests that complete.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from emulator.scenario import Scenario, WorkerSpec
from emulator.sim.events import STEP_END
from emulator.sim.requests import OK, ORPHANED
from emulator.sim.results import BUSY, DEAD, IDLE, PARKED
from emulator.sim.workers.base import WorkerModel
from emulator.sim.workers.prefix_cache import PrefixCache
from emulator.sim.workers.prefix_figures import PrefixFigures

if TYPE_CHECKING:
    from emulator.sim.engine import Engine
    from emulator.sim.router import Router

_INF = float("inf")
_STEP, _STRETCH = 1, 2  # what a busy worker's pending STEP_END ends


@dataclass(slots=True, eq=False)
class Seq:
    """One request at a worker: its sizes and how far it got.

    While it decodes (``join >= 0``) its ``generated`` and ``kv`` are as of the worker's
    decode clock reaching ``join``; the worker's ``tokens_of`` and ``kv_of`` give them
    now.
    """

    row: int  # its row in the model's request store
    prompt: int
    output: int
    deadline: float  # when its client gives up (infinity: never)
    epoch: int  # the router's epoch when routed: an older one comes back orphaned
    target: int  # prefill target: the prompt, or prompt + generated after a preemption
    progress: int = 0  # prefill tokens done toward the target
    generated: int = 0  # output tokens generated (as of ``join`` while decoding)
    kv: int = 0  # KV tokens held (as of ``join`` while decoding; 0 unless running)
    first_token_s: float = -1.0
    at: int = 0  # 0 gone, 1 waiting, 2 running
    join: int = -1  # the decode clock when it started decoding (-1: not decoding)
    order: int = 0  # a tie-breaker for heaps, unique per worker
    group: int = -1  # its shared-prefix group (-1: none)
    prefix: int = 0  # the tokens of its prompt that are the group's


@dataclass(slots=True, eq=False)
class Worker:
    """One continuous-batching worker's state."""

    index: int
    model: int
    spec: WorkerSpec
    router: Router
    waiting: deque[Seq] = field(default_factory=deque)
    running: list[Seq] = field(default_factory=list)  # in admission order
    prefilling: list[Seq] = field(default_factory=list)  # running, prefill left
    n_dec: int = 0  # running requests decoding (|D|)
    clock: int = 0  # decode steps done
    dec_base: int = 0  # sum over decoding requests of kv - join: their KV is this + n clock
    kv_prefill: int = 0  # KV held by running requests still prefilling
    finishing: list[tuple[int, int, Seq]] = field(default_factory=list)  # (clock at end, order, seq)
    deadlines: list[tuple[float, int, Seq]] = field(default_factory=list)  # of all its requests
    ahead: int = 0  # 1 while a step that reserved the decoders' next tokens runs
    version: int = 0  # bumped when its pending STEP_END is replaced or it dies
    phase: int = 0  # 0 asleep (or dead), _STEP or _STRETCH
    t0: float = 0.0  # the step's (or stretch's) start
    t_end: float = 0.0  # when its pending STEP_END fires
    chunks: list[tuple[Seq, int]] = field(default_factory=list)
    serial: int = 0
    busy: bool = False  # as last written to the fleet's state array
    draining: bool = False  # scaled down: takes no new requests, parks once empty
    shown_waiting: int = 0  # as last written to the fleet's backlog array
    # A stretch: n decoding requests, a and b of the step time, C, and its length.
    n: int = 0
    a: float = 0.0
    b: float = 0.0
    c: float = 0.0
    steps: int = 0
    # The roofline step model (``step_model = "roofline"``): a step lasts
    # max(r_weights + r_kv x KV tokens read, r_token x tokens computed).
    roofline: bool = False
    r_weights: float = 0.0
    r_kv: float = 0.0
    r_token: float = 0.0
    # Prefix caching (``worker.prefix_cache``): the cache, the tokens its blocks hold,
    # and prefix tokens looked up and found cached at admissions (totals, and at the
    # last frame).
    cache: PrefixCache | None = None
    cached: int = 0
    prefix_seen: int = 0
    prefix_hit: int = 0
    frame_seen: int = 0
    frame_hit: int = 0
    # Disaggregated serving (``emulator.sim.workers.disaggregated``): a prefill-pool
    # worker hands each prefilled request off; a decode worker takes handoffs in
    # (``incoming``: no KV reserved yet) and admits them once their KV arrived
    # (``landed``: reserved, joining at the next step start).
    hands_off: bool = False
    incoming: deque[Seq] = field(default_factory=deque)
    landed: list[Seq] = field(default_factory=list)

    def kv_used(self) -> int:
        """KV tokens held now (a running step's reservations and cached prefix blocks
        included)."""
        return self.kv_prefill + self.dec_base + self.n_dec * (self.clock + self.ahead) + self.cached

    def tokens_of(self, s: Seq) -> int:
        """Output tokens ``s`` has generated (steps done)."""
        return s.generated + self.clock - s.join if s.join >= 0 else s.generated

    def kv_of(self, s: Seq) -> int:
        """KV tokens ``s`` holds (a running step's reservation included)."""
        return s.kv + self.clock + self.ahead - s.join if s.join >= 0 else s.kv

    def stretch_end(self, k: int) -> float:
        """T(k): when the stretch's k-th step ends."""
        return self.t0 + k * self.a + self.b * (k * self.c + self.n * k * (k - 1) / 2)

    def steps_by(self, t: float) -> int:
        """How many of the stretch's steps have ended by ``t`` (at most ``steps``)."""
        if t >= self.t_end:
            return self.steps
        k = _first_step_ending_at_or_after(self, t)
        return k if self.stretch_end(k) <= t else k - 1


def _first_step_ending_at_or_after(wk: Worker, t: float) -> int:
    """The smallest k >= 1 with T(k) >= t (closed form, then nudged for rounding)."""
    span = t - wk.t0
    if span <= 0:
        return 1
    if not wk.b:  # steps of one length (no per-context term): T(k) = t0 + k a
        k = max(math.ceil(span / wk.a), 1)
        while k > 1 and wk.t0 + (k - 1) * wk.a >= t:
            k -= 1
        while wk.t0 + k * wk.a < t:
            k += 1
        return k
    half = wk.b * wk.n / 2.0
    lin = wk.a + wk.b * wk.c - half
    if half > 0:
        k = math.ceil((-lin + math.sqrt(lin * lin + 4.0 * half * span)) / (2.0 * half))
    else:
        k = math.ceil(span / lin)
    k = max(k, 1)
    while k > 1 and wk.stretch_end(k - 1) >= t:
        k -= 1
    while wk.stretch_end(k) < t:
        k += 1
    return k


def _roofline_step(wk: Worker, chunks: list[tuple[Seq, int]]) -> float:
    """A step with prefill chunks under the roofline: the decoders read their contexts'
    KV and a chunk the KV of its prompt so far; every decoder and chunk token is
    computed."""
    n_dec = wk.n_dec
    read = wk.dec_base + n_dec * (wk.clock + 1) if n_dec else 0
    tokens = n_dec
    for s, c in chunks:
        read += s.progress + c
        tokens += c
    return max(wk.r_weights + wk.r_kv * read, wk.r_token * tokens)


class ContinuousWorkers(PrefixFigures, WorkerModel):
    """Iteration-level batching with a KV cache; see the module docstring."""

    name = "continuous"
    frame_keys = (
        "running",
        "waiting",
        "kv_used",
        "preemptions",
        "busy_workers",
        "alive_workers",
        "output_tokens_per_s",
    )
    #: Under ``pull``, an idle worker of the lowest index takes a new request.
    idle_lowest_first = True

    def __init__(self, sim: Engine, models: list[int]) -> None:
        super().__init__(sim, models)
        self.queue = sim.queue
        scenario = sim.scenario
        names = list(scenario.models)
        self.timeout = scenario.client.timeout_s
        self.workers: dict[int, Worker] = {}
        costs: dict[int, tuple[WorkerSpec, tuple[float, float, float] | None]] = {}
        for w, m in enumerate(self.fleet.model_list):
            if m in models:
                if m not in costs:  # once per model, not per worker: exact arithmetic is not free
                    costs[m] = self._costs(scenario, names[m])
                spec, roof = costs[m]
                wk = self.workers[w] = Worker(w, m, spec, sim.disp[m])  # type: ignore[arg-type]
                if roof is not None:
                    wk.roofline = True
                    wk.r_weights, wk.r_kv, wk.r_token = roof
                if spec.prefix_cache:
                    wk.cache = PrefixCache(spec.block_tokens)
        n_models = len(names)
        self.preemptions = [0] * n_models
        self._frame_preemptions = [0] * n_models
        self.tokens_out = [0] * n_models  # output tokens generated, as of the last update
        self._frame_tokens = [0] * n_models  # tokens generated at the last frame
        self._last_frame_s = 0.0
        self.alive = [0] * n_models
        for wk in self.workers.values():
            if self.fleet.state[wk.index] <= BUSY:  # an autoscaler's spare slots wait parked
                self.alive[wk.model] += 1
        self.queue.on(STEP_END, self._on_step_end)
        self._schedule_end = self.queue.scheduler(STEP_END)
        self.init_prefix_figures(scenario, n_models)

    @staticmethod
    def _costs(scenario: Scenario, name: str) -> tuple[WorkerSpec, tuple[float, float, float] | None]:
        """A model's worker spec and, under the roofline, its three step coefficients
        (weights read, one KV token read, one token computed)."""
        spec = scenario.worker_for(name)
        roof = scenario.roofline_for(name) if spec.step_model == "roofline" else None
        if roof is None:
            return spec, None
        return spec, (float(roof.weights_read_s), float(roof.kv_token_read_s), float(roof.token_compute_s))

    # -- the interface ---------------------------------------------------------------
    def is_alive(self, w: int) -> bool:
        # A worker warming up, parked or draining is not one to route to.
        return bool(self.fleet.state[w] <= BUSY) and not self.workers[w].draining

    def assign(self, w: int, work: int) -> None:
        wk = self.workers[w]
        d = wk.router
        if self.fleet.state[w] > BUSY:  # dead (or not serving): the request is lost
            d.lose(work, work + 1, self.queue.now_s)
            return
        seq = self._seq(wk, d, work)
        seq.at = 1
        wk.waiting.append(seq)
        wk.shown_waiting = self.fleet.backlog[w] = len(wk.waiting)
        if wk.phase == 0:
            self._start_step(wk, self.queue.now_s)
        elif wk.phase == _STRETCH:
            self._cut(wk)  # it may admit the newcomer at its next step start

    def start(self, w: int, work: int) -> None:
        self.assign(w, work)

    def work_held(self, model: int, caller: Worker | None = None) -> None:
        """The router holds requests (``pull``): make sure a worker that could admit the
        oldest looks at them at its next step start. Workers stepping one step at a
        time look anyway; of those in a decode stretch, the one whose next step starts
        first and that has room is cut there."""
        d = self._router(model)
        if not d.closed:
            return
        st = d.store
        i = d.closed[0] - st.base
        need = int(st.tokens[i])
        group, prefix = int(st.group[i]), int(st.prefix[i])
        now = self.queue.now_s
        best: Worker | None = None
        best_t = _INF
        for w in d.workers:
            wk = self.workers[w]
            if wk.draining or wk is caller:
                continue
            if wk.phase == _STEP and now < wk.t_end < best_t:
                # It looks at its next step start anyway (one whose step ends now is
                # the worker starting its next step, which has just looked).
                best, best_t = None, wk.t_end
            elif wk.phase == _STRETCH and wk.n < wk.spec.max_num_seqs and not wk.waiting:
                # (A waiting request of its own did not fit when the stretch began and
                # fits no better before it ends: it blocks the held ones.)
                k = min(_first_step_ending_at_or_after(wk, now), wk.steps)
                free = wk.spec.kv_cache_tokens - (wk.kv_used() + wk.n * k)
                room = need
                if wk.cache is not None:  # its cached prefix and the blocks it may evict
                    room -= self._hit(wk, group, prefix, need)
                    free += wk.cache.evictable(group)
                t = wk.stretch_end(k)
                if free >= room and t < best_t:
                    best, best_t = wk, t
        if best is not None:
            self._cut(best)

    def kill(self, w: int) -> bool:
        if self.fleet.state[w] > BUSY:  # dead already, or not serving
            return False
        wk = self.workers[w]
        d = self._router(wk.model)
        now = self.queue.now_s
        if wk.phase == _STRETCH:
            self.tokens_out[wk.model] += wk.n * wk.steps_by(now)
        for seq in (*wk.running, *wk.waiting):
            d.lose(seq.row, seq.row + 1, now)
            seq.at = 0
        wk.running.clear()
        wk.prefilling.clear()
        wk.waiting.clear()
        wk.finishing.clear()
        wk.deadlines.clear()
        wk.chunks = []
        wk.n_dec = wk.dec_base = wk.kv_prefill = wk.ahead = wk.cached = 0
        if wk.cache is not None:
            wk.cache.clear()
        wk.version += 1
        wk.phase = 0
        wk.busy = False
        wk.shown_waiting = 0
        self.fleet.state[w] = DEAD
        self.fleet.backlog[w] = 0
        self.alive[wk.model] -= 1
        return True

    def restore(self, w: int) -> bool:
        if self.fleet.state[w] != DEAD:
            return False
        wk = self.workers[w]
        self.fleet.state[w] = IDLE
        wk.version += 1
        self.alive[wk.model] += 1
        return True

    def oldest_row(self, model: int) -> int | None:
        low: int | None = None
        for w in self._router(model).workers:
            wk = self.workers[w]
            for seq in (*wk.running, *wk.waiting):
                if low is None or seq.row < low:
                    low = seq.row
        return low

    def frame_figures(self, model: int) -> dict[str, Any]:
        now = self.queue.now_s
        d = self._router(model)
        running = waiting = kv = capacity = busy = 0
        tokens = self.tokens_out[model]
        for w in d.workers:
            wk = self.workers[w]
            if self.fleet.state[w] > BUSY:  # dead, warming up or parked
                continue
            capacity += wk.spec.kv_cache_tokens
            running += len(wk.running)
            waiting += len(wk.waiting)
            kv += wk.kv_used()
            if wk.phase:
                busy += 1
            if wk.phase == _STRETCH:
                done = wk.steps_by(now)
                kv += wk.n * done
                tokens += wk.n * done
        span = now - self._last_frame_s
        out = {
            "running": running,
            "waiting": waiting + len(d.closed),
            "kv_used": kv / capacity if capacity else None,
            "preemptions": self.preemptions[model] - self._frame_preemptions[model],
            "busy_workers": busy,
            "alive_workers": self.alive[model],
            "output_tokens_per_s": (tokens - self._frame_tokens[model]) / span if span > 0 else 0.0,
        }
        self._frame_preemptions[model] = self.preemptions[model]
        self._frame_tokens[model] = tokens
        if self.prefix_on:
            self.add_prefix_figures(model, out)
        return out

    # -- the autoscaler's hooks (emulator.sim.autoscaler) ------------------------------
    def activate(self, w: int) -> None:
        """Worker ``w`` (warming up or parked) serves from now, idle."""
        self.fleet.state[w] = IDLE
        wk = self.workers[w]
        wk.draining = False
        wk.version += 1
        self.alive[wk.model] += 1

    def drain(self, w: int) -> bool:
        """Worker ``w`` takes no new requests; True if it has none left (park it now)."""
        wk = self.workers[w]
        wk.draining = True
        return not wk.running and not wk.waiting

    def park(self, w: int) -> None:
        """Worker ``w`` (alive and empty, or dead) stops: its slot waits parked."""
        wk = self.workers[w]
        wk.draining = False
        if self.fleet.state[w] <= BUSY:
            self.alive[wk.model] -= 1
        wk.version += 1
        wk.phase = 0
        wk.busy = False
        self.fleet.state[w] = PARKED

    def frame_done(self) -> None:
        self._last_frame_s = self.queue.now_s

    def worker_figures(self, w: int) -> tuple[float, int]:
        """Worker ``w``'s KV in use (fraction) and running sequences, now."""
        wk = self.workers[w]
        used = wk.kv_used()
        if wk.phase == _STRETCH:
            used += wk.n * wk.steps_by(self.queue.now_s)
        return used / wk.spec.kv_cache_tokens, len(wk.running)

    def tokens_generated(self, model: int) -> int:
        """Output tokens ``model``'s workers generated so far (stretches included)."""
        now = self.queue.now_s
        total = self.tokens_out[model]
        for w in self._router(model).workers:
            wk = self.workers[w]
            if wk.phase == _STRETCH:
                total += wk.n * wk.steps_by(now)
        return total

    # -- requests --------------------------------------------------------------------
    def _router(self, model: int) -> Router:
        return self.sim.disp[model]  # type: ignore[return-value]

    def _seq(self, wk: Worker, d: Router, row: int) -> Seq:
        st, i = d.store, row - d.store.base
        prompt = st.tokens.item(i)
        wk.serial += 1
        seq = Seq(
            row, prompt, st.output.item(i), _INF, d.epoch, prompt, order=wk.serial,
            group=st.group.item(i), prefix=st.prefix.item(i),
        )
        if self.timeout is not None:
            seq.deadline = st.arrival.item(i) + self.timeout
            heapq.heappush(wk.deadlines, (seq.deadline, seq.order, seq))
        return seq

    def _admit(
        self, wk: Worker, seq: Seq, chunks: list[tuple[Seq, int]], budget: int, hit: int = 0
    ) -> int:
        """``seq`` starts running; ``hit`` of its prefill target is cached prefix, read
        in place and not computed."""
        seq.at = 2
        seq.kv = seq.target - hit
        seq.progress = hit
        wk.kv_prefill += seq.kv
        wk.running.append(seq)
        wk.prefilling.append(seq)
        c = min(seq.kv, budget)
        chunks.append((seq, c))
        if seq.group >= 0:
            wk.prefix_seen += seq.prefix
            wk.prefix_hit += hit
            if wk.cache is not None:
                wk.cache.pin(seq.group)
        return budget - c

    def _hit(self, wk: Worker, group: int, prefix: int, target: int) -> int:
        """Prefill tokens a request finds in ``wk``'s prefix cache."""
        cache = wk.cache
        return cache.hit(group, prefix, target) if cache is not None and group >= 0 else 0

    def _room(self, wk: Worker, need: int, keep: int = -1, partial: bool = False) -> int:
        """Evict unpinned prefix blocks (not ``keep``'s) for ``need`` more tokens: only
        if that is enough, or as many as there are with ``partial``. Returns the tokens
        freed."""
        cache = wk.cache
        if cache is None or not partial and cache.evictable(keep) < need:
            return 0
        freed = cache.evict(need, keep)
        wk.cached -= freed
        return freed

    def _join(self, wk: Worker, s: Seq) -> None:
        """``s`` finished its prefill (at a step end): it decodes from now on."""
        wk.prefilling.remove(s)
        wk.kv_prefill -= s.kv
        s.join = wk.clock
        wk.dec_base += s.kv - s.join
        wk.n_dec += 1
        heapq.heappush(wk.finishing, (s.join + s.output - s.generated, s.order, s))

    def _leave(self, wk: Worker, s: Seq) -> None:
        """``s`` stops decoding: bring its tokens and KV up to date."""
        wk.dec_base -= s.kv - s.join
        wk.n_dec -= 1
        s.generated, s.kv = wk.tokens_of(s), wk.kv_of(s)
        s.join = -1

    def _drop(self, wk: Worker, s: Seq) -> None:
        """``s`` leaves ``wk`` (running or waiting), freeing its KV."""
        if s.at == 1:
            wk.waiting.remove(s)
        elif s.at == 2:
            wk.running.remove(s)
            if wk.cache is not None and s.group >= 0:
                wk.cache.unpin(s.group)
            if s.join >= 0:
                self._leave(wk, s)
            else:
                wk.prefilling.remove(s)
                wk.kv_prefill -= s.kv
        s.kv = 0
        s.at = 0

    def _complete(self, wk: Worker, s: Seq, t: float, d: Router) -> None:
        self._drop(wk, s)
        d.complete_request((s.row, s.first_token_s, t, OK if s.epoch == d.epoch else ORPHANED, s.output))
        d.policy.work_done(wk.index)

    def _drop_expired(self, wk: Worker, t: float, d: Router) -> None:
        """Requests whose client gave up by ``t`` leave (the books count them)."""
        heap = wk.deadlines
        while heap and heap[0][0] <= t:
            _, _, s = heapq.heappop(heap)
            if s.at:
                self._drop(wk, s)
                d.policy.work_done(wk.index)

    # -- disaggregated serving: the hooks ``DisaggregatedWorkers`` fills in ------------
    def _take_landed(self, wk: Worker) -> None:
        """Requests whose KV arrived from a prefill worker join the running set; each
        still has its last prompt position to run (a chunk of one token), which
        gives its first token. Their KV was reserved when the transfer began."""
        for s in wk.landed:
            s.at = 2
            wk.running.append(s)
            wk.prefilling.append(s)
        wk.landed.clear()

    # Only ``DisaggregatedWorkers`` gives a worker handoffs (``incoming``) or marks it as
    # handing off (``hands_off``), and it overrides these two; here they are never
    # reached, and reaching them would be a broken invariant, not a missing feature.
    def _pull(self, wk: Worker, t: float) -> None:
        """Reserve KV for the requests handed to ``wk`` and start their transfers."""
        raise AssertionError(f"worker {wk.index} has handoffs outside a disaggregated fleet")

    def _hand_off(self, wk: Worker, s: Seq, t: float) -> None:
        """``s`` finished its prefill on a prefill-pool worker at ``t``."""
        raise AssertionError(f"worker {wk.index} hands off outside a disaggregated fleet")

    # -- steps -----------------------------------------------------------------------
    def _start_step(self, wk: Worker, t: float) -> None:
        """Start worker ``wk``'s next step at ``t`` (steps 0-5 of the module docstring),
        or a stretch of decode steps, or put it to sleep."""
        spec, running, waiting = wk.spec, wk.running, wk.waiting
        d = wk.router
        if wk.deadlines and wk.deadlines[0][0] <= t:
            self._drop_expired(wk, t, d)
        if wk.landed:
            self._take_landed(wk)
        # 1. Preempt while the decoders' next tokens do not fit, then reserve them.
        total = spec.kv_cache_tokens
        while total - (wk.kv_prefill + wk.dec_base + wk.n_dec * wk.clock + wk.cached) < wk.n_dec:
            if wk.cached:  # evict unpinned cached blocks before preempting anything
                free = total - (wk.kv_prefill + wk.dec_base + wk.n_dec * wk.clock + wk.cached)
                if self._room(wk, wk.n_dec - free, partial=True):
                    continue
            victim = running.pop()
            if wk.cache is not None and victim.group >= 0:
                wk.cache.unpin(victim.group)
            if victim.join >= 0:
                self._leave(wk, victim)
            else:
                wk.prefilling.remove(victim)
                wk.kv_prefill -= victim.kv
            victim.kv = 0
            victim.target = victim.prompt + victim.generated
            victim.progress = 0
            victim.at = 1
            waiting.appendleft(victim)
            self.preemptions[wk.model] += 1
        n_dec = wk.n_dec
        wk.ahead = 1 if n_dec else 0
        # 2-3. The budget, and chunks for prefills in progress.
        budget = spec.max_batched_tokens - n_dec
        chunks: list[tuple[Seq, int]] = []
        for s in wk.prefilling:
            if budget <= 0:
                break
            c = min(s.target - s.progress, budget)
            chunks.append((s, c))
            budget -= c
        if wk.incoming:
            self._pull(wk, t)
        # 4. Admission: own queue first, then (pull) the dispatcher's.
        blocked = False
        if waiting:
            free = total - wk.kv_used()
            while waiting and budget > 0 and len(running) < spec.max_num_seqs:
                head = waiting[0]
                hit = self._hit(wk, head.group, head.prefix, head.target) if wk.cache else 0
                need = head.target - hit
                if free < need:
                    freed = self._room(wk, need - free, head.group) if wk.cached else 0
                    if not freed:
                        blocked = True
                        break
                    free += freed
                waiting.popleft()
                free -= need
                budget = self._admit(wk, head, chunks, budget, hit)
        if (
            not blocked
            and d.closed
            and not d.paused
            and d.policy.workers_take_held
            and not wk.draining
        ):
            d.drop_expired(t)
            while d.closed and budget > 0 and len(running) < spec.max_num_seqs:
                i = d.closed[0] - d.store.base
                need = int(d.store.tokens[i])
                group = int(d.store.group[i])
                hit = self._hit(wk, group, int(d.store.prefix[i]), need) if wk.cache else 0
                need -= hit
                free = total - wk.kv_used()
                if free < need and not (wk.cached and self._room(wk, need - free, group)):
                    break
                budget = self._admit(wk, self._seq(wk, d, d.take_held()), chunks, budget, hit)
        if d.closed and not d.paused and d.policy.workers_take_held:
            # Its own head blocked, or the held head does not fit here: another
            # worker may take it at its next step start.
            self.work_held(wk.model, wk)
        if len(waiting) != wk.shown_waiting:  # numpy writes cost: only on a change
            wk.shown_waiting = self.fleet.backlog[wk.index] = len(waiting)
        if not running:
            wk.phase = 0
            wk.chunks = []
            wk.busy = False
            self.fleet.state[wk.index] = IDLE
            if wk.draining:
                self.sim.autoscaler.drained(wk.index)  # type: ignore[union-attr]
                return
            d.policy.worker_idle(wk.index)
            return
        if not wk.busy:
            wk.busy = True
            self.fleet.state[wk.index] = BUSY
        wk.t0 = t
        wk.chunks = chunks
        if chunks:
            if wk.roofline:
                duration = _roofline_step(wk, chunks)
            else:
                duration = spec.step_base_s + spec.decode_seq_s * n_dec
                for s, c in chunks:
                    duration += spec.prefill_token_s * c + spec.prefill_attn_s * c * (s.progress + c)
                if spec.kv_token_s and n_dec:
                    duration += spec.kv_token_s * (wk.dec_base + n_dec * (wk.clock + 1))
            self._schedule(wk, _STEP, t + duration)
            return
        self._start_stretch(wk, t)

    def _start_stretch(self, wk: Worker, t: float) -> None:
        """Decode-only from ``t``: one event for the steps until the next change."""
        spec = wk.spec
        n = wk.n_dec
        wk.n = n
        wk.c = float(wk.dec_base + n * (wk.clock + 1))  # the decoders' contexts in step 1
        switch = 0  # roofline: the last step that stays compute-bound (0: none)
        if wk.roofline:
            # Step j reads the weights and C + n (j - 1) tokens of KV and computes n
            # tokens: max of a rising line and a constant. Compute-bound steps come
            # first, so the stretch is one line or the other, ending at the switch.
            compute = wk.r_token * n
            if wk.r_weights + wk.r_kv * wk.c >= compute:
                wk.a, wk.b = wk.r_weights, wk.r_kv
            else:
                wk.a, wk.b = compute, 0.0
                # The last j with r_weights + r_kv (C + n (j - 1)) <= compute.
                rise = wk.r_kv * n
                switch = int((compute - wk.r_weights - wk.r_kv * wk.c) // rise) + 1 if rise else 0
        else:
            wk.a = spec.step_base_s + spec.decode_seq_s * n
            wk.b = spec.kv_token_s
        finishing = wk.finishing
        while True:  # the next completion (entries of requests that left are stale)
            finish, _, s = finishing[0]
            if s.join >= 0 and s.join + s.output - s.generated == finish:
                break
            heapq.heappop(finishing)
        steps = finish - wk.clock
        # Step j needs the decoders' KV before step 1 plus n j tokens to fit.
        steps = min(steps, (spec.kv_cache_tokens - wk.kv_prefill - wk.dec_base - wk.cached) // n - wk.clock)
        deadlines = wk.deadlines
        while deadlines and not deadlines[0][2].at:
            heapq.heappop(deadlines)
        if deadlines:
            steps = min(steps, _first_step_ending_at_or_after(wk, deadlines[0][0]))
        if switch:
            steps = min(steps, switch)
        k = wk.steps = max(steps, 1)
        # wk.stretch_end(k), inlined: once per stretch.
        self._schedule(wk, _STRETCH, t + k * wk.a + wk.b * (k * wk.c + n * k * (k - 1) / 2))

    def _schedule(self, wk: Worker, phase: int, t_end: float) -> None:
        wk.phase = phase
        wk.t_end = t_end
        wk.version += 1
        self._schedule_end(t_end, wk, wk.version)

    def _cut(self, wk: Worker) -> None:
        """End ``wk``'s stretch at the end of the step in progress."""
        k = _first_step_ending_at_or_after(wk, self.queue.now_s)
        if k < wk.steps:
            wk.steps = k
            self._schedule(wk, _STRETCH, wk.stretch_end(k))

    def _on_step_end(self, wk: Worker, version: int) -> None:
        if version != wk.version:
            return  # replaced (a cut stretch) or the worker died
        t = self.queue.now_s
        d = wk.router
        wk.ahead = 0
        if wk.phase == _STEP:
            wk.clock += 1 if wk.n_dec else 0
            produced = wk.n_dec
            for s, c in wk.chunks:
                s.progress += c
                if s.progress == s.target:
                    if wk.hands_off:
                        self._hand_off(wk, s, t)
                        continue
                    if wk.cache is not None and s.group >= 0:
                        moved = wk.cache.insert(s.group, s.prefix)
                        if moved:  # its prefix's new whole blocks move to the cache
                            s.kv -= moved
                            wk.kv_prefill -= moved
                            wk.cached += moved
                    s.generated += 1
                    produced += 1
                    if s.first_token_s < 0:
                        s.first_token_s = t
                    if s.generated >= s.output:
                        self._complete(wk, s, t, d)
                    else:
                        self._join(wk, s)
            wk.chunks = []
        else:
            wk.clock += wk.steps
            produced = wk.n * wk.steps
        self.tokens_out[wk.model] += produced
        finishing = wk.finishing
        while finishing and finishing[0][0] <= wk.clock:
            finish, _, s = heapq.heappop(finishing)
            if s.join >= 0 and s.join + s.output - s.generated == finish:
                self._complete(wk, s, t, d)
        self._start_step(wk, t)
