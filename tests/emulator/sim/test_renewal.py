"""Gamma arrivals (``traffic.arrival = "gamma"``): gaps with the asked coefficient of
variation across chunk boundaries, the asked mean rate for every shape, Poisson left
exactly as it was, and one-line errors for the new keys."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scenarios import single_model

from emulator import Engine
from emulator.scenario import Scenario, ScenarioError
from emulator.sim.arrivals import ArrivalSource
from emulator.sim.renewal import GammaRenewal, operational_grid, times_from_epochs


def _times(sc: Scenario, *, by_model: bool = True, seed: int = 7) -> np.ndarray:
    """Every fresh arrival of ``sc``, drawn chunk by chunk (1 s) as the engine does."""
    rng = np.random.default_rng(seed)
    source = ArrivalSource(sc, rng, rng, np.random.default_rng(seed + 1))
    parts = []
    for k in range(int(sc.duration_s)):
        if by_model:
            parts.extend(a.time for a in source.fresh_by_model(float(k), float(k + 1)))
        else:
            parts.append(source.fresh(float(k), float(k + 1)).time)
    return np.sort(np.concatenate(parts))


def _gamma(qps: float, cv: float, duration_s: float, **traffic: Any) -> Scenario:
    return single_model(
        qps=qps, workers=5, duration_s=duration_s,
        traffic={"qps": qps, "arrival": "gamma", "arrival_cv": cv, **traffic},
    )


def _cv(gaps: np.ndarray) -> float:
    return float(gaps.std() / gaps.mean())


@pytest.mark.parametrize("cv", [0.5, 1.0, 2.0, 3.0])
def test_it_gives_gaps_the_asked_cv_and_rate_over_100k_gaps(cv: float) -> None:
    # 1000 QPS for 100 s: about 100k gaps, spread over 100 chunks of 1 s, so the
    # renewal state must be carried across 99 boundaries.
    times = _times(_gamma(1000.0, cv, 100.0))
    gaps = np.diff(times)
    assert gaps.size > 95_000
    assert _cv(gaps) == pytest.approx(cv, rel=0.04)
    assert times.size / 100.0 == pytest.approx(1000.0, rel=0.03 * max(cv, 1.0))


def test_it_keeps_the_cv_in_the_rate_limited_stream_too() -> None:
    times = _times(_gamma(1000.0, 2.0, 100.0), by_model=False)
    assert _cv(np.diff(times)) == pytest.approx(2.0, rel=0.04)


def test_it_leaves_no_mark_at_chunk_boundaries() -> None:
    # A gap straddling a fixed instant is length-biased: Gamma(k + 1), mean
    # (1 + cv^2) / rate and cv 1 / sqrt(k + 1) (0.196 here). Were the state dropped and
    # the wait drawn afresh at each boundary, the straddling gap would be the sum of two
    # independent recurrence times, with about twice that cv.
    cv = 0.2
    times = _times(_gamma(50.0, cv, 2000.0))
    gaps = np.diff(times)
    chunk = np.floor(times)
    straddling = gaps[chunk[1:] != chunk[:-1]]
    assert straddling.size > 1500
    assert straddling.mean() == pytest.approx((1 + cv * cv) / 50.0, rel=0.02)
    assert _cv(straddling) == pytest.approx(1 / np.sqrt(1 / cv**2 + 1), rel=0.1)


@pytest.mark.parametrize(
    ("shape", "extra"),
    [
        ("ramp", {"ramp_s": 60.0}),
        ("step", {"step_at_s": 50.5}),
        ("diurnal", {"period_s": 80.0}),
        ("burst", {"burst_at_s": 30.25, "burst_s": 20.0}),
    ],
)
def test_it_follows_every_shape_at_its_mean_rate(shape: str, extra: dict[str, Any]) -> None:
    sc = _gamma(200.0, 2.0, 200.0, shape=shape, peak_qps=800.0, **extra)
    times = _times(sc)
    expected = sc.traffic.mean_rate(200.0) * 200.0
    assert times.size == pytest.approx(expected, rel=0.05)
    # Per 10 s window the count follows rate_at (bursty, so a loose band).
    for start in range(0, 200, 10):
        window = ((times >= start) & (times < start + 10)).sum()
        want = sum(sc.traffic.rate_at(start + i + 0.5) for i in range(10))
        assert abs(window - want) < 0.25 * want + 60


def test_it_keeps_the_cv_where_a_shaped_rate_holds_still() -> None:
    # A step: 100 QPS then 1000 QPS. Thinning would make the slow part nearly Poisson.
    sc = _gamma(100.0, 2.5, 400.0, shape="step", peak_qps=1000.0, step_at_s=200.0)
    times = _times(sc)
    slow = np.diff(times[times < 200.0])
    fast = np.diff(times[times >= 200.0])
    assert _cv(slow) == pytest.approx(2.5, rel=0.1)
    assert _cv(fast) == pytest.approx(2.5, rel=0.05)
    assert slow.size / 200.0 == pytest.approx(100.0, rel=0.15)
    assert fast.size / 200.0 == pytest.approx(1000.0, rel=0.05)


def test_it_splits_models_into_streams_that_each_keep_the_cv() -> None:
    sc = _gamma(1000.0, 2.0, 100.0).with_overrides(
        ["models.m.share=0.25", 'models.n={share=0.75, worker_units=2, tokens=500}']
    )
    rng = np.random.default_rng(3)
    source = ArrivalSource(sc, rng, rng, np.random.default_rng(4))
    per_model: list[list[np.ndarray]] = [[], []]
    for k in range(100):
        for m, arr in enumerate(source.fresh_by_model(float(k), float(k + 1))):
            per_model[m].append(arr.time)
    small, large = (np.concatenate(p) for p in per_model)
    assert small.size == pytest.approx(25_000, rel=0.06)
    assert large.size == pytest.approx(75_000, rel=0.04)
    assert _cv(np.diff(small)) == pytest.approx(2.0, rel=0.06)
    assert _cv(np.diff(large)) == pytest.approx(2.0, rel=0.05)


def test_it_follows_a_live_rate_change() -> None:
    sc = _gamma(100.0, 2.0, 100.0)
    rng = np.random.default_rng(5)
    source = ArrivalSource(sc, rng, rng, np.random.default_rng(6))
    before = sum(a.time.size for k in range(50) for a in source.fresh_by_model(k, k + 1.0))
    source.set_rate(1000.0)
    after = sum(a.time.size for k in range(50, 100) for a in source.fresh_by_model(k, k + 1.0))
    assert before == pytest.approx(5_000, rel=0.15)
    assert after == pytest.approx(50_000, rel=0.06)


def test_it_runs_an_engine_on_gamma_traffic_with_balanced_books_and_more_queueing() -> None:
    poisson = single_model(qps=250.0, workers=20, duration_s=300.0, close_after_s=0.2)
    bursty = poisson.with_overrides(["traffic.arrival=gamma", "traffic.arrival_cv=4"])
    calm, burst = Engine(poisson).run(), Engine(bursty).run()
    assert burst.balanced() and calm.balanced()
    assert burst.offered == pytest.approx(calm.offered, rel=0.1)
    assert burst.latency_s["p99"] > calm.latency_s["p99"]


def test_it_leaves_poisson_draws_exactly_as_they_were() -> None:
    # The default spelled out is the same run, bit for bit, as the key left out.
    sc = single_model(qps=300.0, workers=10, duration_s=60.0, close_after_s=0.2)
    spelled = sc.with_overrides(["traffic.arrival=poisson"])
    assert "arrival" not in sc.to_dict()["traffic"]
    assert Engine(sc).run().to_dict()["latency_s"] == Engine(spelled).run().to_dict()["latency_s"]


def test_it_writes_gamma_keys_back_and_reads_them_again() -> None:
    sc = _gamma(100.0, 1.7, 10.0)
    again = Scenario.from_dict(sc.to_dict())
    assert again.traffic.arrival == "gamma" and again.traffic.arrival_cv == 1.7


@pytest.mark.parametrize(
    ("override", "path", "problem"),
    [
        ("traffic.arrival=bursty", "traffic.arrival", '"bursty" is not one of poisson, gamma'),
        ("traffic.arrival_cv=2", "traffic.arrival_cv", "applies only to gamma arrivals"),
        ("traffic.arrival_cv=0", "traffic.arrival_cv", "must be greater than 0"),
        ("traffic.arrival_cv=11", "traffic.arrival_cv", "is over 10"),
    ],
)
def test_it_names_the_key_of_a_bad_arrival_setting(override: str, path: str, problem: str) -> None:
    sc = single_model(qps=10.0, workers=5, duration_s=10.0)
    extra = ["traffic.arrival=gamma"] if "cv=0" in override or "cv=11" in override else []
    with pytest.raises(ScenarioError) as info:
        sc.with_overrides([*extra, override])
    assert str(info.value).startswith(f"{path}: ")
    assert problem in str(info.value)


def test_it_refuses_gamma_arrivals_with_a_trace() -> None:
    sc = single_model(qps=10.0, workers=5, duration_s=10.0)
    with pytest.raises(ScenarioError, match=r"^traffic.arrival: gamma arrivals do not apply"):
        sc.with_overrides(["traffic.trace=azure-conv-2023", "traffic.arrival=gamma"])


def test_it_draws_the_first_wait_from_the_stationary_forward_recurrence() -> None:
    # Stationary forward-recurrence mean of a unit-rate renewal: (1 + cv^2) / 2.
    waits = [GammaRenewal(2.0, np.random.default_rng(s)).remaining for s in range(20_000)]
    assert np.mean(waits) == pytest.approx((1 + 4.0) / 2, rel=0.05)


def test_it_inverts_the_integrated_rate_of_a_step_exactly() -> None:
    grid, cum = operational_grid(0.0, 1.0, lambda t: np.where(t >= 0.3, 10.0, 2.0), (0.3,))
    assert cum[-1] == pytest.approx(0.6 + 7.0)
    assert times_from_epochs(np.array([0.6, 0.6 + 3.5]), grid, cum) == pytest.approx([0.3, 0.65])
