"""Playing a run inside a Celery worker: pace the engine, store and publish frames.

The engine advances in simulated time; this loop paces it to ``speed`` x wall
time, advancing only to frame boundaries so that every live command lands on a
boundary that a re-run can hit again. A re-run (after the first worker died)
replays the stored part flat out without storing or publishing it, re-applies
the recorded commands after the same frames, and goes on live from there: same
scenario and seed give the same frames, so nothing is stored twice.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Callable
from typing import Any, TypeVar

from celery.exceptions import SoftTimeLimitExceeded
from channels.layers import get_channel_layer
from django.db import OperationalError, transaction
from django.db.models import Max, QuerySet
from django.utils import timezone

from emulator.scenario import Scenario, ScenarioError
from emulator.sim.engine import Engine
from reviewer.models import CommandKind, EmulatorRun, RunCommand, RunFrame, RunStatus
from reviewer.realtime import groups as realtime
from reviewer.runs.handoff import dispatch_quietly
from reviewer.runs.services import publish_status, runs_reap_stale, status_message
from reviewer.runs.sweeps import sweep_finish_if_ended

log = logging.getLogger(__name__)

# A frame published later than this after its paced due time is "behind".
BEHIND_TOLERANCE_S = 0.5
# How often the row's heartbeat is refreshed (the watchdog allows 20 s).
HEARTBEAT_EVERY_S = 1.0
# Longest sleep between steps, so commands are picked up promptly.
MAX_SLEEP_S = 0.25
# After a failed publish, frames are not published for this long (see GroupPublisher).
PUBLISH_PAUSE_S = 10.0
# A run whose worker died this many times is not handed out again: something in
# the run itself (memory, say) may be what kills the worker.
MAX_ATTEMPTS = 3
# At speed max, size steps to take about this long, so commands and heartbeats
# are still handled often.
MAX_STEP_WALL_S = 0.25
MAX_STEP_FRAMES = 64


# A write SQLite refused as locked (after its own 30 s wait) is tried this many times in all.
LOCKED_ATTEMPTS = 3
LOCKED_BACKOFF_S = 1.0

T = TypeVar("T")


def retry_when_locked(write: Callable[[], T]) -> T:
    """Run ``write`` again when the database answers "database is locked".

    Another user's long write (a big re-anchoring, say) must not fail a
    healthy run: the player waits and tries again instead.
    """
    for attempt in range(1, LOCKED_ATTEMPTS + 1):
        try:
            return write()
        except OperationalError as exc:
            if "locked" not in str(exc) or attempt == LOCKED_ATTEMPTS:
                raise
            log.warning("database locked; writing again (attempt %d of %d)", attempt + 1, LOCKED_ATTEMPTS)
            time.sleep(LOCKED_BACKOFF_S * attempt)
    raise AssertionError("unreachable")


class RunAbandoned(Exception):
    """Another attempt took the run over, or the watchdog failed it."""


class GroupPublisher:
    """Sends messages to one channel group from a worker, on one private event loop.

    One loop for the whole run keeps channels-redis's connection pool alive
    between frames instead of reconnecting for each one. A send is bounded by
    ``realtime.PUBLISH_TIMEOUT_S``; after a failure, sends are skipped for
    ``PUBLISH_PAUSE_S``, so a stalled Redis costs the run one timeout now and
    then, never its pacing or its heartbeat. Viewers fill the gap from the
    database.
    """

    def __init__(self, group: str) -> None:
        self.group = group
        self.layer = get_channel_layer()
        self.loop = asyncio.new_event_loop()
        self.paused_until = 0.0

    def send(self, message: dict[str, Any]) -> None:
        """Publish now; a channel layer failure is logged, the DB stays the record."""
        if self.layer is None or time.monotonic() < self.paused_until:
            return
        try:
            self.loop.run_until_complete(
                asyncio.wait_for(self.layer.group_send(self.group, message), realtime.PUBLISH_TIMEOUT_S))
        except Exception:
            self.paused_until = time.monotonic() + PUBLISH_PAUSE_S
            log.warning("could not publish %s to %s; not publishing for %.0f s",
                        message.get("type"), self.group, PUBLISH_PAUSE_S, exc_info=True)

    def close(self) -> None:
        """Close the connections and the loop."""
        try:
            if self.layer is not None and hasattr(self.layer, "close_pools"):
                self.loop.run_until_complete(self.layer.close_pools())
        except Exception:
            log.debug("closing channel layer pools failed", exc_info=True)
        finally:
            self.loop.close()


def claim_run(run_id: int, worker: str, dispatch: int | None = None) -> EmulatorRun | None:
    """Mark the run running for this attempt; None when it is already final.

    None too for a task superseded by a later hand-off of the run
    (``dispatch`` older than the run's ``dispatches``; a task without one is
    the first hand-off).
    """
    with transaction.atomic():
        run = EmulatorRun.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.is_final or (dispatch or 0) != run.dispatches:
            return None
        now = timezone.now()
        if run.attempts >= MAX_ATTEMPTS:
            run.status = RunStatus.FAILED
            run.reason = (f"its worker died {run.attempts} times while playing it; lower traffic.qps or "
                          f"duration_s, or check the workers' memory")
            run.finished_at = now
            run.save(update_fields=["status", "reason", "finished_at"])
            publish_status(run)
            return None
        run.status = RunStatus.RUNNING
        run.worker = worker
        run.attempts += 1
        run.heartbeat_at = now
        if run.started_at is None:
            run.started_at = now
        run.save(update_fields=["status", "worker", "attempts", "heartbeat_at", "started_at"])
        if run.attempts == 1:
            publish_status(run)
    return run


def _recorded_frame(command: RunCommand) -> int:
    """The frame count after which a recorded command was applied."""
    frame = command.applied_after_frame
    # The replay list is queried with applied_after_frame__isnull=False.
    assert frame is not None, f"command {command.pk} was never applied"
    return frame


class RunPlayer:
    """One attempt at playing one run."""

    def __init__(self, run: EmulatorRun) -> None:
        self.run = run
        self.scenario = Scenario.from_dict(run.scenario, max_requests=None)
        self.engine = Engine(self.scenario, seed=run.seed)
        self.sample_s = float(self.scenario.sample_s)
        self.duration_s = float(self.scenario.duration_s)
        self.total_frames = math.ceil(self.duration_s / self.sample_s - 1e-9)
        self.speed = run.speed_factor
        self.frames_done = 0
        stored = RunFrame.objects.filter(run=run).aggregate(top=Max("i"))["top"]
        # Frames are stored in order, so the stored ones are 0..top.
        self.resume_from = 0 if stored is None else stored + 1
        self.replay = list(
            RunCommand.objects.filter(run=run, applied_after_frame__isnull=False)
            .order_by("applied_after_frame", "id")
        )
        self.publisher = GroupPublisher(realtime.run_group(run.pk))
        self.last_beat = 0.0
        self.behind = run.behind
        self.step_frames = 1
        self.cancelled_by: str | None = None

    # -- the loop ---------------------------------------------------------------

    def play(self) -> EmulatorRun:
        """Play to the end, a cancel, or a failure; return the run as finished."""
        try:
            self.fast_forward()
            if self.cancelled_by is not None:
                return self.finish(RunStatus.CANCELLED, self.cancelled_by)
            self.play_live()
            if self.engine.done:
                return self.finish(RunStatus.DONE, "")
            return self.run
        finally:
            self.publisher.close()

    def fast_forward(self) -> None:
        """Recompute the frames already stored by an earlier attempt, flat out."""
        while self.frames_done < self.resume_from and not self.engine.done:
            self.apply_recorded()
            target = min(self.resume_from, self.next_replay_frame())
            frames = self.engine.advance_to(self.boundary(target))
            self.frames_done += len(frames)
            self.beat()
        self.apply_recorded()

    def play_live(self) -> None:
        """Advance with the wall clock, storing and publishing each new frame."""
        start_wall = time.monotonic()
        start_sim = self.engine.now_s
        while not self.engine.done:
            if self.apply_pending():
                return
            if self.speed is None:
                target = self.frames_done + self.step_frames
            else:
                due_sim = start_sim + (time.monotonic() - start_wall) * self.speed
                target = int(due_sim / self.sample_s + 1e-9)
                if target <= self.frames_done:
                    next_due = start_wall + (self.boundary(self.frames_done + 1) - start_sim) / self.speed
                    time.sleep(max(0.0, min(MAX_SLEEP_S, next_due - time.monotonic())))
                    self.beat()
                    continue
            # A run that fell far behind catches up in bounded steps, so commands
            # and heartbeats are still handled between them.
            target = min(target, self.frames_done + MAX_STEP_FRAMES, self.total_frames)
            began = time.monotonic()
            frames = self.engine.advance_to(self.boundary(target))
            made = time.time()
            if self.speed is None:
                self.tune_step(time.monotonic() - began)
            now = time.monotonic()
            records = []
            for frame in frames:
                data = frame.to_dict()
                late = False
                if self.speed is not None:
                    due = start_wall + (float(data["t_s"]) - start_sim) / self.speed
                    late = now - due > BEHIND_TOLERANCE_S
                data["behind"] = late
                self.behind = self.behind or late
                records.append(data)
            self.frames_done += len(frames)
            self.store_and_publish(records, made)

    def tune_step(self, took_s: float) -> None:
        """At speed max, grow or shrink the frames per step toward MAX_STEP_WALL_S."""
        if took_s < MAX_STEP_WALL_S / 2:
            self.step_frames = min(self.step_frames * 2, MAX_STEP_FRAMES)
        elif took_s > MAX_STEP_WALL_S and self.step_frames > 1:
            self.step_frames //= 2

    # -- commands ---------------------------------------------------------------

    def next_replay_frame(self) -> int:
        """The frame count after which the next recorded command applies."""
        return _recorded_frame(self.replay[0]) if self.replay else self.resume_from

    def apply_recorded(self) -> None:
        """Re-apply recorded faults that an earlier attempt applied after this frame."""
        while self.replay and _recorded_frame(self.replay[0]) <= self.frames_done:
            command = self.replay.pop(0)
            if command.kind == CommandKind.FAULT and not command.error:
                self.engine.inject(command.command)
            elif command.kind == CommandKind.CANCEL:
                # An earlier attempt died between taking the cancel and finishing.
                self.cancelled_by = command.command

    def apply_pending(self) -> bool:
        """Apply commands sent since the last step; True when the run was cancelled."""

        pending = list(RunCommand.objects.filter(run=self.run, applied_after_frame__isnull=True).order_by("id"))
        for command in pending:
            error = ""
            if command.kind == CommandKind.FAULT:
                try:
                    self.engine.inject(command.command)
                except (ScenarioError, ValueError) as exc:
                    error = str(exc)
            updated = RunCommand.objects.filter(pk=command.pk, applied_after_frame__isnull=True).update(
                applied_after_frame=self.frames_done, applied_at_s=self.engine.now_s, error=error
            )
            if updated and command.kind == CommandKind.CANCEL:
                self.finish(RunStatus.CANCELLED, command.command)
                return True
        return False

    # -- storage and status -----------------------------------------------------

    def boundary(self, frames: int) -> float:
        """Simulated time at the end of frame number ``frames`` (1-based), capped."""
        return min(frames * self.sample_s, self.duration_s)

    def mine(self) -> QuerySet[EmulatorRun]:
        """This attempt's run row, if nobody else took it over or finished it."""
        return EmulatorRun.objects.filter(pk=self.run.pk, status=RunStatus.RUNNING, attempts=self.run.attempts)

    def beat(self, force: bool = False) -> None:
        """Refresh the heartbeat (at most once a second unless forced)."""
        now = time.monotonic()
        if not force and now - self.last_beat < HEARTBEAT_EVERY_S:
            return
        self.last_beat = now
        if not retry_when_locked(lambda: self.mine().update(heartbeat_at=timezone.now())):
            raise RunAbandoned(f"run {self.run.pk} was taken over or failed by the watchdog")

    def store_and_publish(self, records: list[dict[str, Any]], made: float) -> None:
        """Store the frames (skipping any already stored), then publish them.

        Each message carries ``created``, the wall time the engine made the
        frame, so viewers (and the stream benchmark) can tell its lag.
        """
        if not records:
            return

        def store() -> int:
            with transaction.atomic():
                RunFrame.objects.bulk_create(
                    [RunFrame(run_id=self.run.pk, i=d["i"], t_s=d["t_s"], data=d) for d in records],
                    ignore_conflicts=True,
                )
                return self.mine().update(
                    heartbeat_at=timezone.now(), frames_stored=records[-1]["i"] + 1,
                    sim_s=self.engine.now_s, behind=self.behind,
                )

        if not retry_when_locked(store):
            raise RunAbandoned(f"run {self.run.pk} was taken over or failed by the watchdog")
        self.last_beat = time.monotonic()
        for data in records:
            self.publisher.send(frame_event(data, made))

    def finish(self, status: str, reason: str) -> EmulatorRun:
        """Record the final status and summary, then tell the viewers."""
        summary = self.engine.summary().to_dict()
        retry_when_locked(lambda: self.mine().update(
            status=status, reason=reason, summary=summary, finished_at=timezone.now(),
            sim_s=self.engine.now_s, behind=self.behind, heartbeat_at=timezone.now(),
        ))
        self.run.refresh_from_db()
        self.publisher.send(status_message(self.run))
        return self.run


