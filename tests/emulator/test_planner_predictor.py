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
    with pytest.raises(ValueError, match="moving_average, linear_trend"):
        planner.predict("seasonal", [0], [1], 1.0)


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
