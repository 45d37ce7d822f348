"""The SLO planner: a pool's worker count follows its predicted arrival rate, as
Dynamo's planner sizes prefill and decode workers to their TTFT and inter-token
targets from the load it expects.

It is the reactive ``Autoscaler`` with another reading at each look: the arrivals the
model's router took since the last look (``Router.arrived``) over the time between
give the observed rate; the last ``window_s`` of (look time, rate) feed the
predictor (``emulator.analysis.fleet.planner.predict``, read ``horizon_s`` ahead),
the last ``season_s`` and ``window_s`` for the seasonal one;
the pool wants ``workers_needed(predicted, per-worker rate, min, max)``, at least one
while requests wait. Everything after that is the base class's: the stabilization
window, the cooldown, placement, warm-up, drain and park.

The per-worker rate is worked out once, when the planner is built
(``per_worker_rate``: from ``per_worker_qps`` or the pool's target on the step
model). A split model's every request reaches its decode pool and, but for those the
decider sends straight to decode, its prefill pool; the planner reads the model's
arrivals, so a prefill pool's rate per worker is taken per model arrival (divided by
the prefill share of the traffic).

Each look's sample adds ``observed_qps``, ``predicted_qps`` and ``per_worker_qps``;
each ``up``, ``down`` or ``blocked`` event carries them too, with ``target_s``. The
summary keeps every look's rates beside the capacity of the workers then active
(active x per-worker rate) in ``looks``, one list per key of ``LOOK_KEYS``, for the
run page's chart of the planner's decisions against its target.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from emulator.analysis.fleet.planner import per_worker_rate, predict, workers_needed
from emulator.scenario import PLANNER_METRIC, AutoscalerSpec
from emulator.scenario.pools import split_pools
from emulator.sim.autoscaler import Autoscaler
from emulator.sim.router import Router

if TYPE_CHECKING:
    from emulator.sim.engine import Engine

#: The summary's ``looks``: one list per key, one value per look.
LOOK_KEYS = ("t_s", "observed_qps", "predicted_qps", "capacity_qps")

#: The event kinds that are decisions (they carry the planner's figures).
_DECISIONS = ("up", "down", "blocked")


class Planner(Autoscaler):
    """See the module docstring."""

    def __init__(self, sim: Engine, spec: AutoscalerSpec, pool: str | None = None) -> None:
        super().__init__(sim, spec, pool)
        assert isinstance(self.router, Router), "validation plans continuous-batching models only"
        #: The model's router, whose intake counts the arrivals.
        self.intake = self.router
        role = "whole" if pool is None else split_pools(sim.scenario.models)[pool][1]
        rate = per_worker_rate(sim.scenario, spec, role)
        self.per_worker_qps = rate.qps
        #: The target the rate is held to (None: ``per_worker_qps`` was given).
        self.target_s = rate.target_s
        #: How the rate was found, one line.
        self.rate_how = rate.how
        self.rates: deque[tuple[float, float]] = deque()  # (look time, observed rate), what the predictor reads
        #: Whether the predictor reads a season back (the others read their window).
        self.seasonal = spec.predictor == "seasonal"
        #: How far back the predictor reads: its window, and for the seasonal one a
        #: season before it.
        self.memory_s = spec.window_s + ((spec.season_s or 0.0) if self.seasonal else 0.0)
        self._seen = 0  # the router's arrivals at the last look
        self._seen_s = 0.0
        self._last: dict[str, Any] = {}

    def measure(self) -> dict[str, Any]:
        """The base reading plus the observed and predicted arrival rates; the load is
        the predicted rate."""
        m = super().measure()
        now = self.queue.now_s
        arrived = self.intake.arrived
        observed = (arrived - self._seen) / (now - self._seen_s) if now > self._seen_s else 0.0
        self._seen, self._seen_s = arrived, now
        rates = self.rates
        rates.append((now, observed))
        spec = self.spec
        start = now - self.memory_s
        if not self.seasonal:
            while rates[0][0] < start:
                rates.popleft()
        else:
            # The last look at or before the start stays, so the seasonal predictor
            # knows its looks reach back a season and a window.
            while len(rates) > 1 and rates[1][0] <= start:
                rates.popleft()
        predicted = predict(spec.predictor, [t for t, _ in rates], [r for _, r in rates], spec.lead_s,
                            spec.window_s, spec.season_s)
        self._last = {"observed_qps": observed, "predicted_qps": predicted, "per_worker_qps": self.per_worker_qps}
        active = m["active"]
        return {**m, "load": predicted, "metric": predicted / active if active else None, **self._last}

    def desired(self, load: float, waiting: int) -> int:
        """``workers_needed`` for the predicted rate, at least 1 while requests wait."""
        spec = self.spec
        want = workers_needed(load, self.per_worker_qps, spec.min_workers, spec.max_workers)
        return max(want, 1) if waiting > 0 else want

    def _reason(self, m: dict[str, Any], desired: int, current: int) -> str:
        target = "" if self.target_s is None else f" within {self.target_s:g} s"
        return (f"{m['observed_qps']:.3g} QPS observed, {m['predicted_qps']:.3g} predicted at "
                f"{self.per_worker_qps:.3g} a worker{target}: {desired} wanted, {current} serving or warming up")

    def _note(self, direction: str, w: int | None, reason: str) -> None:
        super()._note(direction, w, reason)
        if direction in _DECISIONS:
            self.events[-1].update(self._last, target_s=self.target_s)

    def summary(self) -> dict[str, Any]:
        """The base summary plus the per-worker rate, its target and how it was found."""
        return {**super().summary(), "predictor": self.spec.predictor, "per_worker_qps": self.per_worker_qps,
                "target_s": self.target_s, "rate_how": self.rate_how, "looks": self.looks()}

    def looks(self) -> dict[str, list[float]]:
        """Every look's time, observed and predicted rates and the capacity of the
        workers active then (active x per-worker rate), one list per ``LOOK_KEYS``."""
        t, observed, predicted, capacity = LOOK_KEYS
        rows = self.samples
        return {t: [r["t_s"] for r in rows], observed: [r["observed_qps"] for r in rows],
                predicted: [r["predicted_qps"] for r in rows],
                capacity: [r["active"] * self.per_worker_qps for r in rows]}


def autoscaler_for(sim: Engine, spec: AutoscalerSpec, pool: str | None) -> Autoscaler:
    """The planner for ``metric = "slo"``, the reactive autoscaler otherwise."""
    return Planner(sim, spec, pool) if spec.metric == PLANNER_METRIC else Autoscaler(sim, spec, pool)
