"""The SLO planner's predictors and sizing rule, against hand-worked figures."""

from __future__ import annotations

import pytest

from emulator.analysis.fleet import planner


def test_moving_average_is_the_mean() -> None:
    assert planner.moving_average([2.0, 4.0, 9.0]) == 5.0
    assert planner.moving_average([]) == 0.0


def test_linear_trend_reads_the_line_ahead() -> None:
    # rates 1, 3, 5 at t = 0, 10, 20: slope 0.2/s; 15 s past t=20 is 5 + 3 = 8.
    assert planner.linear_trend([0.0, 10.0, 20.0], [1.0, 3.0, 5.0], 15.0) == pytest.approx(8.0)
    # Horizon 0 on an exact line is its last point.
    assert planner.linear_trend([0.0, 10.0, 20.0], [1.0, 3.0, 5.0], 0.0) == pytest.approx(5.0)


def test_linear_trend_least_squares_on_noisy_points() -> None:
    # t = 0,1,2,3; r = 1,2,2,5: mean_t 1.5, mean_r 2.5, sxx 5, sxy 6 -> slope 1.2.
    # At t = 3 + 2 = 5: 2.5 + 1.2 * 3.5 = 6.7.
    assert planner.linear_trend([0, 1, 2, 3], [1, 2, 2, 5], 2.0) == pytest.approx(6.7)


def test_linear_trend_floors_at_zero_and_degenerate_cases() -> None:
    assert planner.linear_trend([0.0, 10.0], [10.0, 2.0], 100.0) == 0.0
    assert planner.linear_trend([5.0], [3.0], 60.0) == 3.0
    assert planner.linear_trend([], [], 60.0) == 0.0
    with pytest.raises(ValueError):
        planner.linear_trend([0.0], [1.0, 2.0], 1.0)


def test_predict_dispatches_and_names_the_choices() -> None:
    assert planner.predict("moving_average", [0, 10], [2, 4], 99.0) == 3.0
    assert planner.predict("linear_trend", [0, 10], [2, 4], 10.0) == pytest.approx(6.0)
    with pytest.raises(ValueError, match="moving_average, linear_trend, seasonal"):
        planner.predict("weekly", [0], [1], 1.0)
    with pytest.raises(ValueError, match="window_s and season_s"):
        planner.predict("seasonal", [0], [1], 1.0)


def _square_wave(until: int) -> tuple[list[float], list[float]]:
    """Looks every 10 s: 1 QPS for the first 100 s of each 200 s, 9 for the rest, and
    2 QPS more from t = 200 on."""
    times = [float(t) for t in range(0, until + 1, 10)]
    rates = [(1.0 if t % 200 < 100 else 9.0) + (2.0 if t >= 200 else 0.0) for t in times]
    return times, rates


def test_seasonal_foresees_a_rise_seen_a_season_before() -> None:
    times, rates = _square_wave(290)
    # At t = 290, 30 s ahead, season 200, window 40: now (250, 290] averages 3, the
    # same window a season before (50, 90] averages 1, so the level rose by 2; the
    # window centred on 320 - 200 = 120, (100, 140], averages 9: 9 + 2 = 11, which is
    # the rate at 320. The trend of the last window still says 3.
    assert planner.seasonal(times, rates, 30.0, 40.0, 200.0) == pytest.approx(11.0)
    assert planner.predict("seasonal", times, rates, 30.0, 40.0, 200.0) == pytest.approx(11.0)
    recent = [(t, r) for t, r in zip(times, rates, strict=True) if t > 250]
    assert planner.linear_trend([t for t, _ in recent], [r for _, r in recent], 30.0) == pytest.approx(3.0)


def test_seasonal_falls_back_to_the_trend_until_a_season_and_a_window_are_seen() -> None:
    # A steady ramp, t / 10 QPS at look t. At t = 230 the looks start at 0, later
    # than 230 - 200 - 40 = -10: the trend of the window [190, 230], 23 + 3 = 26 (the
    # seasonal rule would say 26.5).
    times = [float(t) for t in range(0, 231, 10)]
    ramp = [t / 10 for t in times]
    assert planner.seasonal(times, ramp, 30.0, 40.0, 200.0) == pytest.approx(26.0)
    # At t = 240 they reach back to 0 = 240 - 240: now (200, 240] averages 22.5,
    # (0, 40] 2.5, the window centred on 70, (50, 90], 7.5: 7.5 + 20 = 27.5 (the
    # trend says 27).
    times.append(240.0)
    ramp.append(24.0)
    assert planner.seasonal(times, ramp, 30.0, 40.0, 200.0) == pytest.approx(27.5)


def test_seasonal_never_predicts_below_zero() -> None:
    # 9 QPS, then 1 from t = 100, then nothing from t = 200. At t = 300: now (260,
    # 300] averages 0, (60, 100] 7, the window centred on 110 1: 1 + 0 - 7 floors at 0.
    times = [float(t) for t in range(0, 301, 10)]
    rates = [9.0 if t < 100 else (0.0 if t >= 200 else 1.0) for t in times]
    assert planner.seasonal(times, rates, 10.0, 40.0, 200.0) == 0.0
    assert planner.seasonal([], [], 10.0, 40.0, 200.0) == 0.0
    with pytest.raises(ValueError):
        planner.seasonal([0.0], [1.0, 2.0], 1.0, 1.0, 10.0)


@pytest.mark.parametrize(
    ("predicted", "per_worker", "lo", "hi", "want"),
    [
        (0.0, 2.0, 1, 8, 1),
        (6.0, 2.0, 1, 8, 3),
        (6.1, 2.0, 1, 8, 4),
        (0.3 * 3, 0.3, 1, 8, 3),
        (100.0, 2.0, 1, 8, 8),
        (1.0, 2.0, 2, 8, 2),
        (1.0, 0.0, 1, 8, 8),
    ],
)
def test_workers_needed(predicted: float, per_worker: float, lo: int, hi: int, want: int) -> None:
    assert planner.workers_needed(predicted, per_worker, lo, hi) == want
