"""Disaggregated prefill and decode: a model's workers split into a prefill pool and a
decode pool (``[models.NAME.disaggregated]``), on top of the ``continuous`` worker model.

A request's path, as llm-d's scheduler and vLLM's KV connectors run it:

1. The router's decider: a prompt of at most ``decider_threshold_tokens`` tokens skips
   the prefill pool and is routed to a decode worker, which serves it whole. Under
   ``decider = "uncached"`` the threshold is held against the prompt's tokens not
   cached on the prefill worker the policy would pick (as llm-d decides on non-cached
   tokens); with ``decider_max_prefill_queue`` a request is sent to prefill only while
   fewer requests than that wait in the prefill pool's queues (as Dynamo's conditional
   disaggregation does). Any other is routed to a prefill worker (by the dispatch
   policy, within the pool: with ``prefix_aware`` the one caching most of its prefix).
2. The prefill worker prefills it as a continuous worker does, its prefix cache
   included (``worker.prefix_cache``: a cached prefix is not prefilled again). At the
   end of the step that completes the prompt it has the request's first token (the
   *prefill TTFT*) and its prefix's new whole blocks go to the worker's cache; the
   request leaves its running set, but the worker keeps the rest of the prompt's KV,
   which still counts against its cache, and its group's cached blocks stay pinned
   until the transfer has read them.
3. The request is handed to a decode worker (the dispatch policy, within the decode
   pool). The decode worker takes handoffs in arrival order at its step starts (and
   at once when asleep): it reserves KV for the whole prompt only when its free KV
   holds it, after evicting unpinned cached prefix blocks if they make enough room
   (and its running requests plus reserved transfers are below
   ``max_num_seqs``); a head that does not fit blocks those behind it, and the
   prefill worker holds the KV all that time, so an undersized decode pool backs up
   into the prefill pool's caches and from there into its waiting queues.
4. The transfer takes prompt tokens x KV bytes per token / ``kv_transfer_gb_s``. Each
   decode worker's link moves one transfer at a time, in the order they were
   reserved. When it ends the prefill worker frees the KV.
5. At the decode worker's next step start the request joins its running set with
   its last prompt position still to run (one prefill token), as vLLM recomputes it
   to get logits: that step's end is the first token the client sees. It then
   decodes as any request.

So the client's TTFT (``ttft_s``, what SLOs are held to) is prefill TTFT + the wait
for room on a decode worker + the transfer + one decode step; at light load the
transfer adds exactly its time to it. TPOT is all the decode pool's. Frames add the
prefill TTFT, the *decode TTFT* (from the prefill worker's token to the client's first
token), transfers in flight, handoffs waiting for room, the prefill pool's backlog
and stranded requests.

Faults: a prefill worker's death loses its requests, and the requests whose KV it was
holding for a transfer (queued or moving) are *stranded*: lost with it. A decode
worker's death loses its running and waiting requests and the handoffs routed to it;
their prefill workers free the KV. A handoff routed to a decode worker that died
since the last health check is lost.

Kept as one module: a handoff's life (reserve, queue on the link, move, land, or be
stranded or cancelled by a fault or a timeout) is one state machine whose steps read
and write the same records on both pools; split up, each piece would need the others'
bookkeeping.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, cast

import numpy as np

from emulator.scenario.pools import kv_bytes_per_token
from emulator.sim.events import KV_TRANSFER_END, PIPELINE_DONE, WORKER_WAKE
from emulator.sim.histogram import LatencyHistogram, frame_percentiles
from emulator.sim.policies import policy_class
from emulator.sim.policies.base import DispatchPolicy, PushPolicy
from emulator.sim.policies.pull import Pull
from emulator.sim.results import DEAD
from emulator.sim.workers import kv_manager as kv
from emulator.sim.workers.continuous import ContinuousWorkers
from emulator.sim.workers.entities import HELD, LANDED, MOVING, QUEUED, STRETCH, Seq, Worker
from emulator.sim.workers.pipeline import PipelineGroup

if TYPE_CHECKING:
    from emulator.scenario.specs import DisaggSpec
    from emulator.sim.engine import Engine
    from emulator.sim.intake import Intake as Dispatcher


# ``Seq.at`` of a handoff: HELD, QUEUED, MOVING, LANDED (``entities.py``).


@dataclass(slots=True, eq=False)
class Handoff:
    """One request moving from a prefill worker to a decode worker."""

    src: Worker
    dst: Worker
    ps: Seq  # the request at the prefill worker
    ds: Seq  # the request at the decode worker
    token_s: float  # when the prefill worker produced its token
    seconds: float  # the transfer's length on the link
    version: int = 0  # bumped when cancelled: its KV_TRANSFER_END is stale


class _PoolView:
    """What a dispatch policy sees of its dispatcher, narrowed to one pool: its
    workers, its name, its scorer weights, its waiting bound and its prefix index
    keys (set by the router after it is made)."""

    def __init__(
        self, dispatcher: Dispatcher, workers: list[int], name: str,
        scorers: tuple[tuple[str, float], ...], queue_limit: int,
    ) -> None:
        self._dispatcher = dispatcher
        self.workers = workers
        self.worker_model = dispatcher.worker_model
        self.pool = name
        self.scorers = scorers
        self.queue_limit = queue_limit
        self.prefix_index: str = dispatcher.prefix_index
        self.prefix_index_capacity: int = dispatcher.prefix_index_capacity
        self.prefix_index_ttl_s: float = dispatcher.prefix_index_ttl_s
        self.session_affinity: bool = dispatcher.session_affinity
        self.session_ttl_s: float = dispatcher.session_ttl_s

    def __getattr__(self, name: str) -> Any:
        return getattr(self._dispatcher, name)


class PoolRouting(DispatchPolicy):
    """A disaggregated model's routing: the decider, then each pool's own policy (its
    ``[pools.NAME]`` policy, else ``dispatcher.policy``) within the prefill pool for
    arrivals and within the decode pool for handoffs. Under a policy that holds
    requests (``pull``) the prefill pool's workers admit from the router's held queue,
    bounded by the prefill pool's ``queue_limit``; a pushing pool's bound counts the
    requests waiting at its workers."""

    name: ClassVar[str] = "pools"
    health_checked = True
    counts_done = True

    def __init__(
        self, sim: Engine, dispatcher: Dispatcher, prefill: DispatchPolicy,
        decode: DispatchPolicy, split: DisaggSpec,
    ) -> None:
        super().__init__(sim, dispatcher)
        self.prefill = prefill
        self.decode = decode
        # Each pool's policy sees a ``_PoolView`` as its dispatcher: read it untyped, as
        # the compiled build checks a declared ``Dispatcher`` at every attribute read.
        pre: Any = cast(Any, prefill).dispatcher
        dec: Any = cast(Any, decode).dispatcher
        self.prefill_workers: list[int] = pre.workers
        self.decode_workers: list[int] = dec.workers
        self.limits: dict[int, int] = {id(prefill): pre.queue_limit, id(decode): dec.queue_limit}
        self.of = {
            **{w: prefill for w in self.prefill_workers},
            **{w: decode for w in self.decode_workers},
        }
        self.threshold = split.decider_threshold_tokens
        self.uncached = split.decider == "uncached"
        self.max_queue = split.decider_max_prefill_queue
        self.skipped = 0  # requests the decider sent straight to the decode pool
        self.skipped_cached = 0  # ... of which, their prompt above the threshold but cached
        self.skipped_queue = 0  # ... of which, with the prefill queue at its bound
        #: The prefill pool's pipeline group (``pipeline.py``; None: no pipelined prefill).
        self.pipe: PipelineGroup | None = None
        #: The prefill pool's workers admit held requests (validation keeps a holding
        #: policy out of the decode pool).
        self.workers_take_held = prefill.workers_take_held  # type: ignore[misc]
        limits = (pre.queue_limit, dec.queue_limit)
        dispatcher.hold_limit = limits[0] if prefill.workers_take_held else 0  # type: ignore[attr-defined]
        dispatcher.held_workers = self.prefill_workers
        dispatcher.bounded = any(limits)

    def prefill_queue(self) -> int:
        """Requests waiting for the prefill pool: at its workers, and under a policy
        that holds requests, in the router's held queue too."""
        waiting = self.workers.waiting_in(self.prefill_workers)
        if self.workers_take_held:
            waiting += len(self.dispatcher.closed)
        return waiting

    def _to_prefill(self, row: int) -> int:
        """The decider: 0 to serve ``row`` whole on the decode pool (1: the prompt is at
        most the threshold; 2: its tokens not cached on the prefill worker the policy
        would pick are; 3: the prefill queue is at its bound), -1 to prefill it."""
        st = self.dispatcher.store
        i = row - st.base
        prompt = st.tokens.item(i)
        if prompt <= self.threshold:
            return 1
        if self.max_queue and self.prefill_queue() >= self.max_queue:
            return 3
        if self.uncached:
            policy = self.prefill
            assert isinstance(policy, PushPolicy), "validation keeps uncached to pushing pools"
            if policy.rotation:
                wk = self.workers.workers[policy.peek(row)]  # type: ignore[attr-defined]
                hit = kv.cached_prefix(wk, st.group.item(i), st.prefix.item(i), prompt)
                if prompt - hit <= self.threshold:
                    return 2
        return -1

    def pool_for(self, row: int) -> list[int]:
        if self._to_prefill(row) >= 0:
            return self.decode_workers
        return self.prefill_workers

    def pool_of(self, row: int) -> tuple[DispatchPolicy, bool]:
        """The pool policy arrival ``row`` goes to, by the decider as ``offer`` decides,
        and whether it is the prefill pool's (SLO-aware admission predicts there)."""
        if self._to_prefill(row) >= 0:
            return self.decode, False
        return self.prefill, True

    def bound_for(self, row: int) -> tuple[int, list[int]]:
        # The pool the decider sends ``row`` to, by the same decision as ``offer``.
        to_decode = self._to_prefill(row) >= 0
        if not to_decode and self.pipe is not None and self._piped(row):
            # (The group's queue is its first stage's: bounded as the pool's workers are.)
            return self.limits[id(self.prefill)], [self.pipe.head.index]
        pool = self.decode if to_decode else self.prefill
        workers = self.decode_workers if to_decode else self.prefill_workers
        if pool.workers_take_held:
            return 0, workers  # bounded at the held queue instead
        return self.limits[id(pool)], workers

    def _piped(self, row: int) -> bool:
        """``row``, bound for the prefill pool, goes to the pipeline group."""
        assert self.pipe is not None
        st = self.dispatcher.store
        return self.pipe.takes(st.tokens.item(row - st.base))

    def offer(self, work: Any) -> bool:
        why = self._to_prefill(work)
        if why < 0:
            if self.pipe is not None and self._piped(work):
                policy = self.prefill
                assert isinstance(policy, PushPolicy), "validation keeps pull out of a piped pool"
                policy.assign(self.pipe.head.index, work)  # (after the proxy hop, if any)
                return True
            return self.prefill.offer(work)
        self.skipped += 1
        if why == 2:
            self.skipped_cached += 1
        elif why == 3:
            self.skipped_queue += 1
        return self.decode.offer(work)

    def pick_decode(self, row: int) -> int | None:
        """The decode worker the handoff of request ``row`` goes to (None: none
        believed alive)."""
        policy = self.decode
        assert isinstance(policy, PushPolicy), "validation allows pushing policies only"
        return policy.pick(row) if policy.rotation else None

    def work_done(self, w: int) -> None:
        self.of[w].work_done(w)

    def worker_idle(self, w: int) -> None:
        policy = self.of[w]
        if isinstance(policy, Pull) and policy.is_idle(w):
            # A prefill worker whose handoffs hold no KV (their whole prompts went to
            # the prefix cache) is idle already; one of their transfers ending must not
            # make it idle twice (an arrival would then be pushed to it while busy).
            return
        policy.worker_idle(w)

    def worker_died(self, w: int) -> None:
        policy = self.of.get(w)  # (a pipeline stage is no pool policy's)
        if policy is not None:
            policy.worker_died(w)

    def worker_restored(self, w: int) -> None:
        policy = self.of.get(w)
        if policy is not None:
            policy.worker_restored(w)

    def health_check(self) -> None:
        self.prefill.health_check()
        self.decode.health_check()


