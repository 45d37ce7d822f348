"""Starting, steering and watching emulator runs.

Plain functions shared by the REST API, the websocket consumers and the Celery
tasks. Playing a run (the loop inside the worker) is in
:mod:`reviewer.runs.player`; sweeps are in :mod:`reviewer.runs.sweeps`.

Kept as one module: starting a run, steering it and the watchdog's checks share the
run's budgets, limits and statuses; the hand-off, the player and sweeps are modules
beside it.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q, Sum
from django.utils import timezone
from kombu.exceptions import ChannelError

from emulator.scenario import Scenario, ScenarioError, load_scenario
from emulator.scenario.limits import loads_toml
from emulator.scenario.overrides import apply_overrides
from emulator.scenario.presets import PRESETS
from emulator.sim.engine import Engine
from reviewer.celery import app
from reviewer.errors import Conflict, Invalid, OverLimit
from reviewer.fleets.scenario_toml import trace_path_problem
from reviewer.fleets.scenario_view import run_facts
from reviewer.models import (
    CommandKind,
    EmulatorRun,
    FleetConfigVersion,
    ReviewSession,
    RunCommand,
    RunStatus,
    Sweep,
)
from reviewer.models.runs import ACTIVE_STATUSES, SPEEDS
from reviewer.realtime import groups as realtime
from reviewer.runs import broker

log = logging.getLogger(__name__)

# A worker playing a run beats at least once a second; a run whose heartbeat is
# older than this has lost its worker.
STALE_AFTER_S = 20.0

# A queued run this old while the broker's queue is empty lost its task; it is
# handed over again, at most MAX_DISPATCHES times before it is failed.
REQUEUE_AFTER_S = 10.0
MAX_DISPATCHES = 5

# Time limits of the run task: the paced wall time plus this margin, and a hard
# kill this long after the soft limit.
TIME_LIMIT_MARGIN_S = 120.0
HARD_LIMIT_EXTRA_S = 30.0
MAX_SPEED_LIMIT_S = 3600.0


@dataclass(frozen=True)
class ResolvedScenario:
    """A scenario ready to run, with the config version it came from."""

    scenario: Any  # emulator.scenario.Scenario
    config_version: FleetConfigVersion | None


def parse_speed(speed: Any) -> str:
    """Normalise 1, 10, 100, "10" or "max" to the stored spelling."""
    text = str(speed).strip().lower()
    if text.endswith(".0"):
        text = text[:-2]
    if text not in SPEEDS:
        raise Invalid("speed", f"speed: {speed!r} is not one of 1, 10, 100 or \"max\"")
    return text


def resolve_scenario(
    *,
    config_version: FleetConfigVersion | None = None,
    scenario: str | dict[str, Any] | None = None,
    session: ReviewSession | None = None,
    overrides: list[str] | tuple[str, ...] = (),
) -> ResolvedScenario:
    """The scenario a run or sweep asks for, with ``overrides`` applied.

    The source is, in order: ``scenario`` (TOML text, a preset name, or a dict in
    the TOML spelling), ``config_version``, or the session's fleet config.
    """

    try:
        if scenario is not None:
            loaded = _load_given(scenario)
        elif config_version is not None:
            loaded = _load_text(config_version.toml)
        elif session is not None and session.fleet_config is not None:
            config_version = session.fleet_config.latest_version()
            if config_version is None:
                raise Invalid("session", "session: its fleet config has no saved version yet; save it first")
            loaded = _load_text(config_version.toml)
        else:
            raise Invalid(
                "config_version",
                "config_version: give a fleet config version, a scenario (TOML text or a preset "
                "name), or a session that has a fleet config",
            )
    except ScenarioError as exc:
        raise Invalid("scenario", f"scenario: {exc}") from None
    if overrides:
        if not isinstance(overrides, list | tuple) or not all(isinstance(o, str) for o in overrides):
            raise Invalid("overrides", 'overrides: give a list of "key=value" strings')
        try:
            # Scenario.with_overrides, with the trace checked before the emulator reads it.

            data = apply_overrides(loaded.to_dict(), list(overrides))
            _check_trace(data, "overrides")
            # The budget is checked by check_request_budget against the setting.
            loaded = Scenario.from_dict(data, max_requests=None)
        except ScenarioError as exc:
            raise Invalid("overrides", f"overrides: {exc}") from None
    return ResolvedScenario(scenario=loaded, config_version=config_version)


def _check_trace(data: Any, field: str) -> None:
    """Refuse a trace path the server does not replay (see ``trace_path_problem``)."""
    problem = trace_path_problem(data)
    if problem:
        raise Invalid(field, f"{field}: {problem}")


def _load_text(text: str) -> Any:
    # Not TOML: a preset's name, or a TOML error that load_scenario reports.
    with contextlib.suppress(ScenarioError):
        _check_trace(loads_toml(text), "scenario")

    # No cap here: check_request_budget applies the RUN_REQUEST_BUDGET setting.
    return load_scenario(text, max_requests=None)


def _load_given(scenario: str | dict[str, Any]) -> Any:
    """A scenario sent by a user: a dict, TOML text, or a preset name, never a file path."""

    if isinstance(scenario, dict):
        _check_trace(scenario, "scenario")
        return Scenario.from_dict(scenario, max_requests=None)
    if not isinstance(scenario, str):
        raise Invalid("scenario", "scenario: give TOML text, a preset name or an object")
    if "\n" in scenario or "=" in scenario:
        return _load_text(scenario)
    name = scenario.strip()
    if name not in PRESETS:
        raise Invalid(
            "scenario", f"scenario: {name!r} is not a preset; use one of {', '.join(sorted(PRESETS))} "
            f"or give TOML text",
        )
    return _load_text(name)


def expected_requests(scenario: Any) -> int:
    """The requests a run is expected to simulate (arrivals times one plus retries)."""
    return int(scenario.expected_requests())


def check_request_budget(scenario: Any) -> None:
    """Refuse a scenario that would simulate more requests than RUN_REQUEST_BUDGET allows."""
    budget = settings.RUN_REQUEST_BUDGET
    expected = expected_requests(scenario)
    if expected > budget:
        raise Invalid(
            "scenario",
            f"scenario: about {expected:,} simulated requests (traffic x duration_s x (1 + "
            f"client.retries)) is over the "
            f"run budget of {budget:,}; lower traffic.qps, traffic.peak_qps or duration_s, or "
            f"raise the RUN_REQUEST_BUDGET setting",
        )


def check_budgets(*, user: Any, scenarios: list[Any], speed: str) -> None:
    """Refuse runs that would take one run, the user's runs or everyone's runs over a budget.

    Two measures: simulated requests (what a run costs a worker at speed max)
    and wall time, duration / speed (how long a paced run holds a worker).
    ``scenarios`` are the new runs (one, or a sweep's points); the runs
    already queued or running count against the user's and the global budgets.
    """
    wall_each = [0.0 if speed == "max" else float(s.duration_s) / float(speed) for s in scenarios]
    if max(wall_each, default=0.0) > settings.RUN_WALL_BUDGET_S:
        raise Invalid(
            "duration_s",
            f"duration_s: {scenarios[0].duration_s:g} simulated seconds at speed {speed} take "
            f"{max(wall_each):,.0f} s of a worker's time, over the {settings.RUN_WALL_BUDGET_S:,.0f} s "
            f"a run may take (RUN_WALL_BUDGET_S); raise the speed or shorten duration_s",
        )
    if max(wall_each, default=0.0) > settings.RUN_PACED_MAX_S:
        raise Invalid(
            "duration_s",
            f"duration_s: {scenarios[0].duration_s:g} simulated seconds at speed {speed} hold a worker for "
            f"{max(wall_each):,.0f} s, over the {settings.RUN_PACED_MAX_S:,.0f} s a paced run may take "
            f"(RUN_PACED_MAX_S); raise the speed (or use max), shorten duration_s, or raise the "
            f"RUN_PACED_MAX_S setting",
        )
    requests, wall = sum(expected_requests(s) for s in scenarios), sum(wall_each)
    active = EmulatorRun.objects.filter(status__in=ACTIVE_STATUSES)
    scopes = (
        ("your", "USER", active.filter(started_by=user), settings.USER_REQUEST_BUDGET, settings.USER_WALL_BUDGET_S),
        ("everyone's", "GLOBAL", active, settings.GLOBAL_REQUEST_BUDGET, settings.GLOBAL_WALL_BUDGET_S),
    )
    for whose, scope, runs, request_budget, wall_budget in scopes:
        used_requests = runs.aggregate(total=Sum("expected_requests"))["total"] or 0
        if used_requests + requests > request_budget:
            raise OverLimit(
                f"{scope}_REQUEST_BUDGET",
                f"about {requests:,} simulated requests more would take {whose} queued and running runs to "
                f"{used_requests + requests:,}, over the budget of {request_budget:,} "
                f"({scope}_REQUEST_BUDGET); wait for runs to finish, cancel some, or ask for fewer requests",
            )
        used_wall = sum(run.wall_s for run in runs.only("scenario", "speed"))
        if used_wall + wall > wall_budget:
            raise OverLimit(
                f"{scope}_WALL_BUDGET_S",
                f"{wall:,.0f} s more of paced runs would take {whose} queued and running runs to "
                f"{used_wall + wall:,.0f} s of workers' time, over the budget of {wall_budget:,.0f} s "
                f"({scope}_WALL_BUDGET_S); wait for runs to finish, cancel some, or raise the speed",
            )


def active_runs_for(user: Any) -> int:
    """Runs and sweeps of ``user`` that are queued or running; a sweep counts once."""

    runs = EmulatorRun.objects.filter(started_by=user, sweep__isnull=True, status__in=ACTIVE_STATUSES)
    sweeps = Sweep.objects.filter(started_by=user, status__in=ACTIVE_STATUSES)
    return runs.count() + sweeps.count()


def check_run_limit(user: Any) -> None:
    """Refuse a new run when the user already has RUNS_PER_USER going."""
    limit = settings.RUNS_PER_USER
    going = active_runs_for(user)
    if going >= limit:
        raise OverLimit(
            "RUNS_PER_USER",
            f"you have {going} runs or sweeps going and the limit is {limit} (RUNS_PER_USER); "
            f"wait for one to finish or cancel one",
        )


def time_limits_for(*, duration_s: float, speed: str) -> tuple[float, float]:
    """Soft and hard time limits (seconds) for playing a run."""
    soft = MAX_SPEED_LIMIT_S if speed == "max" else duration_s / float(speed) * 1.5 + TIME_LIMIT_MARGIN_S
    return soft, soft + HARD_LIMIT_EXTRA_S


def enqueue_run(run: EmulatorRun) -> None:
    """Queue the run for a worker: the hand-off gives it over when a slot is free, fairly between users.

    The run waits in the database (``awaiting_slot``); once the current
    transaction commits, a dispatch is asked for (see
    :mod:`reviewer.runs.handoff`).
    """
    # cycle: handoff imports hand_to_broker from this module at load time
    from reviewer.runs.handoff import dispatch_soon

    dispatch_soon()


def hand_to_broker(run: EmulatorRun) -> None:
    """Send the run's task to the broker once the current transaction commits.

    The task carries the run's ``dispatches``: a run handed to the broker again
    (see :func:`runs_requeue_lost`) is started only by its latest task.
    """
    soft, hard = time_limits_for(duration_s=run.duration_s, speed=run.speed)
    # The run stays queued when the broker refuses; runs_requeue_lost hands it over once it answers.
    broker.send_task_after_commit("run_emulation", [run.pk, run.dispatches], f"run {run.pk}",
                                  "the stale-run watchdog", soft_time_limit=soft, time_limit=hard)


def wait_enqueued(timeout_s: float = 10.0) -> None:
    """Block until the tasks handed over so far reached the broker (for commands and tests)."""
    broker.wait_sent(timeout_s)


def build_run(
    *,
    user: Any,
    resolved: ResolvedScenario,
    seed: int | None,
    speed: str,
    session: ReviewSession | None,
    overrides: list[str] | tuple[str, ...] = (),
    sweep: Any = None,
    sweep_value: float | None = None,
) -> EmulatorRun:
    """Create (not enqueue) a run row for a resolved scenario."""

    scenario = resolved.scenario
    effective_seed = int(scenario.seed if seed is None else seed)
    # The charts' facts (batching, SLOs, scheduled faults) travel with the layout.
    layout = {**Engine(scenario, seed=effective_seed).layout(), "facts": run_facts(scenario)}
    return EmulatorRun.objects.create(
        config_version=resolved.config_version,
        session=session,
        sweep=sweep,
        sweep_value=sweep_value,
        started_by=user,
        scenario=scenario.to_dict(),
        overrides=list(overrides),
        seed=effective_seed,
        speed=speed,
        layout=layout,
        expected_requests=expected_requests(scenario),
        awaiting_slot=True,
    )


@transaction.atomic
def run_start(
    *,
    user: Any,
    config_version: FleetConfigVersion | None = None,
    scenario: str | dict[str, Any] | None = None,
    session: ReviewSession | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    seed: int | None = None,
    speed: Any = 10,
) -> EmulatorRun:
    """Queue a run of a scenario and hand it to a worker on commit.

    Raises OverLimit when the user has too many runs going, and
    Invalid for a scenario, override, speed or budget problem.
    """
    if session is not None and not session.is_participant(user) and not user.is_staff:
        raise Invalid("session", "session: only its owner and reviewers can start runs in it")
    speed_text = parse_speed(speed)
    check_run_limit(user)
    resolved = resolve_scenario(
        config_version=config_version, scenario=scenario, session=session, overrides=overrides
    )
    check_request_budget(resolved.scenario)
    check_budgets(user=user, scenarios=[resolved.scenario], speed=speed_text)
    run = build_run(
        user=user, resolved=resolved, seed=seed, speed=speed_text, session=session, overrides=overrides
    )
    enqueue_run(run)
    return run


@transaction.atomic
def run_cancel(*, run: EmulatorRun, user: Any) -> EmulatorRun:
    """Cancel a run: at once if it has not started, else at the worker's next step."""
    who = getattr(user, "username", "") or "a user"
    now = timezone.now()
    reason = f"cancelled by {who}"
    cancelled_queued = EmulatorRun.objects.filter(pk=run.pk, status=RunStatus.QUEUED).update(
        status=RunStatus.CANCELLED, reason=reason, finished_at=now
    )
    run.refresh_from_db()
    if cancelled_queued:
        publish_status(run)
        if not run.awaiting_slot:  # it held a slot: the next waiting run may take it
            enqueue_run(run)
        return run
    if run.is_final:
        raise Conflict(f"run {run.pk} is already {run.status}; nothing to cancel", field="status")
    RunCommand.objects.create(run=run, kind=CommandKind.CANCEL, command=reason, created_by=user)
    return run


def parse_fault(fault: dict[str, Any] | str) -> str:
    """A fault in the [[faults]] vocabulary as an engine command, e.g. "kill host:2".

    Accepts {"kill": "host:2"}, {"restore": "host:2"}, {"action": "kill",
    "target": "host:2"} or the command text itself.
    """
    if isinstance(fault, str):
        parts = fault.split()
        if len(parts) == 2:
            return parse_fault({"action": parts[0], "target": parts[1]})
        raise Invalid("fault", f'fault: {fault!r} is not "kill TARGET" or "restore TARGET"')
    if "action" in fault:
        action, target = fault.get("action"), fault.get("target")
    else:
        actions = [key for key in ("kill", "restore") if key in fault]
        if len(actions) != 1:
            raise Invalid(
                "kill", 'fault: give exactly one of "kill" or "restore", e.g. {"kill": "host:2"}'
            )
        action, target = actions[0], fault[actions[0]]
    if action not in ("kill", "restore"):
        raise Invalid("action", f'action: {action!r} is not "kill" or "restore"')
    if not isinstance(target, str) or not target.strip():
        raise Invalid(
            str(action), f"{action}: give a target: dispatcher:MODEL, host:INDEX or worker:MODEL:INDEX"
        )
    return f"{action} {target.strip()}"


def validate_fault_target(run: EmulatorRun, command: str) -> None:
    """Check the target against the run's scenario with the emulator's own rules."""

    action, target = command.split(" ", 1)
    data = dict(run.scenario)
    data["faults"] = [{"at_s": 0.0, action: target}]
    try:
        Scenario.from_dict(data, max_requests=None)
    except ScenarioError as exc:
        message = str(exc).split(": ", 1)[-1]
        raise Invalid(action, f"{action}: {message}") from None


@transaction.atomic
def run_inject(*, run: EmulatorRun, user: Any, fault: dict[str, Any] | str) -> RunCommand:
    """Queue a fault for a running run; the worker applies it at its next step."""
    command = parse_fault(fault)
    run.refresh_from_db()
    if run.is_final:
        raise Conflict(f"run {run.pk} is already {run.status}; faults go to running runs", field="status")
    validate_fault_target(run, command)
    sent = RunCommand.objects.filter(run=run).count()
    if sent >= settings.RUN_COMMANDS_MAX:
        raise OverLimit(
            "RUN_COMMANDS_MAX",
            f"run {run.pk} already took {sent} commands, the most a run takes (RUN_COMMANDS_MAX); "
            "start a new run",
        )
    return RunCommand.objects.create(run=run, kind=CommandKind.FAULT, command=command, created_by=user)


def status_message(run: EmulatorRun) -> dict[str, Any]:
    """The group message announcing a run's status (and its summary once final)."""
    return {"type": "run.status", "status": run.status, "reason": run.reason or None,
            "summary": run.summary if run.is_final else None}


def publish_status(run: EmulatorRun) -> None:
    """Tell the run's viewers its status once the current transaction commits."""
    realtime.publish_on_commit(realtime.run_group(run.pk), status_message(run))


def runs_reap_stale(*, stale_after_s: float = STALE_AFTER_S) -> list[int]:
    """Mark failed every running run whose worker stopped beating; return their ids.

    A worker plays a run and beats at least once a second, so a heartbeat this
    old means the process holding the run is gone. Called periodically in every
    worker, when a run task starts, and when a run is read.
    """
    cutoff = timezone.now() - timedelta(seconds=stale_after_s)
    stale = EmulatorRun.objects.filter(status=RunStatus.RUNNING).filter(
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True)
    )
    reaped: list[int] = []
    for run in stale:
        last = run.heartbeat_at.strftime("%H:%M:%S UTC") if run.heartbeat_at else "never"
        reason = (
            f"the worker playing it ({run.worker or 'unknown'}) stopped: no heartbeat for "
            f"{stale_after_s:.0f} s (last {last}); start the run again"
        )
        with transaction.atomic():
            updated = EmulatorRun.objects.filter(
                pk=run.pk, status=RunStatus.RUNNING, attempts=run.attempts
            ).filter(Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True)).update(
                status=RunStatus.FAILED, reason=reason, finished_at=timezone.now()
            )
            if updated:
                run.refresh_from_db()
                publish_status(run)
                reaped.append(run.pk)
    if reaped:
        log.warning("marked runs %s failed: their workers stopped", reaped)
    return reaped


