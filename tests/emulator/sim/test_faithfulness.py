"""The engine agrees with queueing theory and with an independent SimPy model."""

from __future__ import annotations

import numpy as np
import pytest
from scenarios import single_model
from simpy_reference import ModelLoad, simulate

from emulator import Engine


def _rel(measured: float, expected: float) -> float:
    return abs(measured / expected - 1.0)


def test_it_serves_exactly_capacity_under_overload_and_the_queue_grows_at_the_difference() -> None:
    # 3 workers x 20 requests / 1.5 s = 40 QPS of capacity, 100 QPS offered.
    s = single_model(qps=100, workers=3, duration_s=300)
    engine = Engine(s)
    frames = engine.advance_to(300)
    summary = engine.summary()
    capacity = 3 * 20 / 1.5
    assert _rel(summary.served_qps, capacity) < 0.02
    depth = np.array([f.m["queue_depth"][0] for f in frames], dtype=float)
    times = np.array([f.t_s for f in frames])
    slope = np.polyfit(times[60:], depth[60:], 1)[0]
    assert _rel(slope, 100 - capacity) < 0.05
    assert summary.balanced()


def test_light_load_with_close_after_matches_the_analytic_fill_time_plus_batch_s() -> None:
    # Batches never fill (1000 requests), so each closes close_after_s after its first
    # request. Per request: (c + lambda c^2 / 2) / (1 + lambda c) of wait, plus batch_s.
    lam, c, batch_s = 2.0, 0.5, 1.5
    s = single_model(qps=lam, workers=10, batch_n=1000, close_after_s=c, duration_s=3000)
    summary = Engine(s).run()
    analytic = (c + lam * c * c / 2) / (1 + lam * c) + batch_s
    assert _rel(summary.latency_s["mean"], analytic) < 0.03


def test_littles_law_holds_on_a_stable_run() -> None:
    s = single_model(qps=200, workers=20, close_after_s=0.2, duration_s=600, sample_s=0.1)
    engine = Engine(s)
    frames = engine.advance_to(600)
    summary = engine.summary()
    in_system = np.mean(
        [f.m["queue_depth"][0] + f.m["backlog"][0] + f.m["in_service"][0] for f in frames]
    )
    assert _rel(in_system, summary.served_qps * summary.latency_s["mean"]) < 0.02


@pytest.mark.parametrize("load", [0.5, 0.9, 1.5])
def test_it_agrees_with_an_independent_simpy_model(load: float) -> None:
    workers, batch_n, batch_s, close_after = 20, 20, 1.5, 0.2
    qps = load * workers * batch_n / batch_s
    s = single_model(
        qps=qps, workers=workers, batch_n=batch_n, close_after_s=close_after, duration_s=600
    )
    engine = Engine(s).run()
    ref = simulate(
        [ModelLoad(qps, workers, batch_n)],
        duration_s=600,
        batch_s=batch_s,
        close_after_s=close_after,
        seed=7,
    )
    assert _rel(engine.served_qps, ref.served_qps) < 0.03
    assert _rel(engine.latency_s["p50"], ref.p50_s) < 0.03
    assert _rel(engine.latency_s["p99"], ref.p99_s) < 0.03


def test_pull_has_a_clearly_lower_p99_than_round_robin_with_lognormal_service() -> None:
    common = dict(
        qps=0.85 * 20 * 20 / 1.5,
        workers=20,
        close_after_s=0.5,
        duration_s=600,
        service="lognormal",
        service_cv=0.5,
    )
    rr = Engine(single_model(policy="round_robin", **common)).run()
    pull = Engine(single_model(policy="pull", **common)).run()
    assert pull.latency_s["p99"] < 0.7 * rr.latency_s["p99"]
    assert _rel(pull.served_qps, rr.served_qps) < 0.02


def test_round_robin_and_pull_agree_with_constant_service_and_full_batches() -> None:
    common = dict(qps=0.85 * 20 * 20 / 1.5, workers=20, duration_s=300)
    rr = Engine(single_model(policy="round_robin", **common)).run()
    pull = Engine(single_model(policy="pull", **common)).run()
    assert _rel(pull.latency_s["p99"], rr.latency_s["p99"]) < 0.03
    assert _rel(pull.latency_s["p50"], rr.latency_s["p50"]) < 0.03
    assert _rel(pull.served_qps, rr.served_qps) < 0.01