def frame_event(frame: dict[str, Any], created: float) -> dict[str, Any]:
    """The group message carrying one live frame.

    The browser's message is encoded here once, not once per viewer: with many
    viewers the consumers then only forward text. ``i`` lets them drop repeats.
    """
    text = json.dumps({"type": "frame", "frame": frame, "created": created}, separators=(",", ":"))
    return {"type": "run.frame", "i": frame["i"], "text": text}


def fail_run(run_id: int, attempts: int, reason: str) -> None:
    """Mark this attempt's run failed with ``reason`` and tell the viewers."""
    with transaction.atomic():
        updated = EmulatorRun.objects.filter(pk=run_id, status=RunStatus.RUNNING, attempts=attempts).update(
            status=RunStatus.FAILED, reason=reason, finished_at=timezone.now()
        )
        if updated:
            publish_status(EmulatorRun.objects.get(pk=run_id))


def run_play(*, run_id: int, worker: str = "", dispatch: int | None = None) -> str:
    """Play a run to its end in this process; return its final status.

    Safe to call again for the same run (a redelivered task): it resumes
    without storing or publishing any frame twice. Once the run has ended, the
    slot it held goes to the next waiting run (and a sweep whose last point
    this was gets its curve).
    """
    try:
        return _play(run_id=run_id, worker=worker, dispatch=dispatch)
    finally:
        after_run(run_id)


