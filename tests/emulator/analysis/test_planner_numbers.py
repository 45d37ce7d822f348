"""The numbers pass of the SLO planner: per pool it sizes, the rate one worker serves
within the planner's target and the workers it wants at the peak, held against the
planner's own rate and hand arithmetic."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from emulator.analysis.fleet.planner import per_worker_rate
from emulator.analysis.numbers import compute
from emulator.scenario import AutoscalerSpec, Scenario
from emulator.scenario.presets import load_preset

PRESET = load_preset("dynamo-planner-ramp", max_requests=None)


def _spec(name: str) -> AutoscalerSpec:
    pool = PRESET.pool(name)
    assert pool is not None and pool.autoscaler is not None
    return pool.autoscaler


def test_each_planned_pool_shows_its_rate_and_the_workers_it_wants_at_the_peak() -> None:
    report = compute(PRESET)
    for role, lo, hi in (("prefill", 1, 6), ("decode", 1, 4)):
        rate = per_worker_rate(PRESET, _spec(role), role)
        assert rate.qps > 0
        shown = report.get(f"{role}_planner_worker_qps", "chat")
        assert shown.value is not None and float(shown.value) == pytest.approx(rate.qps)
        assert shown.unit == "QPS"
        want = report.value(f"{role}_planner_workers_at_peak", "chat")
        assert want == max(lo, min(hi, math.ceil(24 / rate.qps)))
    assert "pools.prefill.autoscaler.target_ttft_s" in report.get("prefill_planner_worker_qps", "chat").inputs
    assert "pools.decode.autoscaler.target_tbt_s" in report.get("decode_planner_worker_qps", "chat").inputs
    assert "TTFT target 1.5 s" in report.get("prefill_planner_worker_qps", "chat").explain


def _given(qps: float) -> Scenario:
    """The preset with the prefill planner's rate given instead of its TTFT target."""
    spec = replace(_spec("prefill"), per_worker_qps=qps, target_ttft_s=None)
    pools = tuple(replace(p, autoscaler=spec) if p.name == "prefill" else p for p in PRESET.pools)
    return replace(PRESET, pools=pools)


def test_a_given_rate_is_shown_as_given_and_the_wanted_workers_are_clamped() -> None:
    # 24 QPS at 2 a worker wants 12 prefill workers; max_workers 6 keeps it at 6.
    report = compute(_given(2.0))
    assert report.value("prefill_planner_worker_qps", "chat") == 2
    assert report.value("prefill_planner_workers_at_peak", "chat") == 6
    assert "pools.prefill.autoscaler.per_worker_qps" in report.get("prefill_planner_worker_qps", "chat").inputs
    assert compute(_given(10.0)).value("prefill_planner_workers_at_peak", "chat") == 3  # ceil(24 / 10)


def test_a_reactive_autoscaler_shows_no_planner_figures() -> None:
    report = compute(load_preset("disagg-planner-ramp", max_requests=None))
    assert report.figures
    assert not any("planner" in f.key for f in report.figures)