def broker_queue_length() -> int:
    """Tasks waiting in the broker's default queue (0 when the queue does not exist)."""


    with app.connection_for_write() as connection:
        try:
            declared = connection.default_channel.queue_declare(queue=app.conf.task_default_queue, passive=True)
        except ChannelError:  # the broker drops an empty queue
            return 0
        return int(declared.message_count)


def runs_requeue_lost(*, waiting_s: float = REQUEUE_AFTER_S) -> dict[str, list[int]]:
    """Hand queued runs whose task was lost back to the broker; fail those handed over too often.

    A broker restarted without its data (or a task dropped on the way) leaves
    runs ``queued`` with no task to start them. A run handed to the broker
    over ``waiting_s`` ago and not started while the broker's queue is empty
    has no task waiting, so it is handed over again (runs still waiting for a
    slot have no task yet and are the hand-off's); its older tasks, if one ever turns up, no longer
    start it. Called by every worker's watchdog (so at a worker's start too)
    and by the beat.
    """
    cutoff = timezone.now() - timedelta(seconds=waiting_s)
    waiting = EmulatorRun.objects.filter(status=RunStatus.QUEUED, awaiting_slot=False, enqueued_at__lt=cutoff)
    if not waiting.exists() or broker_queue_length() > 0:
        return {"requeued": [], "failed": []}
    requeued: list[int] = []
    failed: list[int] = []
    for run_id in list(waiting.values_list("pk", flat=True)):
        with transaction.atomic():
            run = EmulatorRun.objects.select_for_update().filter(
                pk=run_id, status=RunStatus.QUEUED, awaiting_slot=False, enqueued_at__lt=cutoff).first()
            if run is None:
                continue
            if run.dispatches >= MAX_DISPATCHES:
                run.status, run.finished_at = RunStatus.FAILED, timezone.now()
                run.reason = (f"it was handed to the workers {run.dispatches + 1} times and none started it; "
                              "check that a Celery worker is running, then start the run again")
                run.save(update_fields=["status", "reason", "finished_at"])
                publish_status(run)
                failed.append(run_id)
                continue
            run.dispatches += 1
            run.enqueued_at = timezone.now()
            run.save(update_fields=["dispatches", "enqueued_at"])
            hand_to_broker(run)
            requeued.append(run_id)
    if requeued or failed:
        log.warning("queued runs without a task: handed %s to the broker again, failed %s", requeued, failed)
    return {"requeued": requeued, "failed": failed}
