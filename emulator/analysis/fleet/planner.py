"""The SLO planner's arithmetic: predict a pool's arrival rate a little ahead, and
size the pool to it.

Three predictors read the arrival rates a pool saw (one rate per look, oldest
first). ``moving_average`` takes the plain mean of the window's: it lags a ramp by
half the window but never overshoots. ``linear_trend`` fits a least-squares line
through the window's rates against their times and reads it ``horizon_s`` past the
last look, so a worker that takes ``warmup_s`` to start is asked for before the load
that needs it arrives; it is never read below zero. ``seasonal`` is for a load that
repeats every ``season_s`` (a day, a week): the rate expected at the predicted time
is the mean of the window centred on that time one season before, moved by how much
the load has changed since (the mean of the window centred half a window before now,
less the mean of the window centred there a season ago). A level that rises from one
day to the next is followed, and a rise that came at the same hour yesterday is
foreseen without waiting for it to show in the window. Until the looks reach back a
season and a window it predicts as ``linear_trend`` does; never below zero.

Given the predicted rate and the rate one worker can serve while meeting its
target (TTFT for a prefill or whole-request pool, TBT for a decode pool), the
pool needs ``ceil(predicted / per_worker)`` workers, kept within
``[min_workers, max_workers]``.

``per_worker_rate`` works out that rate once, from the step model, when the planner
is built:

* ``target_ttft_s`` (a prefill or whole pool): the TTFT queueing bound
  (``queueing.ttft_bound_qps``) of a pool of *one* worker, its prompts' prefill
  times from the step model, the slack the target leaves after the KV transfer and
  the first decode step, as the analysis's TTFT check reads it. One worker, not the
  pool's ``max_workers``: a pool that shares its queue among N workers serves more a
  worker within the same target, so the one-worker rate is the cautious one and does
  not depend on how many workers the planner is about to hold.
* ``target_tbt_s`` (a decode pool): the continuous worker's rate at the largest batch
  whose time between tokens is within the target (``capacity.continuous_worker``'s
  ``tpot_goal``).
* ``per_worker_qps``: as given.

Rates are per arrival at the model (what the planner counts): a prefill pool whose
decider sends a share of prompts straight to decode serves ``1 - share`` of them.

A target that no load meets gives 0 (the planner then asks for ``max_workers``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from emulator.analysis.fleet.analysis import GOODPUT
from emulator.analysis.fleet.capacity import continuous_worker, direct_prompts
from emulator.analysis.fleet.queueing import prefill_times, ttft_bound_qps
from emulator.analysis.fleet.steps import step_cost
from emulator.analysis.fleet.workload import workload_of
from emulator.scenario import AutoscalerSpec, Scenario
from emulator.scenario.autoscale_checks import PREDICTORS
from emulator.scenario.pools import kv_bytes_per_token

__all__ = ["PREDICTORS", "PerWorkerRate", "linear_trend", "moving_average", "per_worker_rate", "predict",
           "seasonal", "workers_needed"]


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


def _mean_within(times: Sequence[float], rates: Sequence[float], start: float, end: float) -> float | None:
    """The mean of the rates looked at in ``(start, end]`` (None: no look there)."""
    inside = [r for t, r in zip(times, rates, strict=True) if start < t <= end]
    return sum(inside) / len(inside) if inside else None


def seasonal(times: Sequence[float], rates: Sequence[float], horizon_s: float, window_s: float,
             season_s: float) -> float:
    """The seasonal prediction ``horizon_s`` after the last look (see the module
    docstring): the window centred on the predicted time a season earlier, plus the
    change between the window centred half a window before now and the same window a
    season earlier; ``linear_trend`` over the last ``window_s`` until the looks reach
    back a season and a window."""
    if len(times) != len(rates):
        raise ValueError("times and rates must have the same length")
    if not times:
        return 0.0
    now = times[-1]
    half = window_s / 2
    recent = [i for i, t in enumerate(times) if t >= now - window_s]  # the window, as the trend reads it
    if times[0] > now - season_s - window_s:
        return linear_trend([times[i] for i in recent], [rates[i] for i in recent], horizon_s)
    level_now = _mean_within(times, rates, now - window_s, now)
    level_then = _mean_within(times, rates, now - season_s - window_s, now - season_s)
    at = now + horizon_s - season_s
    ahead_then = _mean_within(times, rates, at - half, at + half)
    if level_now is None or level_then is None or ahead_then is None:
        return linear_trend([times[i] for i in recent], [rates[i] for i in recent], horizon_s)
    return max(0.0, ahead_then + level_now - level_then)


def predict(predictor: str, times: Sequence[float], rates: Sequence[float], horizon_s: float,
            window_s: float | None = None, season_s: float | None = None) -> float:
    """The rate ``predictor`` (one of ``PREDICTORS``) expects ``horizon_s`` ahead. The
    window's predictors read every look given; ``seasonal`` reads a season and a window
    of them (``window_s`` and ``season_s`` are its)."""
    if predictor == "moving_average":
        return moving_average(rates)
    if predictor == "linear_trend":
        return linear_trend(times, rates, horizon_s)
    if predictor == "seasonal":
        if window_s is None or season_s is None:
            raise ValueError("the seasonal predictor needs window_s and season_s")
        return seasonal(times, rates, horizon_s, window_s, season_s)
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


@dataclass(frozen=True)
class PerWorkerRate:
    """What one worker of a pool serves within its target, and how it was found."""

    qps: float
    #: The target it is held to (None: ``per_worker_qps`` was given).
    target_s: float | None
    how: str


def per_worker_rate(scenario: Scenario, spec: AutoscalerSpec, role: str) -> PerWorkerRate:
    """The rate one worker of ``spec``'s pool (``role``: whole, prefill or decode)
    serves within the planner's target (see the module docstring)."""
    if spec.per_worker_qps is not None:
        return PerWorkerRate(spec.per_worker_qps, None, f"per_worker_qps {spec.per_worker_qps:g} as given")
    name = spec.model
    load = workload_of(scenario, name)
    cost = step_cost(scenario, name)
    split = scenario.models[name].disaggregated
    move_s = 0.0
    sent = None
    if split is not None:
        per_token = kv_bytes_per_token(scenario.models[name])
        assert per_token is not None
        move_s = load.prompt.mean * per_token / (split.kv_transfer_gb_s * 1e9)
        sent = direct_prompts(load, split.decider_threshold_tokens, None, scenario.worker_for(name).block_tokens)
    direct = sent.share if sent is not None else 0.0
    if spec.target_tbt_s is not None:
        goal = spec.target_tbt_s
        w = continuous_worker(scenario, name, load, cost, role=role, pool_workers=spec.max_workers,
                              direct_share=direct, tpot_goal=goal, transfer_s=move_s, direct=sent)
        if "tpot_s" in w.goals_left_out:
            return PerWorkerRate(0.0, goal, f"no batch decodes within {goal:g} s a token")
        return PerWorkerRate(float(w.qps), goal, f"{float(w.concurrency):g} sequences decoding within "
                                                 f"{goal:g} s a token: {float(w.qps):.3g} requests a second")
    assert spec.target_ttft_s is not None, "validation gives the planner a rate or a target"
    goal = spec.target_ttft_s
    w = continuous_worker(scenario, name, load, cost, role=role, pool_workers=spec.max_workers,
                          direct_share=direct, transfer_s=move_s, direct=sent)
    if w.prefill_s is None or not w.qps:
        return PerWorkerRate(0.0, goal, "the worker serves nothing")
    times, weights = prefill_times(load, cost, float(w.hit_rate or 0), 0.0, float(w.prefill_s))
    slack = goal - move_s - float(cost.decode_alone_s(max(1, round(load.prompt.mean)) + 1))
    limit = scenario.dispatcher.queue_limit
    bound = ttft_bound_qps(1, float(w.qps), times, weights, slack, limit, GOODPUT)
    if bound is None:
        return PerWorkerRate(0.0, goal, f"not even a light load prefills within {goal:g} s")
    how = f"{bound:.3g} prompts a second of {float(w.qps):.3g} busy keep {GOODPUT:.0%} of first tokens within {goal:g} s on one worker"
    if role == "prefill" and 0.0 < direct < 1.0:
        # Per model arrival: the decider sends the rest straight to decode.
        bound /= 1.0 - direct
        how += f", {bound:.3g} model arrivals a second with {direct:.0%} sent straight to decode"
    return PerWorkerRate(bound, goal, how)
