"""Sweeps: one scenario run at speed max for each value of one key.

The points are runs of the sweep's owner, queued like any other run: the
dispatcher hands them to free worker slots fairly between users (see
:mod:`reviewer.runs.fair_order`), spread over every worker there is, which is how
sweeps scale past one machine. When the last point ends, its worker gathers
the summaries into a curve (p99 latency and ok-rate against the value) and
answers "the smallest value that meets p99 <= target"; the watchdog finishes
a sweep whose last worker died first.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

from django.db import transaction
from django.utils import timezone

from reviewer.errors import Conflict, Invalid
from reviewer.models import EmulatorRun, FleetConfigVersion, ReviewSession, RunStatus, Sweep
from reviewer.models.runs import FINAL_STATUSES
from reviewer.runs.handoff import dispatch_soon
from reviewer.runs.services import (
    build_run,
    check_budgets,
    check_request_budget,
    check_run_limit,
    resolve_scenario,
    run_cancel,
    time_limits_for,
)

MAX_SWEEP_POINTS = 20


def parse_values(values: Any) -> list[float]:
    """The swept values as numbers; a clear error names what is wrong."""
    if not isinstance(values, list | tuple) or not values:
        raise Invalid("values", "values: give a list of numbers, e.g. [1, 2, 3, 4, 5]")
    if len(values) > MAX_SWEEP_POINTS:
        raise Invalid("values", f"values: at most {MAX_SWEEP_POINTS} points per sweep")
    parsed: list[float] = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise Invalid("values", f"values: {value!r} is not a number")
        parsed.append(value)
    if len(set(parsed)) != len(parsed):
        raise Invalid("values", "values: each value may appear once")
    return parsed


def override_text(key: str, value: float) -> str:
    """``key=value`` with whole numbers written without a fraction (hosts[0].count=3)."""
    shown = int(value) if float(value).is_integer() else value
    return f"{key}={shown}"


@transaction.atomic
def sweep_start(
    *,
    user: Any,
    key: str,
    values: Any,
    config_version: FleetConfigVersion | None = None,
    scenario: str | dict[str, Any] | None = None,
    session: ReviewSession | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    seed: int | None = None,
    target_p99_s: float | None = None,
    min_ok_rate: float | None = None,
) -> Sweep:
    """Create a sweep and its runs, and send them to the workers on commit."""
    if session is not None and not session.is_participant(user) and not user.is_staff:
        raise Invalid("session", "session: only its owner and reviewers can start sweeps in it")
    if not isinstance(key, str) or not key.strip():
        raise Invalid("key", 'key: name the key to sweep, e.g. "hosts[0].count" or "traffic.qps"')
    key = key.strip()
    points = parse_values(values)
    if target_p99_s is not None and not (isinstance(target_p99_s, int | float) and target_p99_s > 0):
        raise Invalid("target_p99_s", "target_p99_s: give a positive number of seconds")
    check_run_limit(user)
    base = resolve_scenario(config_version=config_version, scenario=scenario, session=session,
                            overrides=overrides)
    effective_seed = int(base.scenario.seed if seed is None else seed)
    sweep = Sweep.objects.create(
        session=session, config_version=base.config_version, started_by=user,
        scenario=base.scenario.to_dict(), key=key, values=points, seed=effective_seed,
        target_p99_s=target_p99_s, min_ok_rate=min_ok_rate, status=RunStatus.RUNNING,
    )
    resolved_points = []
    for value in points:
        point_overrides = [*overrides, override_text(key, value)]
        try:
            resolved = resolve_scenario(config_version=config_version, scenario=scenario,
                                        session=session, overrides=point_overrides)
        except Invalid as exc:
            raise Invalid("values", f"values: at {override_text(key, value)}: {exc.message}") from None
        check_request_budget(resolved.scenario)
        resolved_points.append((value, point_overrides, resolved))
    # The sweep as a whole counts against the user's and everyone's budgets.
    check_budgets(user=user, scenarios=[r.scenario for _, _, r in resolved_points], speed="max")
    runs: list[EmulatorRun] = []
    for value, point_overrides, resolved in resolved_points:
        runs.append(build_run(user=user, resolved=resolved, seed=effective_seed, speed="max",
                              session=session, overrides=point_overrides, sweep=sweep,
                              sweep_value=value))
    run_ids = [run.pk for run in runs]
    soft, hard = max(time_limits_for(duration_s=run.duration_s, speed="max") for run in runs)
    sweep_id = sweep.pk
    transaction.on_commit(lambda: enqueue_sweep(sweep_id, run_ids, soft, hard))
    return sweep


def sweep_finish_if_ended(*, sweep_id: int) -> bool:
    """Finish the sweep when none of its points is queued or running; True if it was finished now."""
    if EmulatorRun.objects.filter(sweep_id=sweep_id).exclude(status__in=FINAL_STATUSES).exists():
        return False
    if Sweep.objects.filter(pk=sweep_id, status__in=FINAL_STATUSES).exists():
        return False
    sweep_finish(sweep_id=sweep_id)
    return True


@transaction.atomic
def sweep_cancel(*, sweep: Sweep, user: Any) -> Sweep:
    """Cancel a sweep: its queued points at once, its running points at their next step."""

    sweep = Sweep.objects.select_for_update().get(pk=sweep.pk)
    if sweep.is_final:
        raise Conflict(f"sweep {sweep.pk} is already {sweep.status}; nothing to cancel", field="status")
    for run in sweep.runs.exclude(status__in=FINAL_STATUSES):
        with contextlib.suppress(Conflict):  # a point that ended meanwhile
            run_cancel(run=run, user=user)
    who = getattr(user, "username", "") or "a user"
    sweep.status, sweep.reason, sweep.finished_at = RunStatus.CANCELLED, f"cancelled by {who}", timezone.now()
    sweep.curve = sweep_curve(sweep)
    sweep.save(update_fields=["status", "reason", "finished_at", "curve"])
    return sweep


def enqueue_sweep(sweep_id: int, run_ids: list[int], soft: float, hard: float) -> None:
    """The points wait for worker slots like other runs: ask for a dispatch (called on commit)."""

    dispatch_soon()


def ok_rate(summary: dict[str, Any]) -> float | None:
    """ok / offered, or None when nothing was offered."""
    offered = summary.get("offered") or 0
    return summary.get("ok", 0) / offered if offered else None


def sweep_curve(sweep: Sweep) -> list[dict[str, Any]]:
    """One point per value, in value order, from the runs that have finished."""
    points = []
    for run in sweep.runs.order_by("sweep_value", "id"):
        summary = run.summary or {}
        points.append({
            "value": run.sweep_value,
            "run_id": run.pk,
            "status": run.status,
            "p99_s": (summary.get("latency_s") or {}).get("p99"),
            "ok_rate": ok_rate(summary) if summary else None,
            "served_qps": summary.get("served_qps"),
        })
    return points


def sweep_answer(sweep: Sweep, curve: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The smallest value whose run is done and meets p99 <= target (and the ok-rate floor)."""
    if sweep.target_p99_s is None:
        return None
    for point in curve:
        meets_p99 = point["status"] == RunStatus.DONE and point["p99_s"] is not None \
            and point["p99_s"] <= sweep.target_p99_s
        meets_ok = sweep.min_ok_rate is None or (
            point["ok_rate"] is not None and point["ok_rate"] >= sweep.min_ok_rate)
        if meets_p99 and meets_ok:
            return {"value": point["value"], "p99_s": point["p99_s"], "ok_rate": point["ok_rate"],
                    "text": f"{override_text(sweep.key, point['value'])} is the smallest value with "
                            f"p99 <= {sweep.target_p99_s:g} s"}
    return {"value": None, "p99_s": None, "ok_rate": None,
            "text": f"no swept value of {sweep.key} meets p99 <= {sweep.target_p99_s:g} s; "
                    f"{why_no_value(sweep, curve)}"}


