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
   chunk * (chunk start + chunk) + decode_seq_s * |D| + kv_token_s * D's contexts``.
6. At its end each member of D generates a token, and so does each request whose
   prefill completed in it; a request with all its output tokens completes.

Speed: a step with no prefill and no admission starts a *stretch* of decode-only steps
that is one event, not one per step. Within it |D| = n is fixed and every context grows
by one per step, so step j lasts a + b (C + n (j - 1)) (a = base + decode_seq_s n,
b = kv_token_s, C = D's contexts in the first step), and the end of step k is

    T(k) = t0 + k a + b (k C + n k (k - 1) / 2)

The stretch ends at the first completion, the first step that would need a preemption,
or the first step start at or after a waiting or running request's deadline, whichever
comes first; new work for the worker (an arrival, or a held request it could admit)
cuts it at the end of the step in progress. Each request's tokens are brought up to
date only when the stretch ends.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from emulator.scenario import WorkerSpec
from emulator.sim.events import STEP_END
from emulator.sim.requests import OK, ORPHANED
from emulator.sim.results import BUSY, DEAD, IDLE
from emulator.sim.workers.base import WorkerModel

if TYPE_CHECKING:
    from emulator.sim.engine import Engine
    from emulator.sim.router import Router

_INF = float("inf")
_STEP, _STRETCH = 1, 2  # what a busy worker's pending STEP_END ends


@dataclass(slots=True, eq=False)
class Seq:
    """One request at a worker: its sizes and how far it got."""

    row: int  # its row in the model's request store
    prompt: int
    output: int
    deadline: float  # when its client gives up (infinity: never)
    epoch: int  # the router's epoch when routed: an older one comes back orphaned
    target: int  # prefill target: the prompt, or prompt + generated after a preemption
    progress: int = 0  # prefill tokens done toward the target
    generated: int = 0  # output tokens generated
    kv: int = 0  # KV tokens held (0 unless running)
    first_token_s: float = -1.0


@dataclass(slots=True, eq=False)
class Worker:
    """One continuous-batching worker's state."""

    index: int
    model: int
    spec: WorkerSpec
    waiting: deque[Seq] = field(default_factory=deque)
    running: list[Seq] = field(default_factory=list)
    kv_used: int = 0
    version: int = 0  # bumped when its pending STEP_END is replaced or it dies
    phase: int = 0  # 0 asleep (or dead), _STEP or _STRETCH
    t0: float = 0.0  # the step's (or stretch's) start
    t_end: float = 0.0  # when its pending STEP_END fires
    decoding: list[Seq] = field(default_factory=list)  # D
    chunks: list[tuple[Seq, int]] = field(default_factory=list)
    # A stretch: n decoding sequences, a and b of the step time, C, and its length.
    n: int = 0
    a: float = 0.0
    b: float = 0.0
    c: float = 0.0
    steps: int = 0

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


class ContinuousWorkers(WorkerModel):
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
        for w, m in enumerate(self.fleet.model_list):
            if m in models:
                self.workers[w] = Worker(w, m, scenario.worker_for(names[m]))
        n_models = len(names)
        self.preemptions = [0] * n_models
        self._frame_preemptions = [0] * n_models
        self.tokens_out = [0] * n_models  # output tokens generated, as of the last update
        self._frame_tokens = [0] * n_models  # tokens_out at the last frame
        self._last_frame_s = 0.0
        self.alive = [0] * n_models
        for wk in self.workers.values():
            self.alive[wk.model] += 1
        self.queue.on(STEP_END, self._on_step_end)

    # -- the interface ---------------------------------------------------------------
    def is_alive(self, w: int) -> bool:
        return bool(self.fleet.state[w] != DEAD)

    def assign(self, w: int, work: int) -> None:
        wk = self.workers[w]
        d = self._router(wk.model)
        if self.fleet.state[w] == DEAD:
            d.lose(work, work + 1, self.queue.now_s)
            return
        wk.waiting.append(self._seq(d, work))
        self.fleet.backlog[w] = len(wk.waiting)
        if wk.phase == 0:
            self._start_step(wk, self.queue.now_s)
        elif wk.phase == _STRETCH:
            self._cut(wk)  # it may admit the newcomer at its next step start

    def start(self, w: int, work: int) -> None:
        self.assign(w, work)

    def work_held(self, model: int) -> None:
        """The router holds requests (``pull``): make sure a worker that could admit the
        oldest looks at them at its next step start. Workers stepping one step at a
        time look anyway; of those in a decode stretch, the one whose next step starts
        first and that has room is cut there."""
        d = self._router(model)
        if not d.closed:
            return
        st = d.store
        row = d.closed[0]
        need = int(st.tokens[row - st.base])
        now = self.queue.now_s
        best: Worker | None = None
        best_t = _INF
        for w in d.workers:
            wk = self.workers[w]
            if wk.phase == _STEP and wk.t_end < best_t:
                best, best_t = None, wk.t_end  # it looks at its next step start anyway
            elif wk.phase == _STRETCH and wk.n < wk.spec.max_num_seqs:
                k = _first_step_ending_at_or_after(wk, now)
                t = wk.stretch_end(k) if k < wk.steps else wk.t_end
                free = wk.spec.kv_cache_tokens - (wk.kv_used + wk.n * min(k, wk.steps))
                if free >= need and t < best_t:
                    best, best_t = wk, t
        if best is not None:
            self._cut(best)

    def kill(self, w: int) -> bool:
        if self.fleet.state[w] == DEAD:
            return False
        wk = self.workers[w]
        d = self._router(wk.model)
        now = self.queue.now_s
        for seq in (*wk.running, *wk.waiting):
            d.lose(seq.row, seq.row + 1, now)
        if wk.phase == _STRETCH:
            self._count_stretch_tokens(wk, wk.steps_by(now))
        wk.running.clear()
        wk.waiting.clear()
        wk.decoding, wk.chunks = [], []
        wk.kv_used = 0
        wk.version += 1
        wk.phase = 0
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
            if self.fleet.state[w] == DEAD:
                continue
            capacity += wk.spec.kv_cache_tokens
            running += len(wk.running)
            waiting += len(wk.waiting)
            used = wk.kv_used
            if wk.phase:
                busy += 1
            if wk.phase == _STRETCH:
                done = wk.steps_by(now)
                used += wk.n * done
                tokens += wk.n * done
            kv += used
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
        return out

    def frame_done(self) -> None:
        """Every model's figures for this frame were taken."""
        self._last_frame_s = self.queue.now_s

    def worker_figures(self, w: int) -> tuple[float, int]:
        """Worker ``w``'s KV in use (fraction) and running sequences, now."""
        wk = self.workers[w]
        used = wk.kv_used
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

    # -- steps -----------------------------------------------------------------------
    def _router(self, model: int) -> Router:
        return self.sim.disp[model]  # type: ignore[return-value]

    def _seq(self, d: Router, row: int) -> Seq:
        st, b = d.store, d.store.base
        prompt = int(st.tokens[row - b])
        deadline = (
            float(st.arrival[row - b]) + self.timeout if self.timeout is not None else _INF
        )
        return Seq(row, prompt, int(st.output[row - b]), deadline, d.epoch, prompt)

    def _start_step(self, wk: Worker, t: float) -> None:
        """Start worker ``wk``'s next step at ``t`` (steps 0-5 of the module docstring),
        or a stretch of decode steps, or put it to sleep."""
        spec, running, waiting = wk.spec, wk.running, wk.waiting
        d = self._router(wk.model)
        policy = d.policy
        if self.timeout is not None:
            self._drop_expired(wk, t, policy)
        # 1. Decoding sequences, and preemption while their next tokens do not fit.
        decoding = [s for s in running if s.progress == s.target]
        while spec.kv_cache_tokens - wk.kv_used < len(decoding):
            victim = running.pop()
            wk.kv_used -= victim.kv
            victim.kv = 0
            victim.target = victim.prompt + victim.generated
            victim.progress = 0
            waiting.appendleft(victim)
            if decoding and decoding[-1] is victim:
                decoding.pop()
            self.preemptions[wk.model] += 1
        for s in decoding:
            s.kv += 1
        wk.kv_used += len(decoding)
        # 2-3. The budget, and chunks for prefills in progress.
        budget = spec.max_batched_tokens - len(decoding)
        chunks: list[tuple[Seq, int]] = []
        for s in running:
            if budget <= 0:
                break
            if s.progress < s.target:
                c = min(s.target - s.progress, budget)
                chunks.append((s, c))
                budget -= c
        # 4. Admission: own queue first, then (pull) the dispatcher's.
        blocked = False
        while waiting and budget > 0 and len(running) < spec.max_num_seqs:
            head = waiting[0]
            if spec.kv_cache_tokens - wk.kv_used < head.target:
                blocked = True
                break
            waiting.popleft()
            budget = self._admit(wk, head, chunks, budget)
        if not blocked and d.closed and not d.paused and policy.workers_take_held:
            d.drop_expired(t)
            while d.closed and budget > 0 and len(running) < spec.max_num_seqs:
                head = self._seq(d, d.closed[0])
                if spec.kv_cache_tokens - wk.kv_used < head.target:
                    break
                d.take_held()
                budget = self._admit(wk, head, chunks, budget)
            if d.closed:
                self.work_held(wk.model)
        self.fleet.backlog[wk.index] = len(waiting)
        if not running:
            wk.phase = 0
            wk.decoding, wk.chunks = [], []
            self.fleet.state[wk.index] = IDLE
            policy.worker_idle(wk.index)
            return
        self.fleet.state[wk.index] = BUSY
        wk.t0 = t
        wk.decoding, wk.chunks = decoding, chunks
        if chunks:
            duration = spec.step_base_s + spec.decode_seq_s * len(decoding)
            for s, c in chunks:
                duration += spec.prefill_token_s * c + spec.prefill_attn_s * c * (s.progress + c)
            if spec.kv_token_s:
                duration += spec.kv_token_s * sum(s.kv for s in decoding)
            self._schedule(wk, _STEP, t + duration)
            return
        self._start_stretch(wk, t)

    def _admit(self, wk: Worker, seq: Seq, chunks: list[tuple[Seq, int]], budget: int) -> int:
        seq.kv = seq.target
        wk.kv_used += seq.target
        wk.running.append(seq)
        c = min(seq.target, budget)
        chunks.append((seq, c))
        return budget - c

    def _start_stretch(self, wk: Worker, t: float) -> None:
        """Decode-only from ``t``: one event for the steps until the next change."""
        spec, decoding = wk.spec, wk.decoding
        n = len(decoding)
        wk.n = n
        wk.a = spec.step_base_s + spec.decode_seq_s * n
        wk.b = spec.kv_token_s
        wk.c = float(sum(s.kv for s in decoding))
        steps = min(s.output - s.generated for s in decoding)
        # Step j (j >= 2) needs n free KV tokens at its start: kv_used + n (j - 1) <= total.
        steps = min(steps, (spec.kv_cache_tokens - wk.kv_used) // n + 1)
        first_deadline = min((s.deadline for s in decoding), default=_INF)
        if wk.waiting:
            first_deadline = min(first_deadline, min(s.deadline for s in wk.waiting))
        if first_deadline < _INF:
            steps = min(steps, _first_step_ending_at_or_after(wk, first_deadline))
        wk.steps = max(steps, 1)
        self._schedule(wk, _STRETCH, wk.stretch_end(wk.steps))

    def _schedule(self, wk: Worker, phase: int, t_end: float) -> None:
        wk.phase = phase
        wk.t_end = t_end
        wk.version += 1
        self.queue.schedule(t_end, STEP_END, wk, wk.version)

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
        d = self._router(wk.model)
        if wk.phase == _STEP:
            for s, c in wk.chunks:
                s.progress += c
            for s in wk.decoding:
                s.generated += 1
            produced = len(wk.decoding)
            for s, _ in wk.chunks:
                if s.progress == s.target:
                    s.generated += 1
                    produced += 1
                    if s.first_token_s < 0:
                        s.first_token_s = t
            self.tokens_out[wk.model] += produced
        else:
            k = wk.steps
            for s in wk.decoding:
                s.generated += k
                s.kv += k - 1  # the first step's token was reserved at the stretch start
            wk.kv_used += wk.n * (k - 1)
            self._count_stretch_tokens(wk, k)
        finished = [s for s in wk.running if s.generated >= s.output]
        if finished:
            policy = d.policy
            for s in finished:
                wk.running.remove(s)
                wk.kv_used -= s.kv
                s.kv = 0
                d.complete_request((s.row, s.first_token_s, t, OK if s.epoch == d.epoch else ORPHANED, s.output))
                policy.work_done(wk.index)
        self._start_step(wk, t)

    def _count_stretch_tokens(self, wk: Worker, k: int) -> None:
        self.tokens_out[wk.model] += wk.n * k

    def _drop_expired(self, wk: Worker, t: float, policy: Any) -> None:
        """Requests whose client gave up by ``t`` leave (the books count them)."""
        for queue_ in (wk.running, wk.waiting):
            if any(s.deadline <= t for s in queue_):
                gone = [s for s in queue_ if s.deadline <= t]
                for s in gone:
                    queue_.remove(s)
                    wk.kv_used -= s.kv
                    s.kv = 0
                    policy.work_done(wk.index)
