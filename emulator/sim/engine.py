"""The engine: runs a scenario as a discrete-event simulation in simulated time.

Events are per batch, per fault and per frame, never per request: arrivals are
generated in bulk a chunk ahead (``emulator.sim.arrivals``), a batch is a range of one
model's arrivals (``emulator.sim.dispatcher``), and a batch's requests are booked in bulk
with numpy when it completes. Randomness comes from numpy Generators seeded from the
scenario's seed (or the one given), so a run is a pure function of scenario and seed:
one stream for arrivals, one for service times, one for policies that draw, one for
output lengths.

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

Kept as one module: the engine owns the clock, the event loop and the frame books that
every part writes into; the parts (arrivals, dispatchers, worker models, autoscalers,
faults) live in their own modules and are tied here.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from emulator.scenario import Scenario, ScenarioError
from emulator.scenario.checks import check_target
from emulator.sim.admission import FRAME_KEYS as ADMISSION_KEYS
from emulator.sim.admission import admission_for
from emulator.sim.arrivals import ArrivalSource, chunk_length
from emulator.sim.autoscaler import FRAME_KEYS as AUTOSCALE_KEYS
from emulator.sim.autoscaler import scale_figures
from emulator.sim.books import Counts
from emulator.sim.dispatcher import Dispatcher
from emulator.sim.events import (
    ARRIVALS,
    BATCH_CLOSE,
    FAILOVER_END,
    FAULT,
    FRAME,
    HEALTH_CHECK,
    PROXY_HOP_END,
    REQUEST_ARRIVAL,
    EventQueue,
)
from emulator.sim.fleet import Fleet
from emulator.sim.histogram import LatencyHistogram, frame_quantiles, weighted_quantiles
from emulator.sim.planner import autoscaler_for
from emulator.sim.policies import policy_class, sessions
from emulator.sim.results import (
    COUNT_KEYS,
    SHED_KEYS,
    STAT_KEYS,
    TOKEN_KEYS,
    Frame,
    Outcomes,
    Summary,
)
from emulator.sim.router import Router
from emulator.sim.workers import WORKER_MODELS, ContinuousWorkers
from emulator.sim.workers.disaggregated import DisaggregatedWorkers

#: A model's request store is compacted once it holds more rows than this.
COMPACT_ROWS = 50_000


class Engine:
    """A running simulation of one scenario; see the module docstring."""

    def __init__(self, scenario: Scenario, seed: int | None = None) -> None:
        self.scenario = scenario
        self.seed = scenario.seed if seed is None else seed
        self.duration_s = scenario.duration_s
        self.sample_s = scenario.sample_s
        self.wall_s = 0.0
        # spawn(n) children are prefix-stable: a new stream goes at the end, so the
        # draws of the earlier ones (and the golden results) do not move.
        arrivals_rng, self.service_rng, self.policy_rng, output_rng, gap_rng, prefix_rng = (
            np.random.Generator(np.random.PCG64(s))
            for s in np.random.SeedSequence(self.seed).spawn(6)
        )
        self.queue = EventQueue()
        self.source = ArrivalSource(scenario, arrivals_rng, output_rng, gap_rng, prefix_rng)
        self.names = list(scenario.models)
        self.fleet = Fleet(scenario)
        batching = [scenario.batching_of(n) for n in self.names]
        self.disp: list[Dispatcher | Router] = [
            (Dispatcher if batching[i] == "static" else Router)(
                i,
                scenario.models[n],
                scenario,
                self.source,
                self.queue,
                [w for w, m in enumerate(self.fleet.model_list) if m == i],
            )
            for i, n in enumerate(self.names)
        ]
        #: One worker model per batching mode in use, serving the models that use it.
        split = any(m.disaggregated is not None for m in scenario.models.values())
        self.worker_models = {
            mode: (DisaggregatedWorkers if split and mode == "continuous" else WORKER_MODELS[mode])(
                self, [i for i, b in enumerate(batching) if b == mode]
            )
            for mode in dict.fromkeys(batching)
        }
        self.workers = self.worker_models[batching[0]]  # the (first) worker model
        policy = policy_class(scenario.dispatcher.policy)
        for d, mode in zip(self.disp, batching, strict=True):
            d.worker_model = self.worker_models[mode]
            wm = d.worker_model
            d.policy = wm.routing(d, policy) if isinstance(wm, DisaggregatedWorkers) else policy(self, d)
            if mode != "static":
                d.slo_ttft_s, d.slo_tpot_s = scenario.slo.ttft_s, scenario.slo.tpot_s
                d.slo_tbt_s = scenario.slo.tbt_s
                if isinstance(d, Router):
                    d.admission = admission_for(self, d)
        #: SLO-aware admission in some model: its figures join the frames.
        self.admitting = any(isinstance(d, Router) and d.admission is not None for d in self.disp)
        self.token_level = "continuous" in self.worker_models
        self.frame_events: list[str] = []
        #: Every autoscaler: ``[autoscaler]``'s, then each pool's (``[pools.NAME.autoscaler]``).
        self.autoscalers = [autoscaler_for(self, spec, pool) for pool, spec in scenario.autoscalers()]
        #: The autoscaler of ``[autoscaler]`` (None without one).
        self.autoscaler = next((a for a in self.autoscalers if a.pool is None), None)
        #: The autoscaler of each scaled worker slot.
        self.scaler_of = {w: a for a in self.autoscalers for w in a.slots}
        worker_keys = dict.fromkeys(k for wm in self.worker_models.values() for k in wm.keys)
        self.frame_keys = (
            *COUNT_KEYS,
            *SHED_KEYS,
            "queue_depth",
            *worker_keys,
            *(AUTOSCALE_KEYS if self.autoscalers else ()),
            *(ADMISSION_KEYS if self.admitting else ()),
            *STAT_KEYS,
            *(TOKEN_KEYS if self.token_level else ()),
        )
        span = chunk_length(scenario)
        self.chunks_per_s = round(1.0 / span)
        self.chunk_end_s = 0.0
        queue = self.queue
        queue.on(ARRIVALS, self._on_chunk)
        queue.on(BATCH_CLOSE, Dispatcher.close_due)
        queue.on(REQUEST_ARRIVAL, Router.arrival_due)
        queue.on(FAILOVER_END, lambda d, until: d.failover_due(until))
        queue.on(FAULT, self._on_fault)
        queue.on(HEALTH_CHECK, self._on_health)
        queue.on(FRAME, self._on_frame)
        queue.on(PROXY_HOP_END, _hop_end)
        self._frames: list[Frame] = []
        queue.schedule(0.0, ARRIVALS, 0)
        queue.schedule(min(self.sample_s, self.duration_s), FRAME, 0)
        for fault in scenario.faults:
            queue.schedule(fault.at_s, FAULT, fault.command())
        if any(d.policy.health_checked for d in self.disp):
            queue.schedule(scenario.dispatcher.health_check_s, HEALTH_CHECK)

    # -- public API ------------------------------------------------------------------
    @property
    def now_s(self) -> float:
        """Simulated time reached."""
        return self.queue.now_s

    @property
    def done(self) -> bool:
        """True once the run reached its duration."""
        return self.now_s >= self.duration_s

    def advance_to(self, t_sim: float) -> list[Frame]:
        """Run up to simulated time ``t_sim`` (never past the duration); return the frames
        completed on the way."""
        started = time.perf_counter()
        target = min(t_sim, self.duration_s)
        frames: list[Frame] = []
        self._frames = frames
        self.queue.run_until(target)
        self.queue.now_s = max(self.queue.now_s, target)
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
        if self.scenario.traffic.trace is not None:
            raise ScenarioError(
                "qps",
                "the traffic replays a trace, which has no rate to set",
                "change traffic.trace_speedup and run again",
            )
        now = self.now_s
        self.source.set_rate(float(qps))
        self.frame_events.append(f"set qps {qps:g}")
        for d in self.disp:
            d.book_done()
            d.ingest(now)
        if self.chunk_end_s <= now:
            return  # the next chunk will use the new rate
        # The arrivals generated beyond now are withdrawn and drawn again at the new rate.
        window = int(now * self.chunks_per_s) // self.chunks_per_s
        fresh = self.source.fresh(now, self.chunk_end_s)
        kept = [d.withdraw_fresh() for d in self.disp]
        if self.source.limit:
            self.source.rate_limit(fresh, window)
        for d, retries in zip(self.disp, kept, strict=True):
            d.redraw(fresh, retries)

    def layout(self) -> dict[str, Any]:
        """Models, hosts and workers (in layout order), JSON-safe."""
        return self.fleet.layout(self.names)

    def summary(self) -> Summary:
        """The books so far (final once ``done``)."""
        now = self.now_s
        per_model: dict[str, Outcomes] = {}
        fleet_hist = LatencyHistogram()
        fleet = Summary()
        fleet_tokens = (LatencyHistogram(), LatencyHistogram(), [0], LatencyHistogram())
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
            if isinstance(d, Router):
                self._token_outcomes(out, d, counts, now, fleet_tokens)
            per_model[d.name] = out
            fleet.add(out)
        fleet.served_qps = fleet.ok / now if now > 0 else 0.0
        fleet.latency_s = fleet_hist.stats()
        if self.token_level:
            fleet_ttft, fleet_tpot, tokens, fleet_tbt = fleet_tokens
            fleet.token_level = True
            fleet.ttft_s, fleet.tpot_s = fleet_ttft.stats(), fleet_tpot.stats()
            fleet.tbt_s = fleet_tbt.stats()
            fleet.output_tokens_per_s = tokens[0] / now if now > 0 else 0.0
            fleet.slo_goodput = _goodput(fleet.slo_met, fleet, self.scenario.slo.any())
        fleet.per_model = per_model
        self._prefix_summary(fleet)
        self._speculative_summary(fleet)
        cw = self.worker_models.get("continuous")
        if isinstance(cw, ContinuousWorkers) and cw.moe is not None:  # mixtures of experts
            for d in self.disp:
                per_model[d.name].moe = cw.moe.summary(
                    d.index, [wk for wk in cw.workers.values() if wk.model == d.index])
        fleet.sim_s = now
        fleet.wall_s = self.wall_s
        fleet.events = self.queue.processed
        if self.autoscaler is not None:
            fleet.autoscale = self.autoscaler.summary()
        fleet.pool_autoscale = {a.pool: a.summary() for a in self.autoscalers if a.pool is not None}
        return fleet

    def _speculative_summary(self, fleet: Summary) -> None:
        """Speculative decoding's run figures, per model that speculates."""
        for cw in self.worker_models.values():
            if isinstance(cw, ContinuousWorkers) and cw.spec.on:  # (split pools' models too)
                for m in cw.models:
                    fleet.per_model[self.disp[m].name].speculative = cw.spec.summary(m)

    def _prefix_summary(self, fleet: Summary) -> None:
        """Prefix hit rates (fleet, per model, per worker) and prefill tokens saved."""
        cw = self.worker_models.get("continuous")
        if not isinstance(cw, ContinuousWorkers) or not cw.prefix_on:
            return
        for d in self.disp:
            out = fleet.per_model[d.name]
            if isinstance(d, Router):
                out.prefix = True
                out.prefix_tokens_seen, out.prefill_tokens_saved = cw.prefix_totals(d.index)
                fleet.prefix_tokens_seen += out.prefix_tokens_seen
                fleet.prefill_tokens_saved += out.prefill_tokens_saved
                if out.prefix_tokens_seen:
                    out.prefix_hit_rate = out.prefill_tokens_saved / out.prefix_tokens_seen
                out.kv_tiers = cw.tier_summary(d.index)
                out.sessions = sessions.summary(d.policy)
        fleet.prefix = True
        if fleet.prefix_tokens_seen:
            fleet.prefix_hit_rate = fleet.prefill_tokens_saved / fleet.prefix_tokens_seen
        fleet.prefix_hit_rate_by_worker = [
            cw.worker_prefix_rate(w) if w in cw.workers else None for w in range(len(self.fleet))
        ]

    # -- arrivals --------------------------------------------------------------------
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
            d.receive(per_model[d.index], COMPACT_ROWS)
        if t1 < self.duration_s:
            self.queue.schedule(t1, ARRIVALS, k + 1)

    # -- health checks and faults ------------------------------------------------------
    def _on_health(self, _a: Any, _b: Any) -> None:
        for d in self.disp:
            d.policy.health_check()
            d.drain()
        self.queue.schedule(self.now_s + self.scenario.dispatcher.health_check_s, HEALTH_CHECK)

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
            for w in list(fleet.host_workers[h]):
                self._kill_worker(w) if action == "kill" else self._restore_worker(w)
        elif kind == "worker":
            name, _, index = rest.partition(":")
            w = self.disp[self.names.index(name)].workers[int(index)]
            if action == "kill":
                self._kill_worker(w)
            elif fleet.host[w] >= 0 and fleet.host_alive[fleet.host[w]]:
                self._restore_worker(w)
        else:
            d = self.disp[self.names.index(rest)]
            d.fail() if action == "kill" else d.end_failover()

    def _kill_worker(self, w: int) -> None:
        scaler = self.scaler_of.get(w)
        if scaler is not None and scaler.kill(w):
            return
        d = self.disp[self.fleet.model_list[w]]
        if d.worker_model.kill(w):
            d.policy.worker_died(w)

    def _restore_worker(self, w: int) -> None:
        scaler = self.scaler_of.get(w)
        if scaler is not None and scaler.restore(w):
            return
        d = self.disp[self.fleet.model_list[w]]
        if d.worker_model.restore(w):
            d.policy.worker_restored(w)

    def _token_outcomes(
        self,
        out: Outcomes,
        d: Router,
        counts: Counts,
        now: float,
        fleet: tuple[LatencyHistogram, LatencyHistogram, list[int], LatencyHistogram],
    ) -> None:
        """The token-level figures of a continuous-batching model's outcomes."""
        ttft, tpot = LatencyHistogram(), LatencyHistogram()
        ttft.merge(d.hist_ttft)
        tpot.merge(d.hist_tpot)
        for values in d.ttfts:
            ttft.add(values)
        for values in d.tpots:
            tpot.add(values)
        fleet[0].merge(ttft)
        fleet[1].merge(tpot)
        workers = d.worker_model
        assert isinstance(workers, ContinuousWorkers)
        tbt = d.tbt.run_histogram(workers.open_gaps(d.index))
        fleet[3].merge(tbt)
        out.tbt_s = tbt.stats()
        tokens = workers.tokens_generated(d.index)
        fleet[2][0] += tokens
        out.token_level = True
        out.ttft_s, out.tpot_s = ttft.stats(), tpot.stats()
        out.output_tokens_per_s = tokens / now if now > 0 else 0.0
        out.preemptions = workers.preemptions[d.index]
        out.slo_met = counts.slo_met
        out.slo_goodput = _goodput(counts.slo_met, out, self.scenario.slo.any())
        out.shed_oversized = d.shed_oversized
        out.shed_queue_full = d.shed_queue_full
        if isinstance(workers, DisaggregatedWorkers):
            out.pools = workers.pool_summary(d.index, out.tpot_s) or {}
        if d.admission is not None:
            out.admission = d.admission.summary(now, out.offered - out.in_system_end, out.shed, out.slo_met)

    # -- frames ----------------------------------------------------------------------
    def _token_frame(self, m: dict[str, list[Any]], d: Dispatcher | Router, counts: Counts) -> None:
        if not isinstance(d, Router):
            for key in TOKEN_KEYS:
                m[key].append(None)
            return
        ttft, tpot = d.token_frame()
        for name, values in (("ttft", ttft), ("tpot", tpot)):
            p50, p90, p95, p99 = frame_quantiles(values)
            m[f"{name}_p50_s"].append(p50)
            m[f"{name}_p90_s"].append(p90)
            m[f"{name}_p95_s"].append(p95)
            m[f"{name}_p99_s"].append(p99)
        p50, p90, p99 = weighted_quantiles(*d.tbt.frame(), (0.5, 0.9, 0.99))
        m["tbt_p50_s"].append(p50)
        m["tbt_p90_s"].append(p90)
        m["tbt_p99_s"].append(p99)
        finished = counts.finished()
        m["goodput"].append(
            counts.slo_met / finished if finished and self.scenario.slo.any() else None
        )

    def _on_frame(self, i: int, _: Any) -> None:
        t = self.now_s
        m: dict[str, list[Any]] = {k: [] for k in self.frame_keys}
        worker_keys = [k for wm in self.worker_models.values() for k in wm.keys]
        for d in self.disp:
            d.book_done()
            d.ingest(t)
            d.sweep(t)
            counts, lat = d.next_frame()
            for key in (*COUNT_KEYS, *SHED_KEYS):
                m[key].append(getattr(counts, key))
            m["queue_depth"].append(d.depth())
            figures = d.worker_model.frame_figures(d.index)
            for key, value in figures.items():
                m[key].append(value)
            for key in worker_keys:
                if key not in figures:
                    m[key].append(None)  # a figure of another worker model
            if self.autoscalers:
                for key, value in scale_figures(self.autoscalers, d.index).items():
                    m[key].append(value)
            if self.admitting:
                adm = d.admission if isinstance(d, Router) else None
                for key, value in (adm.frame_figures() if adm else dict.fromkeys(ADMISSION_KEYS)).items():
                    m[key].append(value)
            p50, p90, p95, p99 = frame_quantiles(lat)
            m["p50_s"].append(p50)
            m["p90_s"].append(p90)
            m["p95_s"].append(p95)
            m["p99_s"].append(p99)
            m["batch_fill"].append(counts.fill_sum / counts.batches if counts.batches else None)
            if self.token_level:
                self._token_frame(m, d, counts)
        for wm in self.worker_models.values():
            wm.frame_done()
        w_kv = w_running = w_prefix = None
        continuous = self.worker_models.get("continuous")
        if isinstance(continuous, ContinuousWorkers):
            w_kv, w_running = [], []
            for w in range(len(self.fleet)):
                kv, running = (
                    continuous.worker_figures(w) if w in continuous.workers else (None, None)
                )
                w_kv.append(kv)
                w_running.append(running)
            if continuous.prefix_on:
                w_prefix = [
                    continuous.worker_prefix_frame(w) if w in continuous.workers else None
                    for w in range(len(self.fleet))
                ]
        self._frames.append(
            Frame(
                i=i,
                t_s=t,
                models=self.names,
                m=m,
                w_state=self.fleet.state.copy(),
                w_backlog=self.fleet.backlog.copy(),
                h_alive=self.fleet.host_alive.copy(),
                events=self.frame_events,
                w_kv=w_kv,
                w_running=w_running,
                w_prefix_hit=w_prefix,
                w_host=self.fleet.host.tolist() if self.autoscalers else None,
                w_first_unit=self.fleet.first_unit.tolist() if self.autoscalers else None,
            )
        )
        self.frame_events = []
        if t < self.duration_s:
            self.queue.schedule(min((i + 2) * self.sample_s, self.duration_s), FRAME, i + 1)


def _goodput(met: int, out: Outcomes, any_slo: bool) -> float | None:
    """The fraction of finished requests that met every SLO (None without SLOs)."""
    finished = out.offered - out.in_system_end
    return met / finished if any_slo and finished else None


def _outcomes(counts: Counts, in_system: int, now: float, hist: LatencyHistogram) -> Outcomes:
    return Outcomes(
        **{key: getattr(counts, key) for key in (*COUNT_KEYS, *SHED_KEYS)},
        in_system_end=in_system,
        wasted_batches=counts.wasted_batches,
        retried=counts.retried,
        served_qps=counts.ok / now if now > 0 else 0.0,
        latency_s=hist.stats(),
    )


def _hop_end(assign: Any, pair: tuple[int, Any]) -> None:
    """A request pushed to a worker reaches it after the proxy hop."""
    assign(*pair)