def why_no_value(sweep: Sweep, curve: list[dict[str, Any]]) -> str:
    """Why no point of a finished sweep met its target, from the curve and the scenario:
    a target below the latency floor, p99 still falling at the end of the range, p99
    levelling off above the target, or p99 growing with the value."""
    target = float(sweep.target_p99_s or 0)
    done = [p for p in curve if p["status"] == RunStatus.DONE and p["p99_s"] is not None]
    if not done:
        return "no point finished with a completed request, so there is no p99 to compare"
    floor = _latency_floor(sweep.scenario or {})
    if floor is not None and target < floor:
        return (f"the target is below the latency floor of {floor:g} s (the batch time every request "
                f"waits for), which no value of {sweep.key} changes")
    best = min(done, key=lambda p: p["p99_s"])
    p99s = [p["p99_s"] for p in done]
    if sweep.min_ok_rate is not None and any(p <= target for p in p99s):
        return (f"the values whose p99 meets it serve fewer than {100 * sweep.min_ok_rate:g}% of requests "
                "(a short p99 of the few that were served)")
    if len(done) >= 2 and p99s[-1] < p99s[-2] * 0.95 and best is done[-1]:
        return (f"p99 still falls at the largest value ({best['p99_s']:.2f} s at {best['value']:g}): "
                "sweep larger values")
    if len(done) >= 2 and best is done[0] and p99s[-1] > p99s[0] * 1.05:
        return (f"p99 grows with {sweep.key} and is already {best['p99_s']:.2f} s at the smallest value "
                f"({best['value']:g}): sweep smaller values")
    if len(done) >= 2:
        return (f"p99 levels off at about {best['p99_s']:.2f} s (best at {best['value']:g}), above the "
                f"target: more of {sweep.key} does not bring it down; the limit is elsewhere")
    return f"its one point has p99 {best['p99_s']:.2f} s"


