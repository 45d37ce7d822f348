"""Reading and checking ``[autoscaler]`` (see ``AutoscalerSpec``).

Every mistake is one ``ScenarioError`` naming the key and the fix: a model that does
not exist or batches statically, an unknown metric, a target, interval, warm-up,
cooldown or stabilization window out of range, ``min_workers`` above ``max_workers``, bounds that disagree
with the workers the hosts start with, and a ``max_workers`` the hosts' free units
cannot place. For ``metric = "slo"`` (the SLO planner): exactly one of
``per_worker_qps``, ``target_ttft_s`` (a prefill or whole pool) and ``target_tbt_s``
(a decode pool), each positive, no ``target``; a known ``predictor``; a positive
``window_s``; a ``horizon_s`` of 0 or more; a ``season_s`` (needed by ``predictor =
"seasonal"``, kept unread by the others) longer than the lead plus half the window, so
the window a season before the predicted time is past. Those keys are refused with
another metric.
"""

from __future__ import annotations

from typing import Any

from emulator.scenario.checks import _show, _Table
from emulator.scenario.errors import ScenarioError
from emulator.scenario.specs import (
    AUTOSCALE_METRICS,
    PLANNER_METRIC,
    AutoscalerSpec,
    HostGroup,
    ModelSpec,
)

#: The metrics ``metric`` may name: the reactive ones, then the planner's.
METRICS = (*AUTOSCALE_METRICS, PLANNER_METRIC)
#: The planner's predictors (``emulator.analysis.fleet.planner.predict`` computes them).
PREDICTORS = ("moving_average", "linear_trend", "seasonal")
_PLANNER_KEYS = ("per_worker_qps", "target_ttft_s", "target_tbt_s", "predictor", "window_s", "horizon_s",
                 "season_s")
_RATE_KEYS = ("per_worker_qps", "target_ttft_s", "target_tbt_s")

#: The keys of ``[autoscaler]``, in the order the docs list them.
AUTOSCALER_KEYS = tuple(AutoscalerSpec.__dataclass_fields__)


def parse_autoscaler(
    raw: Any,
    models: dict[str, ModelSpec],
    batching: dict[str, str],
    hosts: tuple[HostGroup, ...],
    path: str = "autoscaler",
    default_model: str | None = None,
    role: str = "whole",
) -> AutoscalerSpec:
    """``[autoscaler]`` as a checked ``AutoscalerSpec`` (raises ScenarioError).

    A pool's autoscaler (``[pools.NAME.autoscaler]``) is read the same way at its
    ``path``, with ``hosts`` the pool's host groups (the workers it starts with and the
    free units it may place new ones on) and ``default_model`` the model the pool
    serves, used when ``model`` is left out; ``role`` is the pool's ("prefill",
    "decode", or "whole" for ``[autoscaler]``), which decides the planner's target."""

    t = _Table(raw, path, AUTOSCALER_KEYS)
    if t.has("model"):
        model = t.text("model")
        if model not in models:
            raise ScenarioError(
                t.key("model"), f'"{model}" names no model', f"models are {', '.join(models)}"
            )
    elif default_model is not None:
        model = default_model
    elif len(models) == 1:
        model = next(iter(models))
    else:
        raise ScenarioError(
            t.key("model"),
            "missing: the scenario has several models",
            f"name the model to scale, one of {', '.join(models)}",
        )
    if batching[model] != "continuous":
        raise ScenarioError(
            path,
            f"model {model} batches statically; the autoscaler scales continuous-batching workers",
            f'set worker.batching = "continuous" (or models.{model}.worker.batching), or remove [autoscaler]',
        )
    if not t.has("metric"):
        raise ScenarioError(
            t.key("metric"), "missing", f"choose one of {', '.join(METRICS)}"
        )
    metric = t.text("metric")
    if metric not in METRICS:
        raise ScenarioError(
            t.key("metric"),
            f'"{metric}" is not a metric the autoscaler reads',
            f"choose one of {', '.join(METRICS)} (waiting requests per worker, "
            "KV cache in use, running requests per worker, the SLO planner)",
        )
    planner = _planner_keys(t, role) if metric == PLANNER_METRIC else {}
    if planner:
        _check_season(t, planner)
    if not planner:
        for key in _PLANNER_KEYS:
            if t.has(key):
                raise ScenarioError(
                    t.key(key), f'is a key of the SLO planner, and metric is "{metric}"',
                    f'set metric = "{PLANNER_METRIC}" or remove {key}',
                )
    target = 0.0 if planner else t.number("target")
    if target <= 0 and not planner:
        raise ScenarioError(
            t.key("target"),
            f"must be greater than 0, not {_show(target)}",
            "give the metric's value per worker to aim at, e.g. 4 waiting requests or 0.7 of the KV cache",
        )
    if metric == "kv" and target > 1:
        raise ScenarioError(
            t.key("target"),
            f"{_show(target)} is more than 1, and the kv metric is the fraction of the KV cache in use",
            "give a fraction such as 0.7",
        )
    initial = sum(g.count * sum(1 for w in g.workers if w.model == model) for g in hosts)
    low = t.integer("min_workers", min(initial, 1), low=0)
    high = t.integer("max_workers", low=1)
    if low > high:
        raise ScenarioError(
            t.key("min_workers"),
            f"{low} is more than max_workers ({high})",
            "lower min_workers or raise max_workers",
        )
    if initial < low:
        raise ScenarioError(
            t.key("min_workers"),
            f"{low} is more than the {initial} {model} workers the hosts start with",
            f"place at least {low} {model} workers in [[hosts]] or lower min_workers",
        )
    if initial > high:
        raise ScenarioError(
            t.key("max_workers"),
            f"{high} is fewer than the {initial} {model} workers the hosts start with",
            f"raise max_workers to at least {initial} or place fewer {model} workers",
        )
    placeable = initial + _free_places(hosts, models, model)
    if high > placeable:
        raise ScenarioError(
            t.key("max_workers"),
            f"{high} is more than the hosts can place: {initial} {model} workers now and room "
            f"for {placeable - initial} more of {models[model].worker_units} adjacent units",
            f"lower max_workers to {placeable} or add hosts with free units",
        )
    interval = t.number("interval_s", 15.0)
    if interval <= 0:
        raise ScenarioError(
            t.key("interval_s"),
            f"must be greater than 0, not {_show(interval)}",
            "give the seconds between two looks at the metric, e.g. 15",
        )
    warmup, cooldown = t.number("warmup_s", 60.0), t.number("cooldown_s", 0.0)
    stabilization = t.number("stabilization_s", 0.0)
    for key, value in (("warmup_s", warmup), ("cooldown_s", cooldown), ("stabilization_s", stabilization)):
        if value < 0:
            raise ScenarioError(
                t.key(key), f"must be 0 or more, not {_show(value)}", "give a number of seconds, 0 or more"
            )
    return AutoscalerSpec(
        model=model,
        metric=metric,
        target=target,
        min_workers=low,
        max_workers=high,
        interval_s=interval,
        warmup_s=warmup,
        cooldown_s=cooldown,
        stabilization_s=stabilization,
        **planner,
    )