def after_run(run_id: int) -> None:
    """Finish the run's sweep if this was its last point, then hand the freed slot on."""

    sweep_id = EmulatorRun.objects.filter(pk=run_id).values_list("sweep_id", flat=True).first()
    if sweep_id is not None:
        try:
            sweep_finish_if_ended(sweep_id=sweep_id)
        except Exception:  # the watchdog finishes it later
            log.warning("finishing sweep %s failed", sweep_id, exc_info=True)
    dispatch_quietly()


def _play(*, run_id: int, worker: str, dispatch: int | None) -> str:
    runs_reap_stale()
    run = claim_run(run_id, worker, dispatch)
    if run is None:
        status = EmulatorRun.objects.filter(pk=run_id).values_list("status", flat=True).first()
        return status or "missing"
    try:
        player = RunPlayer(run)
        return player.play().status
    except RunAbandoned as exc:
        log.warning("%s", exc)
        return EmulatorRun.objects.get(pk=run_id).status
    except Exception as exc:

        if isinstance(exc, SoftTimeLimitExceeded):
            reason = "it ran past its time limit; run it at a higher speed or shorten duration_s"
        else:
            log.exception("run %s failed", run_id)
            reason = f"{type(exc).__name__}: {exc}"
        fail_run(run_id, run.attempts, reason)
        return RunStatus.FAILED