def _latency_floor(scenario: dict[str, Any]) -> float | None:
    """The shortest batch time of the statically batched models (None: none is static):
    no request completes faster."""
    base = scenario.get("worker") or {}
    floors = []
    for spec in (scenario.get("models") or {}).values():
        worker = {**base, **((spec or {}).get("worker") or {})}
        if worker.get("batching", "static") == "static":
            floors.append(float(worker.get("batch_s", 1.5)))
    return min(floors) if floors else None


@transaction.atomic
def sweep_finish(*, sweep_id: int) -> Sweep:
    """Gather the runs' summaries into the curve and the answer. Idempotent."""
    sweep = Sweep.objects.select_for_update().get(pk=sweep_id)
    if sweep.is_final:
        return sweep
    curve = sweep_curve(sweep)
    sweep.curve = curve
    sweep.answer = sweep_answer(sweep, curve)
    if any(point["status"] == RunStatus.DONE for point in curve):
        sweep.status = RunStatus.DONE
    else:
        sweep.status = RunStatus.FAILED
        sweep.reason = "no run of the sweep finished; see the runs' reasons"
    sweep.finished_at = timezone.now()
    sweep.save(update_fields=["curve", "answer", "status", "reason", "finished_at"])
    return sweep


def sweeps_finish_stalled() -> list[int]:
    """Finish every sweep whose runs are all final but which is not; return their ids.

    A worker that dies after its point ended but before finishing the sweep
    leaves it so; the watchdog and the periodic reaper call this so such a
    sweep still gets its curve.
    """
    unfinished = Sweep.objects.exclude(status__in=FINAL_STATUSES).exclude(
        runs__status__in=[s for s in RunStatus if s not in FINAL_STATUSES]
    ).filter(runs__isnull=False).distinct()
    finished = []
    for sweep_id in unfinished.values_list("pk", flat=True):
        sweep_finish(sweep_id=sweep_id)
        finished.append(sweep_id)
    return finished
