"""The SLO planner's arithmetic: predict a pool's arrival rate a little ahead, and
size the pool to it.

Two predictors read the arrival rates a pool saw over its window (one rate per
look, oldest first). ``moving_average`` takes their plain mean: it lags a ramp by
half the window but never overshoots. ``linear_trend`` fits a least-squares line
through the rates against their times and reads it ``horizon_s`` past the last
look, so a worker that takes ``warmup_s`` to start is asked for before the load
that needs it arrives; it is never read below zero.

Given the predicted rate and the rate one worker can serve while meeting its
target (TTFT for a prefill or whole-request pool, TBT for a decode pool), the
pool needs ``ceil(predicted / per_worker)`` workers, kept within
``[min_workers, max_workers]``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

PREDICTORS = ("moving_average", "linear_trend")


def moving_average(rates: Sequence[float]) -> float:
    """The mean of the observed rates (0 when there are none)."""
    return sum(rates) / len(rates) if rates else 0.0


def linear_trend(times: Sequence[float], rates: Sequence[float], horizon_s: float) -> float:
    """The least-squares line through ``(times, rates)`` read ``horizon_s`` after the
    last time, floored at 0. One point, or all at one time, gives their mean."""
    if len(times) != len(rates):
        raise ValueError("times and rates must have the same length")
    n = len(rates)
    if n == 0:
        return 0.0
    mean_t = sum(times) / n
    mean_r = sum(rates) / n
    sxx = sum((t - mean_t) ** 2 for t in times)
    if sxx == 0.0:
        return max(0.0, mean_r)
    slope = sum((t - mean_t) * (r - mean_r) for t, r in zip(times, rates, strict=True)) / sxx
    at = times[-1] + horizon_s
    return max(0.0, mean_r + slope * (at - mean_t))


def predict(predictor: str, times: Sequence[float], rates: Sequence[float], horizon_s: float) -> float:
    """The rate ``predictor`` (one of ``PREDICTORS``) expects ``horizon_s`` ahead."""
    if predictor == "moving_average":
        return moving_average(rates)
    if predictor == "linear_trend":
        return linear_trend(times, rates, horizon_s)
    raise ValueError(f"predictor {predictor!r} is not one of {', '.join(PREDICTORS)}")


def workers_needed(predicted_qps: float, per_worker_qps: float, min_workers: int, max_workers: int) -> int:
    """``ceil(predicted / per_worker)`` kept within ``[min_workers, max_workers]``; a
    worker that cannot meet its target at any load (``per_worker_qps`` 0) asks for
    ``max_workers`` while anything arrives."""
    if predicted_qps <= 0.0:
        return min_workers
    if per_worker_qps <= 0.0:
        return max_workers
    # A tiny tolerance so that 3.0000000001 workers' worth of float noise is 3.
    need = math.ceil(predicted_qps / per_worker_qps - 1e-9)
    return max(min_workers, min(max_workers, need))
