"""The engine: runs a scenario as a discrete-event simulation in simulated time.

Events are per batch, per fault and per frame, never per request: arrivals are
generated in bulk a chunk ahead (``emulator.sim.arrivals``), a batch is a range of one
model's arrivals (``emulator.sim.dispatcher``), and a batch's requests are booked in bulk
with numpy when it completes. Randomness comes from numpy Generators seeded from the
scenario's seed (or the one given), so a run is a pure function of scenario and seed.

Behaviour worth knowing (ARCHITECTURE.md, "The emulator's model", is the spec):

* A client whose request timed out, was lost or orphaned re-sends it
  ``retry_backoff_s`` after its deadline, up to ``client.retries`` times (with no
  timeout it never notices a loss); a shed request is re-sent ``retry_backoff_s``
  after the refusal. A retry is a new offered request (``retried`` counts them), and
  its latency is measured from its own send.
* ``round_robin`` and ``least_loaded`` learn which workers are alive only at health
  checks (every ``dispatcher.health_check_s``): until then a batch pushed to a dead
  worker is lost, and a restored worker rejoins the rotation at the next check.
  ``least_loaded`` pushes to the worker with the fewest batches it pushed and has not
  heard back about. ``pull`` workers take the oldest closed batch when idle.
* A dispatcher's death pauses dispatching for ``failover_s`` (the standby accepts and
  batches requests meanwhile). With ``standby = "cold"`` its open batch and held
  batches are lost, and batches already at workers come back orphaned. ``restore
  dispatcher:M`` ends a pending failover at once.
* A host's (or worker's) death loses the batch in service and the worker's private
  queue; ``restore`` brings the workers back idle.
* ``set_qps(x)`` makes the traffic constant at ``x`` from the current simulated time.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from emulator.scenario import Scenario, ScenarioError
from emulator.scenario.checks import check_target
from emulator.sim import events as ev
from emulator.sim.arrivals import ArrivalSource, chunk_length
from emulator.sim.dispatcher import Batch, ClosePlan, Counts, Dispatcher
from emulator.sim.events import CLOSE, DONE
from emulator.sim.fleet import Fleet, ServiceTime
from emulator.sim.histogram import LatencyHistogram, frame_percentiles
from emulator.sim.requests import OK, ORPHANED
from emulator.sim.results import BUSY, COUNT_KEYS, DEAD, FRAME_KEYS, IDLE, Frame, Outcomes, Summary

#: A model's request store is compacted once it holds more rows than this.
COMPACT_ROWS = 50_000


class Engine:
    """A running simulation of one scenario; see the module docstring."""

    def __init__(self, scenario: Scenario, seed: int | None = None) -> None:
        self.scenario = scenario
        self.seed = scenario.seed if seed is None else seed
        self.duration_s = scenario.duration_s
        self.sample_s = scenario.sample_s
        self.now_s = 0.0
        self._target = 0.0  # how far the current advance_to may go
        self.wall_s = 0.0
        arrivals_rng, service_rng = (
            np.random.Generator(np.random.PCG64(s))
            for s in np.random.SeedSequence(self.seed).spawn(2)
        )
        self.source = ArrivalSource(scenario, arrivals_rng)
        self.service = ServiceTime(scenario, service_rng)
        self.names = list(scenario.models)
        self.disp = [
            Dispatcher(i, scenario.models[n], scenario, self.source)
            for i, n in enumerate(self.names)
        ]
        self.fleet = Fleet(scenario)
        for w, m in enumerate(self.fleet.model_list):
            d = self.disp[m]
            d.workers.append(w)
            d.idle.append(w)
            d.alive += 1
        self.local_index = [0] * len(self.fleet)
        for d in self.disp:
            for local, w in enumerate(d.workers):
                self.local_index[w] = local
        self.policy = scenario.dispatcher.policy
        self.pull = self.policy == "pull"
        self.least_loaded = self.policy == "least_loaded"
        for d in self.disp:
            d.rotation = list(d.workers)
            d.ll_out = np.zeros(len(d.workers))
            if not self.pull:
                d.idle.clear()
        self.failover_s = scenario.dispatcher.failover_s
        self.cold = scenario.dispatcher.standby == "cold"
        self.queue = ev.EventQueue()
        span = chunk_length(scenario)
        self.chunks_per_s = round(1.0 / span)
        self.chunk_end_s = 0.0
        self.frame_index = 0
        self.frame_events: list[str] = []
        self.queue.push(0.0, ev.CHUNK, 0)
        self.queue.push(min(self.sample_s, self.duration_s), ev.FRAME, 0)
        for fault in scenario.faults:
            self.queue.push(fault.at_s, ev.FAULT, fault.command())
        if not self.pull:
            self.queue.push(scenario.dispatcher.health_check_s, ev.HEALTH)

    # -- public API ------------------------------------------------------------------
    @property
    def done(self) -> bool:
        """True once the run reached its duration."""
        return self.now_s >= self.duration_s

    def advance_to(self, t_sim: float) -> list[Frame]:
        """Run up to simulated time ``t_sim`` (never past the duration); return the frames
        completed on the way."""
        started = time.perf_counter()
        target = min(t_sim, self.duration_s)
        self._target = target
        frames: list[Frame] = []
        heap = self.queue.heap
        handlers = self._handlers
        pop = heapq.heappop
        close, done, frame = ev.CLOSE, ev.DONE, ev.FRAME
        processed = 0
        # The hot loop: completions and batch closes are dispatched without a lookup.
        while heap and heap[0][0] <= target:
            t, _, _, kind, a, b = pop(heap)
            processed += 1
            self.now_s = t
            if kind == done:
                self._on_done(a, b)
            elif kind == close:
                self._on_close(a, b)
            elif kind == frame:
                frames.append(self._frame(a))
            else:
                handlers[kind](self, a, b)
        self.queue.processed += processed
        self.now_s = max(self.now_s, target)
        self.wall_s += time.perf_counter() - started
        return frames

    def run(self) -> Summary:
        """Run to the end and return the summary (frames are built and dropped)."""
        step = max(self.sample_s * 50, 1.0)
        while not self.done:
            self.advance_to(self.now_s + step)
        return self.summary()

    def inject(self, command: str) -> None:
        """Apply a live command at the current simulated time: ``kill host:2``,
        ``restore host:2``, ``kill dispatcher:small``, ``kill worker:big:3``...
        Raises ScenarioError for a command it does not understand."""
        action, _, target = command.strip().partition(" ")
        if action not in ("kill", "restore"):
            raise ScenarioError(
                "command",
                f'"{command}" is not a command',
                'write "kill host:2" or "restore dispatcher:small"',
            )
        check_target(target.strip(), self.scenario, "command")
        self._apply(f"{action} {target.strip()}")

    def set_qps(self, qps: float) -> None:
        """Make the offered load constant at ``qps`` from the current simulated time."""
        if (
            not isinstance(qps, int | float)
            or isinstance(qps, bool)
            or not 0 <= qps < float("inf")
        ):
            raise ScenarioError(
                "qps", f"{qps!r} is not a rate", "give a number of requests per second, 0 or more"
            )
        now = self.now_s
        self.source.qps_override = float(qps)
        self.frame_events.append(f"set qps {qps:g}")
        for d in self.disp:
            d.book_done()
            d.ingest(now)
        if self.chunk_end_s <= now:
            return  # the next chunk will use the new rate
        # Withdraw the fresh arrivals generated beyond now, and draw them again.
        window = int(now * self.chunks_per_s) // self.chunks_per_s
        fresh = self.source.fresh(now, self.chunk_end_s)
        kept = []
        for d in self.disp:
            st, b = d.store, d.store.base
            lo, hi = d.ingested - b, st.end - b
            retry = st.attempt[lo:hi] > 0
            self.source.release(st.ctr[lo:hi][~retry])
            kept.append(
                tuple(
                    getattr(st, f)[lo:hi][retry].copy()
                    for f in ("arrival", "tokens", "attempt", "key", "ctr")
                )
            )
            st.truncate(d.ingested)
            gs = d.gw_shed
            if gs is not None:
                # Entries before gw_pos were offered already; later fresh ones are withdrawn.
                d.gw_shed = gs.select((np.arange(gs.time.size) < d.gw_pos) | (gs.attempt > 0))
        if self.source.limit:
            self.source.rate_limit(fresh, window)
        for d, (arrival, tokens, attempt, key, ctr) in zip(self.disp, kept, strict=True):
            mine = fresh.select(fresh.model == d.index)
            adm = mine.select(mine.admitted)
            t_all = np.concatenate([arrival, adm.time])
            order = np.argsort(t_all, kind="stable")
            d.store.append(
                t_all[order],
                np.concatenate([tokens, adm.tokens])[order],
                np.concatenate([attempt, adm.attempt])[order],
                np.concatenate([key, adm.key])[order],
                np.concatenate([ctr, adm.ctr])[order],
            )
            shed = mine.select(~mine.admitted)
            if shed.time.size:
                d.add_arrivals(shed)
            self._replan(d)

    def layout(self) -> dict[str, Any]:
        """Models, hosts and workers (in layout order), JSON-safe."""
        return self.fleet.layout(self.names)

    def summary(self) -> Summary:
        """The books so far (final once ``done``)."""
        now = self.now_s
        per_model: dict[str, Outcomes] = {}
        fleet_hist = LatencyHistogram()
        fleet = Summary()
        for d in self.disp:
            d.book_done()
            d.ingest(now)
            d.sweep(now)
            counts = Counts()
            counts.add(d.total)
            counts.add(d.frame)
            hist = LatencyHistogram()
            hist.merge(d.hist)
            for lat in d.latencies:
                hist.add(lat)
            fleet_hist.merge(hist)
            out = _outcomes(counts, d.in_system(), now, hist)
            per_model[d.name] = out
            for key in (
                "offered",
                "ok",
                "timed_out",
                "shed",
                "lost",
                "orphaned",
                "in_system_end",
                "wasted_batches",
                "retried",
            ):
                setattr(fleet, key, getattr(fleet, key) + getattr(out, key))
        fleet.served_qps = fleet.ok / now if now > 0 else 0.0
        fleet.latency_s = fleet_hist.stats()
        fleet.per_model = per_model
        fleet.sim_s = now
        fleet.wall_s = self.wall_s
        fleet.events = self.queue.processed
        return fleet

    # -- arrivals and batching -----------------------------------------------------------
    def _on_chunk(self, k: int, _: Any) -> None:
        t0 = k / self.chunks_per_s
        t1 = min((k + 1) / self.chunks_per_s, self.duration_s)
        for d in self.disp:
            d.book_done()
            d.ingest(t0)
            d.sweep(t0)
        per_model = self.source.chunk(t0, t1, k // self.chunks_per_s)
        self.chunk_end_s = t1
        for d in self.disp:
            d.add_arrivals(per_model[d.index])
            if len(d.store) > COMPACT_ROWS:
                low = self._oldest_row(d)
                if d.timeout is not None and low > d.swept:
                    d.swept = low  # the rows skipped are final and need no visit
                d.store.compact(low)
            if d.plan is None or not d.plan[1]:
                self._replan(d)
        if t1 < self.duration_s:
            self.queue.push(t1, ev.CHUNK, k + 1)

    def _oldest_row(self, d: Dispatcher) -> int:
        """First store row still needed: in a batch somewhere, or not yet past its deadline."""
        low = min(d.open_start, d.first_needed_row())
        if d.closed:  # held in order of closing: the first is the oldest
            low = min(low, d.closed[0][0])
        fleet = self.fleet
        for w in d.workers:
            batch = fleet.batch[w]
            if batch is not None and batch[0] < low:
                low = batch[0]
            q = fleet.queue[w]
            if q and q[0][0] < low:  # a worker's queue is in order of pushing
                low = q[0][0]
        return low

    def _replan(self, d: Dispatcher) -> None:
        plan = d.make_plan()
        if plan is not None:
            t = plan[0] if plan[0] > self.now_s else self.now_s
            heapq.heappush(
                self.queue.heap, (t, 1, next(self.queue.seq), ev.CLOSE, d.index, d.plan_version)
            )

    def _on_close(self, m: int, version: int) -> None:
        d = self.disp[m]
        if version != d.plan_version or d.plan is None:
            return
        heap = self.queue.heap
        fleet = self.fleet
        seq = self.queue.seq
        constant_s = self.service.constant_s
        plan: ClosePlan | None = d.plan
        while plan is not None:
            now = self.now_s
            if plan[1] and d.simple and d.gw_shed is None:
                batch = d.close_full(plan[2])
                if self.pull and d.idle and not d.paused:  # the hot path, inlined
                    w = d.idle.popleft()
                    fleet.batch[w] = batch
                    fleet.state[w] = BUSY
                    d.busy += 1
                    d.in_service += batch[2]
                    service_s = constant_s or self.service.draw(batch[3])
                    heapq.heappush(heap, (now + service_s, 1, next(seq), DONE, w, fleet.version[w]))
                else:
                    self._dispatch(d, batch)
                plan = d.plan_after_full()
            else:
                if plan[1]:
                    # The rows up to the cut are known to have arrived by now.
                    if d.gw_shed is not None:
                        d.ingest_gateway(now)
                    d.take(plan[2])
                    end = plan[3]
                else:
                    d.ingest(now)
                    end = d.ingested
                if d.open_count > (1 if end < d.ingested else 0):
                    self._dispatch(d, d.cut(end))
                plan = d.make_plan()
            if plan is None:
                return
            t = plan[0] if plan[0] > now else now
            if t <= self._target and (not heap or t < heap[0][0]):
                # This model's next close comes before every other event: take it now
                # rather than through the heap (same order, fewer heap operations).
                self.now_s = t
                self.queue.processed += 1
                continue
            heapq.heappush(heap, (t, 1, next(seq), CLOSE, m, d.plan_version))
            return

    # -- dispatching -----------------------------------------------------------------
    def _dispatch(self, d: Dispatcher, batch: Batch) -> None:
        if not d.paused:
            if self.pull:
                if d.idle:
                    self._start(d.idle.popleft(), batch)
                    return
            elif d.rotation:
                self._push(d, batch)
                return
        d.closed.append(batch)
        d.closed_reqs += batch[2]

    def _push(self, d: Dispatcher, batch: Batch) -> None:
        if self.policy == "round_robin":
            w = d.rotation[d.rr_next % len(d.rotation)]
            d.rr_next = (d.rr_next + 1) % len(d.rotation)
        else:
            local = int(np.argmin(d.ll_out))
            d.ll_out[local] += 1
            w = d.workers[local]
        fleet = self.fleet
        state = fleet.state[w]
        if state == DEAD:
            d.lose(batch[0], batch[1], self.now_s)
        elif state == BUSY:
            fleet.queue[w].append(batch)
            fleet.backlog[w] += 1
            d.backlog_reqs += batch[2]
        else:
            self._start(w, batch)

    def _start(self, w: int, batch: Batch) -> None:
        fleet = self.fleet
        d = self.disp[batch[5]]
        if fleet.batch[w] is None:
            d.busy += 1
            fleet.state[w] = BUSY
        fleet.batch[w] = batch
        d.in_service += batch[2]
        heapq.heappush(
            self.queue.heap,
            (
                self.now_s + self.service.draw(batch[3]),
                1,
                next(self.queue.seq),
                ev.DONE,
                w,
                fleet.version[w],
            ),
        )

    def _on_done(self, w: int, version: int) -> None:
        fleet = self.fleet
        if version != fleet.version[w]:
            return
        batch = fleet.batch[w]
        assert batch is not None
        d = self.disp[batch[5]]
        d.done.append((batch[0], batch[1], self.now_s, OK if batch[4] == d.epoch else ORPHANED))
        d.in_service -= batch[2]
        if self.least_loaded:
            local = self.local_index[w]
            if np.isfinite(d.ll_out[local]) and d.ll_out[local] > 0:
                d.ll_out[local] -= 1
        queue = fleet.queue[w]
        if queue:
            nxt = queue.popleft()
            fleet.backlog[w] -= 1
            d.backlog_reqs -= nxt[2]
            self._start(w, nxt)
        elif self.pull and d.closed and not d.paused:
            nxt = d.closed.popleft()
            d.closed_reqs -= nxt[2]
            self._start(w, nxt)
            if d.queue_limit:
                self._replan(d)
        else:
            fleet.batch[w] = None
            fleet.state[w] = IDLE
            d.busy -= 1
            if self.pull:
                d.idle.append(w)

    def _drain(self, d: Dispatcher) -> None:
        """Hand out the batches the dispatcher held while it could not dispatch."""
        if d.paused or not d.closed:
            return
        before = d.closed_reqs
        if self.pull:
            while d.closed and d.idle:
                batch = d.closed.popleft()
                d.closed_reqs -= batch[2]
                self._start(d.idle.popleft(), batch)
        else:
            while d.closed and d.rotation:
                batch = d.closed.popleft()
                d.closed_reqs -= batch[2]
                self._push(d, batch)
        if d.queue_limit and d.closed_reqs < before:
            self._replan(d)

    def _on_health(self, _a: Any, _b: Any) -> None:
        fleet = self.fleet
        for d in self.disp:
            alive = [w for w in d.workers if fleet.state[w] != DEAD]
            if alive != d.rotation:
                known = set(d.rotation)
                for local, w in enumerate(d.workers):
                    if fleet.state[w] == DEAD:
                        d.ll_out[local] = np.inf
                    elif w not in known:
                        d.ll_out[local] = 0.0
                d.rotation = alive
                d.rr_next = d.rr_next % len(alive) if alive else 0
            self._drain(d)
        self.queue.push(self.now_s + self.scenario.dispatcher.health_check_s, ev.HEALTH)

    # -- faults ----------------------------------------------------------------------
    def _on_fault(self, command: str, _: Any) -> None:
        self._apply(command)

    def _apply(self, command: str) -> None:
        action, _, target = command.partition(" ")
        kind, _, rest = target.partition(":")
        self.frame_events.append(command)
        fleet = self.fleet
        if kind == "host":
            h = int(rest)
            fleet.host_alive[h] = 0 if action == "kill" else 1
            for w in fleet.host_workers[h]:
                self._kill_worker(w) if action == "kill" else self._restore_worker(w)
        elif kind == "worker":
            name, _, index = rest.partition(":")
            w = self.disp[self.names.index(name)].workers[int(index)]
            if action == "kill":
                self._kill_worker(w)
            elif fleet.host_alive[fleet.host[w]]:
                self._restore_worker(w)
        else:
            d = self.disp[self.names.index(rest)]
            self._kill_dispatcher(d) if action == "kill" else self._end_failover(d)

    def _kill_worker(self, w: int) -> None:
        fleet = self.fleet
        if fleet.state[w] == DEAD:
            return
        d = self.disp[fleet.model_list[w]]
        now = self.now_s
        batch = fleet.batch[w]
        if batch is not None:
            d.lose(batch[0], batch[1], now)
            d.in_service -= batch[2]
            d.busy -= 1
            fleet.batch[w] = None
        for queued in fleet.queue[w]:
            d.lose(queued[0], queued[1], now)
            d.backlog_reqs -= queued[2]
        fleet.queue[w].clear()
        fleet.backlog[w] = 0
        fleet.version[w] += 1
        fleet.state[w] = DEAD
        d.alive -= 1
        if self.pull and w in d.idle:
            d.idle.remove(w)

    def _restore_worker(self, w: int) -> None:
        fleet = self.fleet
        if fleet.state[w] != DEAD:
            return
        d = self.disp[fleet.model_list[w]]
        fleet.state[w] = IDLE
        fleet.version[w] += 1
        d.alive += 1
        if self.pull:
            d.idle.append(w)
            self._drain(d)

    def _kill_dispatcher(self, d: Dispatcher) -> None:
        now = self.now_s
        d.ingest(now)
        if self.cold:
            d.lose(d.open_start, d.ingested, now)
            d.open_start, d.open_count, d.open_tokens = d.ingested, 0, 0
            for batch in d.closed:
                d.lose(batch[0], batch[1], now)
            d.closed.clear()
            d.closed_reqs = 0
            d.epoch += 1
        d.paused = True
        d.paused_until = now + self.failover_s
        self.queue.push(d.paused_until, ev.FAILOVER_END, d.index, d.paused_until)
        self._replan(d)

    def _on_failover_end(self, m: int, until: float) -> None:
        d = self.disp[m]
        if d.paused and until == d.paused_until:
            self._end_failover(d)

    def _end_failover(self, d: Dispatcher) -> None:
        if d.paused:
            d.paused = False
            self._drain(d)

    # -- frames ----------------------------------------------------------------------
    def _frame(self, i: int) -> Frame:
        t = self.now_s
        m: dict[str, list[Any]] = {k: [] for k in FRAME_KEYS}
        for d in self.disp:
            d.book_done()
            d.ingest(t)
            d.sweep(t)
            counts, lat = d.next_frame()
            for key in COUNT_KEYS:
                m[key].append(getattr(counts, key))
            m["queue_depth"].append(d.depth())
            m["backlog"].append(d.backlog_reqs)
            m["in_service"].append(d.in_service)
            m["busy_workers"].append(d.busy)
            m["alive_workers"].append(d.alive)
            p50, p95, p99 = frame_percentiles(lat)
            m["p50_s"].append(p50)
            m["p95_s"].append(p95)
            m["p99_s"].append(p99)
            m["batch_fill"].append(counts.fill_sum / counts.batches if counts.batches else None)
        frame = Frame(
            i=i,
            t_s=t,
            models=self.names,
            m=m,
            w_state=self.fleet.state.copy(),
            w_backlog=self.fleet.backlog.copy(),
            h_alive=self.fleet.host_alive.copy(),
            events=self.frame_events,
        )
        self.frame_events = []
        if t < self.duration_s:
            self.queue.push(min((i + 2) * self.sample_s, self.duration_s), ev.FRAME, i + 1)
        return frame

    _handlers: dict[int, Callable[[Engine, Any, Any], None]] = {
        ev.CHUNK: _on_chunk,
        ev.CLOSE: _on_close,
        ev.DONE: _on_done,
        ev.FAULT: _on_fault,
        ev.HEALTH: _on_health,
        ev.FAILOVER_END: _on_failover_end,
    }


def _outcomes(counts: Counts, in_system: int, now: float, hist: LatencyHistogram) -> Outcomes:
    return Outcomes(
        offered=counts.offered,
        ok=counts.ok,
        timed_out=counts.timed_out,
        shed=counts.shed,
        lost=counts.lost,
        orphaned=counts.orphaned,
        in_system_end=in_system,
        wasted_batches=counts.wasted_batches,
        retried=counts.retried,
        served_qps=counts.ok / now if now > 0 else 0.0,
        latency_s=hist.stats(),
    )