@dataclass(slots=True, eq=False)
class _ModelPools:
    """A disaggregated model's pools and its figures."""

    prefill: list[int]
    decode: list[int]
    seconds_per_token: float  # KV bytes per token / link bytes per second
    stranded: int = 0
    transfers: int = 0  # transfers completed
    handoffs_lost: int = 0  # routed to a dead decode worker, or with none alive
    frame_stranded: int = 0
    prefill_ttft: list[float] | None = None  # this frame's values
    decode_ttft: list[float] | None = None
    transfer: list[float] | None = None
    hist_prefill: LatencyHistogram | None = None
    hist_decode: LatencyHistogram | None = None
    hist_transfer: LatencyHistogram | None = None


class KvHandoffs:
    """Handoffs between a disaggregated model's pools, composed into a continuous
    worker model: its prefill workers hand prefilled requests off, and it moves their
    KV to decode workers (steps 2-5 of the module docstring)."""

    def __init__(self, model: ContinuousWorkers, models: list[int]) -> None:
        self.model = model
        self.workers = model.workers
        self.fleet = model.fleet
        self.queue = model.queue
        sim = model.sim
        scenario = sim.scenario
        names = list(scenario.models)
        pools = self.fleet.pool
        self.pools: dict[int, _ModelPools] = {}
        for m, name in enumerate(names):
            spec = scenario.models[name]
            split = spec.disaggregated
            if split is None or m not in models:
                continue
            mine = [w for w, wm in enumerate(self.fleet.model_list) if wm == m]
            per_token = kv_bytes_per_token(spec)
            assert per_token is not None, "validation requires the KV's size"
            self.pools[m] = _ModelPools(
                prefill=[w for w in mine if pools[w] == split.prefill_workers],
                decode=[w for w in mine if pools[w] == split.decode_workers],
                seconds_per_token=per_token / (split.kv_transfer_gb_s * 1e9),
                prefill_ttft=[], decode_ttft=[], transfer=[], hist_prefill=LatencyHistogram(),
                hist_decode=LatencyHistogram(), hist_transfer=LatencyHistogram(),
            )
            for w in self.pools[m].prefill:
                self.workers[w].hands_off = True
            for w in self.pools[m].decode:
                self.workers[w].takes_held = False
        #: Pipeline groups (``pipeline.py``): by model, and by each stage's index.
        self.groups: dict[int, PipelineGroup] = {}
        self.group_of: dict[int, PipelineGroup] = {}
        for m, name in enumerate(names):
            split = scenario.models[name].disaggregated
            if m in self.pools and split is not None and split.pipeline_threshold_tokens:
                stages = [self.workers[w] for w in self.pools[m].prefill[-split.pipeline_workers:]]
                self.groups[m] = group = PipelineGroup(cast(Any, model), stages, split)
                for wk in stages:
                    self.group_of[wk.index] = group
        if self.groups:
            self.queue.on(PIPELINE_DONE, PipelineGroup.done)
        self.moves: dict[Seq, Handoff] = {}  # by either side's Seq
        self.link_free: dict[int, float] = {}  # when each decode worker's link is free
        self.reserved: dict[int, int] = {}  # transfers a decode worker reserved KV for
        self.wake_pending: set[int] = set()  # workers with a WORKER_WAKE scheduled
        self.queue.on(KV_TRANSFER_END, self._on_transfer_end)
        self.queue.on(WORKER_WAKE, self._on_wake)

    # -- the handoff -----------------------------------------------------------------
    def hand_off(self, wk: Worker, s: Seq, t: float, owned: bool = True) -> None:
        """``s`` finished its prefill on prefill-pool worker ``wk`` at ``t``: its first
        token; it goes to a decode worker, its KV held until the transfer ends.
        (``owned`` False: a pipeline group's prompt, ``wk`` its last stage, out of the
        group's running set already.)"""
        d = wk.router
        pools = self.pools[wk.model]
        s.first_token_s = t
        if owned:
            wk.running.remove(s)
            wk.prefilling.remove(s)
        s.at = HELD  # its KV stays in wk.kv_prefill until the transfer ends
        arrival = d.store.arrival.item(s.row - d.store.base)
        assert pools.prefill_ttft is not None
        pools.prefill_ttft.append(t - arrival)
        routing = d.policy
        assert isinstance(routing, PoolRouting)
        w = routing.pick_decode(s.row)
        if w is None or self.fleet.state[w] == DEAD:
            # Nowhere to go: the request is lost and the prefill worker frees its KV.
            pools.handoffs_lost += 1
            d.lose(s.row, s.row + 1, t)
            self._release(wk, s, t)
            return
        dst = self.workers[w]
        dst.serial += 1
        ds = Seq(s.row, s.prompt, s.output, s.deadline, s.epoch, s.prompt,
                 progress=s.prompt - 1, at=QUEUED, order=dst.serial)
        if ds.deadline < float("inf"):
            heapq.heappush(dst.deadlines, (ds.deadline, ds.order, ds))
        mv = Handoff(wk, dst, s, ds, t, s.prompt * pools.seconds_per_token)
        self.moves[s] = self.moves[ds] = mv
        dst.incoming.append(ds)
        self._wake(dst, t)

    def take(self, wk: Worker, t: float) -> None:
        """Reserve KV for the requests handed to decode worker ``wk`` (in order, while
        they fit) and start their transfers."""
        total, limit = wk.kv_total, wk.spec.max_num_seqs
        incoming = wk.incoming
        while incoming:
            ds = incoming[0]
            reserved = self.reserved.get(wk.index, 0)
            if len(wk.running) + reserved >= limit:
                break
            # Blocks missing for the prompt's KV with the watermark kept free.
            short = kv.blocks(wk, ds.prompt) + wk.wm - (total - wk.kv_used())
            if short > 0 and not (wk.cached and kv.evict_cached(wk, short)):
                break  # (unpinned cached prefix blocks make room if they are enough)
            incoming.popleft()
            ds.kv = ds.prompt
            wk.kv_prefill += kv.blocks(wk, ds.prompt)
            ds.at = MOVING
            self.reserved[wk.index] = reserved + 1
            mv = self.moves[ds]
            start = max(t, self.link_free.get(wk.index, 0.0))
            end = self.link_free[wk.index] = start + mv.seconds
            self.queue.schedule(end, KV_TRANSFER_END, mv, mv.version)

    def _on_transfer_end(self, mv: Handoff, version: int) -> None:
        if version != mv.version:
            return  # cancelled: a fault or a client that gave up
        t = self.queue.now_s
        pools = self.pools[mv.src.model]
        pools.transfers += 1
        assert pools.transfer is not None
        pools.transfer.append(mv.seconds)
        del self.moves[mv.ps]
        self._release(mv.src, mv.ps, t)
        dst, ds = mv.dst, mv.ds
        self.reserved[dst.index] -= 1
        ds.at = LANDED
        dst.landed.append(ds)
        self._wake(dst, t)

    def _release(self, wk: Worker, s: Seq, t: float) -> None:
        """The prefill worker ``wk`` frees the KV it held for ``s``; ``s`` left it."""
        group = self.group_of.get(wk.index) if self.group_of else None
        if group is not None:  # every stage frees its share
            s.at = 0
            group.release(s, t)
            return
        kv.free_held(wk, s)
        s.at = 0
        wk.router.policy.work_done(wk.index)
        if wk.waiting or wk.draining or wk.takes_held and wk.router.policy.workers_take_held:
            # (A draining worker parks once it holds nothing; under a policy that holds
            # requests a worker freed of its KV takes held ones, or is idle again.)
            self._wake(wk, t)

    def _wake(self, wk: Worker, t: float, keep: Worker | None = None) -> None:
        """``wk`` has something new to look at: if asleep, it starts a step at this
        instant once the events already due have run (``WORKER_WAKE``); else at its
        next step start (a decode stretch is cut at the end of the step in progress).
        ``keep`` is a worker in the middle of its own step start (or death): left alone."""
        if wk is keep or self.fleet.state[wk.index] == DEAD:
            return
        if wk.phase == 0:
            if wk.index not in self.wake_pending:  # one wake an instant is enough
                self.wake_pending.add(wk.index)
                self.queue.schedule(t, WORKER_WAKE, wk, None)
        elif wk.phase == STRETCH:
            self.model._cut(wk)

    def _on_wake(self, wk: Worker, _: Any) -> None:
        self.wake_pending.discard(wk.index)
        if wk.phase == 0 and self.fleet.state[wk.index] != DEAD:
            self.model._start_step(wk, self.queue.now_s)

    def _cancel(self, mv: Handoff, t: float, keep: Worker | None = None) -> None:
        """Undo handoff ``mv`` on both sides (each side's policy hears of it, except
        ``keep``'s, whose caller tells it)."""
        mv.version += 1
        self.moves.pop(mv.ps, None)
        self.moves.pop(mv.ds, None)
        src, dst, ps, ds = mv.src, mv.dst, mv.ps, mv.ds
        group = self.group_of.get(src.index) if self.group_of else None
        if ps.at == HELD and group is not None:
            ps.at = 0
            group.release(ps, t)
        elif ps.at == HELD:
            kv.free_held(src, ps)
            ps.at = 0
            if src is not keep:
                src.router.policy.work_done(src.index)
            if src.waiting or src.draining or src.takes_held and src.router.policy.workers_take_held:
                self._wake(src, t, keep)
        if ds.at == QUEUED:
            dst.incoming.remove(ds)
        elif ds.at in (MOVING, LANDED):
            dst.kv_prefill -= kv.blocks(dst, ds.kv)
            if ds.at == MOVING:
                self.reserved[dst.index] -= 1
            else:
                dst.landed.remove(ds)
        if ds.at in (QUEUED, MOVING, LANDED):
            ds.kv = 0
            ds.at = 0
            if dst is not keep:
                dst.router.policy.work_done(dst.index)
            if dst.incoming:
                self._wake(dst, t, keep)

    # -- the continuous model's paths, with handoffs in them ----------------------------
    def drop(self, wk: Worker, s: Seq) -> bool:
        """``s`` leaves ``wk``: True if it was a handoff (now cancelled on both sides),
        False if the continuous model is to drop it (a move it ended is forgotten)."""
        mv = self.moves.get(s)
        if mv is None:
            return False
        if s.at in (HELD, QUEUED, MOVING, LANDED):
            self._cancel(mv, self.queue.now_s, keep=wk)
            return True
        del self.moves[s]  # running at its decode worker
        return False

    def completed(self, wk: Worker, s: Seq) -> None:
        """``s`` completed at ``wk``: a handed-off request's decode TTFT."""
        mv = self.moves.pop(s, None)
        if mv is not None:
            pools = self.pools[wk.model]
            assert pools.decode_ttft is not None
            pools.decode_ttft.append(s.first_token_s - mv.token_s)
            group = self.group_of.get(mv.src.index) if self.group_of else None
            if group is not None:
                d = wk.router
                group.completed(s, d.store.arrival.item(s.row - d.store.base), d)

    def worker_killed(self, wk: Worker) -> None:
        """``wk`` dies (the continuous model then loses what it holds): the handoffs
        from it are stranded, those to it lost."""
        w = wk.index
        now = self.queue.now_s
        d = wk.router
        pools = self.pools.get(wk.model)
        group = self.group_of.get(w) if self.group_of else None
        src = group.tail if group is not None else wk  # a stage's death strands the group's
        touched = [mv for mv in dict.fromkeys(self.moves.values()) if src is mv.src or wk is mv.dst]
        if group is not None:
            group.halted = True  # (no admission while its stranded KV is freed)
        for mv in touched:
            if mv.src is src and mv.ps.at == HELD:
                assert pools is not None
                pools.stranded += 1
                pools.frame_stranded += 1
                d.lose(mv.ps.row, mv.ps.row + 1, now)
                self._cancel(mv, now, keep=wk)
            elif mv.dst is wk and mv.ds.at in (QUEUED, MOVING, LANDED):
                d.lose(mv.ds.row, mv.ds.row + 1, now)
                self._cancel(mv, now, keep=wk)
            elif mv.dst is wk:  # running or waiting there: the continuous model loses it
                self.moves.pop(mv.ps, None)
                self.moves.pop(mv.ds, None)
        if group is not None:
            group.kill(now)
        wk.incoming.clear()
        wk.landed.clear()
        self.reserved.pop(w, None)
        self.link_free.pop(w, None)

    def oldest_row(self, model: int, low: int | None) -> int | None:
        """The oldest of ``low`` and the rows of ``model``'s handoffs."""
        for mv in self.moves.values():
            if mv.src.model == model and (low is None or mv.ps.row < low):
                low = mv.ps.row
        return low


