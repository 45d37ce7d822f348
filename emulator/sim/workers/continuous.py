"""The ``continuous`` worker model: iteration-level batching with a KV cache, as engines
such as vLLM, SGLang and TensorRT-LLM serve.

Each worker keeps a waiting queue and a running list (in admission order) and, while it
has work, runs steps back to back; a sleeping worker handed a request starts a step at
that instant, after every request arriving then. At the start of a step at time t:

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

With ``worker.speculative`` a decode-only step is a verification step whose expected
tau tokens a decoder are given one at a time (``step_cost.py``: each such step lasts
the verification and the draft over tau); ``spec_figures.py`` counts the decode tokens
by the kind of step that gave them.

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

The parts, each in its own module: the entities (``entities.py``: a request at a
worker, a worker's state), the KV manager (``kv_manager.py``: reserve, grow, free,
evict cached blocks, choose what to preempt), the scheduler (``scheduler.py``: steps
1-4, planning one step and returning it), the step cost (``step_cost.py``: linear and
roofline, step 5) and the closed-form decode stretch (``stretch.py``). This module
ties them: requests in, steps scheduled as events, completions out. Prefix caching is
the prefix cache (``prefix_cache.py``) the KV manager consults; disaggregated serving
(``disaggregated.py``) adds handoffs between pools.

Kept as one module: what is left here is the event loop of one worker model (admit,
start a step or a stretch, end it, complete, fail), whose handlers share the worker's
state and each other's invariants; the mechanisms it calls are in the modules above.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any

from emulator.scenario import Scenario, WorkerSpec
from emulator.scenario.step_table import load_step_table
from emulator.sim.events import STEP_END, STEP_START
from emulator.sim.histogram import GapBook
from emulator.sim.requests import OK, ORPHANED
from emulator.sim.results import BUSY, DEAD, IDLE, PARKED
from emulator.sim.workers import gaps, kv_tiers
from emulator.sim.workers import kv_manager as kv
from emulator.sim.workers.entities import (
    ASLEEP,
    GONE,
    INF,
    RUNNING,
    STEP,
    STRETCH,
    WAITING,
    WAKING,
    Seq,
    Worker,
)
from emulator.sim.workers.moe_figures import MOE_FRAME_KEYS, MoeFigures
from emulator.sim.workers.prefix_cache import PrefixCache
from emulator.sim.workers.prefix_figures import PrefixFigures
from emulator.sim.workers.scheduler import Scheduler
from emulator.sim.workers.spec_figures import SPEC_FRAME_KEYS, SpecFigures
from emulator.sim.workers.step_cost import step_time
from emulator.sim.workers.stretch import first_step_ending_at_or_after, plan_stretch

if TYPE_CHECKING:
    from emulator.sim.engine import Engine
    from emulator.sim.router import Router
    from emulator.sim.workers.disaggregated import KvHandoffs

class ContinuousWorkers(PrefixFigures):
    """Iteration-level batching with a KV cache; see the module docstring."""

    name = "continuous"
    token_level = True
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
        costs: dict[int, tuple[WorkerSpec, tuple[float, float, float, float, float] | None,
                               list[float] | None]] = {}
        tables: dict[int, tuple[list[float], list[float], list[float], float]] = {}
        stores: dict[tuple[int, str | None], list[kv_tiers.Tier]] = {}  # shared tiers, by model and pool
        for w, m in enumerate(self.fleet.model_list):
            if m in models:
                if m not in costs:  # once per model, not per worker: exact arithmetic is not free
                    costs[m] = self._costs(scenario, names[m])
                spec, roof, wtab = costs[m]
                wk = self.workers[w] = Worker(w, m, spec, sim.disp[m])  # type: ignore[arg-type]
                if roof is not None:
                    wk.roofline = True
                    wk.r_weights, wk.r_kv, wk.r_token, wk.r_fixed, wk.r_comm = roof
                    wk.r_wtab = wtab
                if spec.step_model == "table":
                    if m not in tables:
                        assert spec.step_table is not None, "validation requires the table"
                        a, b, prefill = load_step_table(spec.step_table).lookups(
                            spec.max_num_seqs, spec.max_batched_tokens)
                        tables[m] = (a, b, prefill, load_step_table(spec.step_table).e)
                    wk.table = tables[m]
                if spec.prefix_cache:
                    if spec.kv_tiers:
                        wk.tier = kv_tiers.build(kv_tiers.tier_specs(scenario, names[m]), spec.block_tokens,
                                                 stores.setdefault((m, self.fleet.pool[w]), []))
                        wk.tier_block = spec.block_tokens
                    wk.cache = PrefixCache(spec.block_tokens, wk.tier)
                wk.blk = spec.kv_block_tokens
                wk.kv_total = spec.kv_blocks
                wk.wm = spec.kv_watermark_blocks
                wk.dcnt = [0] * wk.blk
                wk.prefill_first = spec.scheduler == "prefill_first"
                wk.track_gaps = scenario.slo.tbt_s is not None
                wk.gap_out = sim.disp[m].tbt.pairs.append  # type: ignore[union-attr]
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
        self.queue.on(STEP_START, self._on_step_start)
        self.init_prefix_figures(scenario, n_models)
        #: Speculative decoding's counts (``spec_figures.py``), when a model speculates.
        self.spec = SpecFigures(scenario)
        if self.spec.on:
            self.keys = (*self.keys, *SPEC_FRAME_KEYS)
        mixtures = {m for m, (_, _, wtab) in costs.items() if wtab is not None}
        #: The mixtures of experts' frame figures (None: no model is one).
        self.moe = MoeFigures(scenario, names, mixtures) if mixtures else None
        if mixtures:
            self.keys = (*self.keys, *MOE_FRAME_KEYS)
        self.scheduler = Scheduler(self)
        #: Disaggregated serving's handoffs between pools (``disaggregated.py``), when
        #: a model is split: only then does a worker hand off or take handoffs in.
        self.handoffs: KvHandoffs | None = None

    @staticmethod
    def _costs(scenario: Scenario, name: str
               ) -> tuple[WorkerSpec, tuple[float, float, float, float, float] | None, list[float] | None]:
        """A model's worker spec and, under the roofline, its five step coefficients
        (weights read, one KV token read, one token computed, a step's fixed cost, one
        token's communication) and, for a mixture of experts, the weights term by the
        step's tokens (up to a full token budget plus a full batch of decoders)."""
        spec = scenario.worker_for(name)
        roof = scenario.roofline_for(name) if spec.step_model == "roofline" else None
        if roof is None:
            return spec, None, None
        wtab = roof.weights_read_table(spec.max_batched_tokens + spec.max_num_seqs) if roof.moe else None
        return spec, (float(roof.weights_read_s), float(roof.kv_token_read_s), float(roof.token_compute_s),
                      float(roof.fixed_step_s), float(roof.comm_token_s)), wtab

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
        seq = self.new_seq(wk, d, work)
        seq.at = WAITING
        wk.waiting.append(seq)
        wk.shown_waiting = self.fleet.backlog[w] = len(wk.waiting)
        if wk.phase == ASLEEP:
            # Its step starts at this instant, after every request arriving now.
            wk.phase = WAKING
            wk.version += 1
            self.queue.schedule(self.queue.now_s, STEP_START, wk, wk.version)
        elif wk.phase == STRETCH:
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
        best_t = INF
        for w in d.held_workers:
            wk = self.workers[w]
            if wk.draining or wk is caller:
                continue
            if wk.phase == STEP and now < wk.t_end < best_t:
                # It looks at its next step start anyway (one whose step ends now is
                # the worker starting its next step, which has just looked).
                best, best_t = None, wk.t_end
            elif wk.phase == STRETCH and wk.n < wk.spec.max_num_seqs and not wk.waiting:
                # (A waiting request of its own did not fit when the stretch began and
                # fits no better before it ends: it blocks the held ones.)
                k = min(first_step_ending_at_or_after(wk, now), wk.steps)
                # Its next step start admits before the decoders grow under
                # prefill_first, after they grow under mixed.
                free = wk.kv_total - wk.kv_at(wk.clock + k + (0 if wk.prefill_first else wk.ahead))
                room = need
                if wk.cache is not None:  # its cached prefix and the blocks it may evict
                    hit = kv.cached_prefix(wk, group, prefix, need)
                    room -= hit
                    free += wk.cache.evictable(group, hit // wk.cache.block) // wk.blk
                t = wk.stretch_end(k)
                if free - kv.blocks(wk, room) >= wk.wm and t < best_t:
                    best, best_t = wk, t
        if best is not None:
            self._cut(best)

    def kill(self, w: int) -> bool:
        if self.fleet.state[w] > BUSY:  # dead already, or not serving
            return False
        wk = self.workers[w]
        if self.handoffs is not None:
            self.handoffs.worker_killed(wk)
        d = self._router(wk.model)
        now = self.queue.now_s
        if wk.phase == STRETCH:
            self.tokens_out[wk.model] += wk.n * wk.steps_by(now)
            if self.spec.on:
                self.spec.verified[wk.model] += wk.n * wk.steps_by(now)
        for seq in (*wk.running, *wk.waiting):
            d.lose(seq.row, seq.row + 1, now)
            seq.at = GONE
        wk.running.clear()
        wk.prefilling.clear()
        wk.waiting.clear()
        wk.finishing.clear()
        wk.deadlines.clear()
        wk.chunks = []
        wk.n_dec = wk.dec_base = wk.kv_prefill = wk.ahead = wk.cached = wk.dq = 0
        wk.dcnt = [0] * wk.blk
        wk.fresh.clear()
        wk.gstack.clear()
        if wk.cache is not None:
            wk.cache.clear()  # (its tiers too)
        wk.load_due = 0.0
        wk.version += 1
        wk.phase = ASLEEP
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
        return low if self.handoffs is None else self.handoffs.oldest_row(model, low)

    def frame_figures(self, model: int) -> dict[str, Any]:
        now = self.queue.now_s
        d = self._router(model)
        running = waiting = kv = capacity = busy = 0
        tokens = self.tokens_out[model]
        for w in d.workers:
            wk = self.workers[w]
            if self.fleet.state[w] > BUSY:  # dead, warming up or parked
                continue
            capacity += wk.kv_total
            running += len(wk.running)
            waiting += len(wk.waiting)
            if wk.phase:
                busy += 1
            if wk.phase == STRETCH:
                done = wk.steps_by(now)
                kv += wk.kv_at(wk.clock + wk.ahead + done)
                tokens += wk.n * done
            else:
                kv += wk.kv_used()
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
        if self.spec.on:
            out.update(self.spec.figures(model, self.spec.verified[model] + (tokens - self.tokens_out[model])))
        if self.moe is not None:
            self.moe.add(model, [wk for wk in self.workers.values() if wk.model == model], out)
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
        return self._empty(wk)

    @staticmethod
    def _empty(wk: Worker) -> bool:
        """``wk`` holds no request: none running or waiting, and (in a split model's
        pools) no handoff coming in and no KV held for one (``kv_prefill`` of a worker
        with nothing running is KV kept for handoffs or reserved for transfers)."""
        return not wk.running and not wk.waiting and not wk.incoming and not wk.landed and not wk.kv_prefill

    def park(self, w: int) -> None:
        """Worker ``w`` (alive and empty, or dead) stops: its slot waits parked."""
        wk = self.workers[w]
        wk.draining = False
        if self.fleet.state[w] <= BUSY:
            self.alive[wk.model] -= 1
        wk.version += 1
        wk.phase = ASLEEP
        wk.busy = False
        self.fleet.state[w] = PARKED

    def frame_done(self) -> None:
        self._last_frame_s = self.queue.now_s

    def worker_figures(self, w: int) -> tuple[float, int]:
        """Worker ``w``'s KV in use (fraction) and running sequences, now."""
        wk = self.workers[w]
        if wk.phase == STRETCH:
            used = wk.kv_at(wk.clock + wk.ahead + wk.steps_by(self.queue.now_s))
        else:
            used = wk.kv_used()
        return used / wk.kv_total, len(wk.running)

    def open_gaps(self, model: int) -> GapBook:
        """The times between tokens of ``model``'s stretches in progress, for steps
        that ended by now (booked when the stretch ends)."""
        book = GapBook()
        now = self.queue.now_s
        for w in self._router(model).workers:
            ones, runs = gaps.so_far(self.workers[w], now)
            for gap, count in ones:
                book.add(gap, count)
            for run in runs:
                book.add_run(*run)
        return book

    def tokens_generated(self, model: int) -> int:
        """Output tokens ``model``'s workers generated so far (stretches included)."""
        now = self.queue.now_s
        total = self.tokens_out[model]
        for w in self._router(model).workers:
            wk = self.workers[w]
            if wk.phase == STRETCH:
                total += wk.n * wk.steps_by(now)
        return total

    # -- requests --------------------------------------------------------------------
    def _router(self, model: int) -> Router:
        return self.sim.disp[model]  # type: ignore[return-value]

    def new_seq(self, wk: Worker, d: Router, row: int) -> Seq:
        st, i = d.store, row - d.store.base
        prompt = st.tokens.item(i)
        wk.serial += 1
        seq = Seq(
            row, prompt, st.output.item(i), INF, d.epoch, prompt, order=wk.serial,
            group=st.group.item(i), prefix=st.prefix.item(i),
        )
        if self.timeout is not None:
            seq.deadline = st.arrival.item(i) + self.timeout
            heapq.heappush(wk.deadlines, (seq.deadline, seq.order, seq))
        return seq

    def _drop(self, wk: Worker, s: Seq) -> None:
        """``s`` leaves ``wk`` (running, waiting, or a handoff in either pool), freeing
        its KV."""
        if self.handoffs is not None and self.handoffs.drop(wk, s):
            return
        if s.at == WAITING:
            wk.waiting.remove(s)
        elif s.at == RUNNING:
            wk.running.remove(s)
            kv.free(wk, s)
        s.kv = 0
        s.at = GONE

    def _complete(self, wk: Worker, s: Seq, t: float, d: Router) -> None:
        if self.handoffs is not None:
            self.handoffs.completed(wk, s)
        self._drop(wk, s)
        d.complete_request(
            (s.row, s.first_token_s, t, OK if s.epoch == d.epoch else ORPHANED, s.output, s.max_gap)
        )
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
            s.at = RUNNING
            wk.running.append(s)
            wk.prefilling.append(s)
        wk.landed.clear()

    # -- steps -----------------------------------------------------------------------
    def _start_step(self, wk: Worker, t: float) -> None:
        """Start worker ``wk``'s next step at ``t`` as the scheduler plans it, or a
        stretch of decode steps, or put it to sleep."""
        if wk.deadlines and wk.deadlines[0][0] <= t:
            self._drop_expired(wk, t, wk.router)
        if wk.landed:
            self._take_landed(wk)
        chunks = self.scheduler.plan(wk, t)
        if len(wk.waiting) != wk.shown_waiting:  # numpy writes cost: only on a change
            wk.shown_waiting = self.fleet.backlog[wk.index] = len(wk.waiting)
        if not wk.running:
            wk.phase = ASLEEP
            wk.chunks = []
            wk.busy = False
            self.fleet.state[wk.index] = IDLE
            if wk.draining:
                # (Nothing runs; in a split model's pools it may still hold KV for a
                # handoff, or have one coming in: it parks once those are done.)
                if not (wk.incoming or wk.landed or wk.kv_prefill):
                    self.sim.scaler_of[wk.index].drained(wk.index)
                return
            if wk.hands_off and (wk.waiting or wk.kv_prefill):
                # A prefill worker whose cache holds handoffs' KV is blocked, not idle:
                # it looks again when a transfer frees its KV.
                return
            wk.router.policy.worker_idle(wk.index)
            return
        if not wk.busy:
            wk.busy = True
            self.fleet.state[wk.index] = BUSY
        wk.t0 = t
        wk.chunks = chunks
        if chunks:
            if wk.load_due:  # tier loads of its admissions come before the step computes
                load, wk.load_due = wk.load_due, 0.0
                self._schedule(wk, STEP, t + load + step_time(wk, chunks))
                return
            self._schedule(wk, STEP, t + step_time(wk, chunks))
            return
        self._schedule(wk, STRETCH, plan_stretch(wk, t))

    def _on_step_start(self, wk: Worker, version: int) -> None:
        if version == wk.version and wk.phase == WAKING:
            self._start_step(wk, self.queue.now_s)

    def _schedule(self, wk: Worker, phase: int, t_end: float) -> None:
        wk.phase = phase
        wk.t_end = t_end
        wk.version += 1
        self._schedule_end(t_end, wk, wk.version)

    def _cut(self, wk: Worker) -> None:
        """End ``wk``'s stretch at the end of the step in progress."""
        k = first_step_ending_at_or_after(wk, self.queue.now_s)
        if k < wk.steps:
            wk.steps = k
            self._schedule(wk, STRETCH, wk.stretch_end(k))

    def _on_step_end(self, wk: Worker, version: int) -> None:
        if version != wk.version:
            return  # replaced (a cut stretch) or the worker died
        t = self.queue.now_s
        d = wk.router
        decoded = wk.ahead  # the step ran the decoders (none wait under prefill_first)
        wk.ahead = 0
        if wk.phase == STEP:
            produced = wk.n_dec if decoded else 0
            if wk.r_wtab is not None and produced and not wk.chunks:
                wk.moe_steps += 1
                wk.moe_w += wk.r_wtab[produced]
            if produced:
                if self.spec.on:
                    self.spec.plain[wk.model] += produced
                wk.clock += 1
                if wk.fresh or wk.track_gaps:
                    gaps.decode_step(wk, t, produced)
                else:  # every decoder's gap since the last decode step (gaps.decode_step)
                    wk.gap_out((t - wk.t_dec, produced))
                    wk.t_dec = t
            for s, c in wk.chunks:
                s.progress += c
                if s.progress == s.target:
                    if wk.cache is not None:
                        kv.insert_prefix(wk, s)
                    if wk.hands_off:
                        self.handoffs.hand_off(wk, s, t)  # type: ignore[union-attr]
                        continue
                    gaps.first_after_pause(wk, s, t)
                    s.generated += 1
                    produced += 1
                    if s.first_token_s < 0:
                        s.first_token_s = t
                    if s.generated >= s.output:
                        self._complete(wk, s, t, d)
                    else:
                        kv.join(wk, s)
            wk.chunks = []
        else:
            wk.clock += wk.steps
            produced = wk.n * wk.steps
            if self.spec.on:
                self.spec.verified[wk.model] += produced
            if wk.r_wtab is not None:
                wk.moe_steps += wk.steps
                wk.moe_w += wk.steps * wk.r_wtab[wk.n]
            gaps.stretch(wk, t)
        self.tokens_out[wk.model] += produced
        finishing = wk.finishing
        while finishing and finishing[0][0] <= wk.clock:
            finish, _, s = heapq.heappop(finishing)
            if s.join >= 0 and s.join + s.output - s.generated == finish:
                self._complete(wk, s, t, d)
        self._start_step(wk, t)