def _planner_keys(t: _Table, role: str) -> dict[str, Any]:
    """The SLO planner's keys of table ``t`` for a pool of ``role``, checked."""
    if t.has("target"):
        raise ScenarioError(
            t.key("target"), f'is for the reactive metrics, and metric is "{PLANNER_METRIC}"',
            "remove target and give per_worker_qps, target_ttft_s or target_tbt_s",
        )
    fit = "target_tbt_s" if role == "decode" else "target_ttft_s"
    wrong = "target_ttft_s" if role == "decode" else "target_tbt_s"
    if t.has(wrong):
        what = "a decode pool is held to its time between tokens" if role == "decode" else (
            "only a decode pool is held to its time between tokens")
        raise ScenarioError(t.key(wrong), f"does not apply here: {what}", f"use {fit} instead")
    given = [k for k in _RATE_KEYS if t.has(k)]
    if not given:
        raise ScenarioError(
            t.key(fit), f'missing: metric "{PLANNER_METRIC}" needs a per-worker rate',
            f"give {fit} (the planner works out the rate) or per_worker_qps",
        )
    if len(given) > 1:
        raise ScenarioError(
            t.key(given[1]), f"is given with {given[0]}, and the planner takes one",
            f"keep {fit} or per_worker_qps, not both",
        )
    out: dict[str, Any] = {}
    key = given[0]
    value = t.number(key)
    if value <= 0:
        raise ScenarioError(
            t.key(key), f"must be greater than 0, not {_show(value)}",
            "give seconds (a target) or requests a second (per_worker_qps), e.g. 2",
        )
    out[key] = value
    if t.has("predictor"):
        out["predictor"] = t.choice("predictor", PREDICTORS)
    window = t.number("window_s", 60.0)
    if window <= 0:
        raise ScenarioError(
            t.key("window_s"), f"must be greater than 0, not {_show(window)}",
            "give the seconds of arrival rates the predictor reads, e.g. 60",
        )
    out["window_s"] = window
    if t.has("horizon_s"):
        horizon = t.number("horizon_s")
        if horizon < 0:
            raise ScenarioError(
                t.key("horizon_s"), f"must be 0 or more, not {_show(horizon)}",
                "give the seconds ahead to predict, e.g. the warm-up",
            )
        out["horizon_s"] = horizon
    return out


def _check_season(t: _Table, planner: dict[str, Any]) -> None:
    """``season_s``, the load's period: needed by the seasonal predictor, and long
    enough that the window a season before the predicted time has passed. The other
    predictors do not read it, so a file may keep it while it compares them."""
    seasonal = planner.get("predictor") == "seasonal"
    if not seasonal and not t.has("season_s"):
        return
    if not t.has("season_s"):
        raise ScenarioError(
            t.key("season_s"), 'missing: predictor "seasonal" needs the period of the load',
            "give the seconds after which the load repeats, e.g. traffic.period_s for a diurnal shape",
        )
    season = t.number("season_s")
    lead = planner.get("horizon_s", t.number("warmup_s", 60.0))
    least = lead + planner["window_s"] / 2
    if season <= least:
        raise ScenarioError(
            t.key("season_s"),
            f"{_show(season)} s is not longer than the lead ({_show(lead)} s) plus half the window "
            f"({_show(planner['window_s'] / 2)} s), so the load a season before the predicted time is not known yet",
            f"give a period longer than {_show(least)} s, or shorten horizon_s (warmup_s) or window_s",
        )
    planner["season_s"] = season


def _free_places(hosts: tuple[HostGroup, ...], models: dict[str, ModelSpec], model: str) -> int:
    """How many more ``model`` workers fit in the free runs of adjacent units the hosts
    leave, each host as the file lays it out."""
    size = models[model].worker_units
    total = 0
    for g in hosts:
        taken = [False] * g.units
        for slot in g.workers:
            for u in range(slot.first_unit, slot.first_unit + models[slot.model].worker_units):
                taken[u] = True
        run = fits = 0
        for busy in (*taken, True):
            if busy:
                fits += run // size
                run = 0
            else:
                run += 1
        total += g.count * fits
    return total