class DisaggregatedWorkers(ContinuousWorkers):
    """The continuous worker model with prefill and decode pools; see the module
    docstring. The engine uses it instead of ``ContinuousWorkers`` when a model is
    disaggregated; the other continuous models run in it unchanged."""

    # (The base's keys are typed as its exact tuple; these extend them.)
    frame_keys = (  # type: ignore[assignment]
        *ContinuousWorkers.frame_keys,
        "prefill_ttft_p50_s",
        "prefill_ttft_p95_s",
        "decode_ttft_p50_s",
        "decode_ttft_p95_s",
        "kv_transfers",
        "handoffs_waiting",
        "prefill_backlog",
        "stranded",
    )
    #: The frame keys a pipeline group adds (``pipeline.py``), only when a model has one.
    pipeline_keys = ("pipelined", "pipelined_prefill_max_s")

    def __init__(self, sim: Engine, models: list[int]) -> None:
        super().__init__(sim, models)
        self.handoffs = KvHandoffs(self, models)
        self.pools = self.handoffs.pools
        self.moves = self.handoffs.moves
        self.groups = self.handoffs.groups
        self.handoff_groups = self.handoffs.group_of
        if self.groups:
            self.keys = (*self.keys, *self.pipeline_keys)

    def assign(self, w: int, work: int) -> None:
        group = self.handoff_groups.get(w) if self.groups else None
        if group is None:
            super().assign(w, work)
        else:
            group.assign(work)

    def routing(self, d: Dispatcher, inner: type[DispatchPolicy]) -> DispatchPolicy:
        """The policy of model ``d``: pool routing for a disaggregated one."""
        pools = self.pools.get(d.index)
        if pools is None:
            return inner(self.sim, d)
        sc = self.sim.scenario
        split = sc.models[d.name].disaggregated
        assert split is not None
        made = []
        group = self.groups.get(d.index)
        prefill = pools.prefill if group is None else pools.prefill[: -group.n]  # (the group's reserved)
        for name, workers in ((split.prefill_workers, prefill), (split.decode_workers, pools.decode)):
            view = _PoolView(d, workers, name, sc.pool_scorers(name), sc.pool_queue_limit(name))
            view.prefix_index, view.prefix_index_capacity, view.prefix_index_ttl_s = sc.pool_prefix_index(name)
            view.session_affinity, view.session_ttl_s = sc.pool_session(name)
            made.append(policy_class(sc.pool_policy(name))(self.sim, view))  # type: ignore[arg-type]
        routing = PoolRouting(self.sim, d, made[0], made[1], split)
        routing.pipe = group
        return routing

    # -- figures ---------------------------------------------------------------------
    def frame_figures(self, model: int) -> dict[str, Any]:
        out = super().frame_figures(model)
        pools = self.pools.get(model)
        if pools is None:
            return {**out, **dict.fromkeys(self.keys[len(ContinuousWorkers.frame_keys):])}
        if self.groups:
            group = self.groups.get(model)
            out.update(group.frame_figures() if group is not None else dict.fromkeys(self.pipeline_keys))
        assert pools.prefill_ttft is not None and pools.decode_ttft is not None
        assert pools.hist_prefill is not None and pools.hist_decode is not None
        pre, dec = np.array(pools.prefill_ttft), np.array(pools.decode_ttft)
        pools.hist_prefill.add(pre)
        pools.hist_decode.add(dec)
        assert pools.hist_transfer is not None and pools.transfer is not None
        pools.hist_transfer.add(np.array(pools.transfer))
        pools.prefill_ttft, pools.decode_ttft, pools.transfer = [], [], []
        p50, p95, _ = frame_percentiles(pre)
        d50, d95, _ = frame_percentiles(dec)
        moving, waiting, backlog = self._in_flight(model)
        out.update(
            prefill_ttft_p50_s=p50,
            prefill_ttft_p95_s=p95,
            decode_ttft_p50_s=d50,
            decode_ttft_p95_s=d95,
            kv_transfers=moving,
            handoffs_waiting=waiting,
            prefill_backlog=backlog,
            stranded=pools.frame_stranded,
        )
        pools.frame_stranded = 0
        return out

    def _in_flight(self, model: int) -> tuple[int, int, int]:
        """``model``'s transfers under way (or landed, not yet taken in), handoffs
        waiting for room on a decode worker, and the prefill pool's backlog: its
        waiting requests plus those handoffs (prefilled, their KV still held)."""
        moving = waiting = 0
        for mv in dict.fromkeys(self.moves.values()):
            if mv.src.model == model:
                moving += mv.ds.at in (MOVING, LANDED)
                waiting += mv.ds.at == QUEUED
        pools = self.pools[model]
        queued = sum(
            len(self.workers[w].waiting) for w in pools.prefill if self.fleet.state[w] != DEAD
        )
        return moving, waiting, queued + waiting

    def pool_summary(self, model: int, tpot_s: dict[str, float | None]) -> dict[str, Any] | None:
        """A disaggregated model's figures for the run summary (None: not one)."""
        pools = self.pools.get(model)
        if pools is None:
            return None
        assert pools.hist_prefill is not None and pools.hist_decode is not None
        assert pools.hist_transfer is not None
        prefill, decode, transfer = LatencyHistogram(), LatencyHistogram(), LatencyHistogram()
        prefill.merge(pools.hist_prefill)
        decode.merge(pools.hist_decode)
        transfer.merge(pools.hist_transfer)
        prefill.add(np.array(pools.prefill_ttft or [], dtype=np.float64))
        decode.add(np.array(pools.decode_ttft or [], dtype=np.float64))
        transfer.add(np.array(pools.transfer or [], dtype=np.float64))
        routing = self.sim.disp[model].policy
        split = self.sim.scenario.models[self.sim.names[model]].disaggregated
        assert isinstance(routing, PoolRouting) and split is not None
        moving, waiting, backlog = self._in_flight(model)
        group = self.groups.get(model)
        return {
            **({"pipeline": group.summary(self.sim.scenario.duration_s)} if group is not None else {}),
            "prefill_pool": split.prefill_workers,
            "decode_pool": split.decode_workers,
            "prefill_ttft_s": prefill.stats(),
            "decode_ttft_s": decode.stats(),
            "decode_tpot_s": dict(tpot_s),
            "transfer_s": transfer.stats(),
            "transfers": pools.transfers,
            "transfers_in_flight_end": moving,
            "handoffs_waiting_end": waiting,
            "prefill_backlog_end": backlog,
            "stranded": pools.stranded,
            "handoffs_lost": pools.handoffs_lost,
            "skipped_prefill": routing.skipped,
            "skipped_prefill_cached": routing.skipped_cached,
            "skipped_prefill_queue": routing.skipped_queue,
        }
