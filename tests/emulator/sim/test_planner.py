"""The SLO planner: its decisions follow from the rates it recorded (predicted again
here with numpy and decided by the reference autoscaler), its events carry its
figures, and on a ramp it scales up before the reactive autoscaler does."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from autoscale_reference import ReferenceAutoscaler

from emulator import Engine, Scenario
from emulator.cli.run import autoscale_lines
from emulator.scenario.presets import load_preset
from emulator.sim.planner import Planner

PRESET = load_preset("dynamo-planner-ramp")


def _seasonal(spec: object, times: np.ndarray, rates: np.ndarray) -> float | None:
    """The seasonal prediction from every look so far (None: less than a season and a
    window seen, the trend applies)."""
    now, w, season = times[-1], spec.window_s, spec.season_s  # type: ignore[attr-defined]
    if times[0] > now - season - w:
        return None

    def mean(start: float, end: float) -> float:
        return float(rates[(times > start) & (times <= end)].mean())

    at = now + spec.lead_s - season  # type: ignore[attr-defined]
    return max(0.0, mean(at - w / 2, at + w / 2) + mean(now - w, now) - mean(now - season - w, now - season))


def _refit(spec: object, samples: list[dict[str, object]]) -> list[float]:
    """The prediction at each look, from the observed rates alone."""
    out = []
    for i, s in enumerate(samples):
        t = float(s["t_s"])  # type: ignore[arg-type]
        if spec.predictor == "seasonal":  # type: ignore[attr-defined]
            every = samples[: i + 1]
            seen = _seasonal(spec, np.array([float(x["t_s"]) for x in every]),  # type: ignore[arg-type]
                             np.array([float(x["observed_qps"]) for x in every]))  # type: ignore[arg-type]
            if seen is not None:
                out.append(seen)
                continue
        window = [(float(x["t_s"]), float(x["observed_qps"])) for x in samples[: i + 1]  # type: ignore[arg-type]
                  if float(x["t_s"]) >= t - spec.window_s]  # type: ignore[attr-defined, arg-type]
        times = np.array([w[0] for w in window])
        rates = np.array([w[1] for w in window])
        if spec.predictor == "moving_average" or len(set(times)) < 2:  # type: ignore[attr-defined]
            out.append(float(rates.mean()))
        else:
            slope, at0 = np.polyfit(times, rates, 1)
            out.append(max(0.0, float(at0 + slope * (times[-1] + spec.lead_s))))  # type: ignore[attr-defined]
    return out


#: A load that repeats every 300 s, for the seasonal predictor (four periods).
DIURNAL = ["traffic.shape=diurnal", "traffic.period_s=300", "duration_s=1200",
           "pools.prefill.autoscaler.season_s=300", "pools.decode.autoscaler.season_s=300"]


@pytest.mark.parametrize("predictor", ["linear_trend", "moving_average", "seasonal"])
def test_its_decisions_follow_from_the_recorded_rates(predictor: str) -> None:
    scenario = PRESET.with_overrides([f"pools.prefill.autoscaler.predictor={predictor}",
                                      f"pools.decode.autoscaler.predictor={predictor}",
                                      *(DIURNAL if predictor == "seasonal" else ["duration_s=700"])])
    engine = Engine(scenario)
    engine.run()
    planners = [a for a in engine.autoscalers if isinstance(a, Planner)]
    assert len(planners) == 2
    for p in planners:
        samples = p.samples
        assert samples[-1]["predicted_qps"] > samples[0]["predicted_qps"]  # the ramp is seen
        assert [s["predicted_qps"] for s in samples] == pytest.approx(_refit(p.spec, samples), rel=1e-6, abs=1e-9)
        initial = sum(g.count * len(g.workers) for g in scenario.hosts if g.pool == p.pool)
        ref = ReferenceAutoscaler.of(replace(p.spec, target=p.per_worker_qps), initial)
        looks = ref.run([{**s, "load": s["predicted_qps"]} for s in samples])
        assert [(x.wanted, x.desired, x.action) for x in looks] == [
            (s["wanted"], s["desired"], s["action"]) for s in samples]
        decisions = [e for e in p.events if e["direction"] in ("up", "down")]
        assert decisions
        for e in decisions:
            look = next(s for s in samples if s["t_s"] == e["t_s"])
            assert (e["observed_qps"], e["predicted_qps"]) == (look["observed_qps"], look["predicted_qps"])
            assert e["per_worker_qps"] == p.per_worker_qps and e["target_s"] == p.target_s
        # Every arrival the router took before the last look is in the observed rates.
        dts = np.diff([0.0] + [s["t_s"] for s in samples])
        counted = float(np.dot(dts, [s["observed_qps"] for s in samples]))
        assert counted == pytest.approx(p._seen)
        assert 0 < p._seen <= p.intake.arrived


def _first_up(engine: Engine, pool: str) -> float:
    scaler = next(a for a in engine.autoscalers if a.pool == pool)
    return min(e["t_s"] for e in scaler.events if e["direction"] == "up")


def test_on_a_split_fleet_its_prefill_pool_scales_up_before_the_reactive_one() -> None:
    # Same fleet, ramp and seed; the reactive prefill pool waits for running prefills
    # to pass its target, the planner reads the trend a warm-up ahead. (The decode pool
    # is not compared: the planner's 40 ms TBT rate lets a decode worker fill its KV
    # cache, which the reactive 0.6 KV target does not, so it asks later.)
    planned = Engine(PRESET.with_overrides(["duration_s=600"]))
    planned.run()
    reactive = Engine(load_preset("disagg-planner-ramp").with_overrides(["duration_s=600"]))
    reactive.run()
    assert _first_up(planned, "prefill") < _first_up(reactive, "prefill")


def test_a_whole_model_planner_holds_its_rate_and_the_cli_states_it() -> None:
    data = load_preset("autoscaled-diurnal").to_dict()
    table = data["autoscaler"]
    del table["target"]
    table.update(metric="slo", target_ttft_s=2.0, predictor="linear_trend")
    engine = Engine(Scenario.from_dict(data).with_overrides(["duration_s=3600"]))
    engine.run()
    planner = engine.autoscaler
    assert isinstance(planner, Planner)
    assert planner.per_worker_qps > 0 and planner.target_s == 2.0
    for s in planner.samples:
        assert s["wanted"] >= min(planner.spec.max_workers,
                                  math.ceil(s["predicted_qps"] / planner.per_worker_qps - 1e-9))
    line = autoscale_lines(planner.summary())[0]
    assert f"slo, linear_trend, {planner.per_worker_qps:.3g} QPS a worker within 2 s" in line


def test_a_period_kept_beside_another_predictor_changes_nothing() -> None:
    # season_s describes the load; the trend still reads its two-minute window only.
    plain = ["traffic.shape=diurnal", "traffic.period_s=300", "duration_s=900"]
    runs = []
    for extra in ([], ["pools.prefill.autoscaler.season_s=300", "pools.decode.autoscaler.season_s=300"]):
        engine = Engine(PRESET.with_overrides([*plain, *extra]))
        engine.run()
        runs.append([[s["predicted_qps"] for s in a.samples] for a in engine.autoscalers])
    assert runs[0] == runs[1] and len(runs[0][0]) == 60
