"""The run task's service, in process: pacing, resuming, commands, the watchdog."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from reviewer.models import EmulatorRun, RunCommand, RunFrame
from reviewer.runs import player as run_player
from reviewer.runs.player import run_play
from reviewer.runs.services import resolve_scenario, runs_reap_stale, time_limits_for
from reviewer.tasks import run_emulation

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("redis_url")]


def _run(user: Any, scenario_text: str, *, speed: str = "max", overrides: tuple[str, ...] = (),
         **fields: Any) -> EmulatorRun:
    scenario = resolve_scenario(scenario=scenario_text, overrides=overrides).scenario
    return EmulatorRun.objects.create(started_by=user, scenario=scenario.to_dict(), seed=scenario.seed,
                                      speed=speed, **fields)


def _reference_frames(run: EmulatorRun, faults: dict[int, str] | None = None) -> tuple[list[dict], dict]:
    """Frames and summary of the engine alone, stepping frame by frame."""
    from emulator.scenario import Scenario
    from emulator.sim.engine import Engine

    scenario = Scenario.from_dict(run.scenario, max_requests=None)
    engine = Engine(scenario, seed=run.seed)
    frames: list[dict] = []
    k = 0
    while not engine.done:
        if faults and k in faults:
            engine.inject(faults[k])
        frames.extend(f.to_dict() for f in engine.advance_to(min((k + 1) * scenario.sample_s, scenario.duration_s)))
        k += 1
    summary = engine.summary().to_dict()
    summary.pop("wall_s")
    return frames, summary


def _stored(run: EmulatorRun) -> list[dict]:
    return list(RunFrame.objects.filter(run=run).order_by("i").values_list("data", flat=True))


def _without(d: dict, *keys: str) -> dict:
    return {k: v for k, v in d.items() if k not in keys}


def test_it_plays_a_run_flat_out_storing_every_frame_and_the_engines_summary(
    run_users: dict, tiny_scenario: str
) -> None:
    run = _run(run_users["owner"], tiny_scenario)
    assert run_emulation.apply(args=[run.pk]).get() == "done"
    run.refresh_from_db()
    frames, summary = _reference_frames(run)
    assert [_without(f, "behind") for f in _stored(run)] == frames
    assert all(f["behind"] is False for f in _stored(run))
    assert _without(run.summary, "wall_s") == summary
    assert (run.status, run.frames_stored, run.attempts, run.behind) == ("done", 12, 1, False)
    assert run.started_at is not None and run.finished_at is not None


def test_it_resumes_after_the_stored_frames_and_replays_recorded_faults(run_users: dict,
                                                                        tiny_scenario: str) -> None:
    run = _run(run_users["owner"], tiny_scenario, status="running", attempts=1,
               heartbeat_at=timezone.now())
    frames, summary = _reference_frames(run, {4: "kill host:1"})
    # An earlier attempt stored 7 frames, having applied the fault after frame 4, then died.
    RunFrame.objects.bulk_create(RunFrame(run=run, i=f["i"], t_s=f["t_s"], data={**f, "behind": False})
                                 for f in frames[:7])
    RunCommand.objects.create(run=run, kind="fault", command="kill host:1", applied_after_frame=4,
                              applied_at_s=2.0)
    assert run_play(run_id=run.pk, worker="second") == "done"
    run.refresh_from_db()
    assert (run.attempts, run.worker) == (2, "second")
    assert [_without(f, "behind") for f in _stored(run)] == frames
    assert _without(run.summary, "wall_s") == summary
    stored = _stored(run)
    assert "kill host:1" in stored[4]["events"]
    assert [f["h"]["alive"][1] for f in stored] == [1] * 4 + [0] * 8


def test_it_cancels_on_a_pending_cancel_and_keeps_the_summary_so_far(run_users: dict,
                                                                     tiny_scenario: str) -> None:
    run = _run(run_users["owner"], tiny_scenario)
    RunCommand.objects.create(run=run, kind="cancel", command="cancelled by owner")
    assert run_play(run_id=run.pk) == "cancelled"
    run.refresh_from_db()
    assert run.reason == "cancelled by owner"
    assert run.summary is not None and run.summary["sim_s"] == 0
    assert RunCommand.objects.get(run=run).applied_after_frame == 0


def test_it_records_why_the_engine_refused_a_fault_and_plays_on(run_users: dict, tiny_scenario: str) -> None:
    run = _run(run_users["owner"], tiny_scenario)
    RunCommand.objects.create(run=run, kind="fault", command="kill host:7")
    assert run_play(run_id=run.pk) == "done"
    assert "host:7" in RunCommand.objects.get(run=run).error


def test_it_flags_frames_and_the_run_when_it_falls_behind_its_speed(
    run_users: dict, tiny_scenario: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A negative tolerance makes every paced frame late, without depending on timing.
    monkeypatch.setattr(run_player, "BEHIND_TOLERANCE_S", -1.0)
    run = _run(run_users["owner"], tiny_scenario, speed="100")
    assert run_play(run_id=run.pk) == "done"
    run.refresh_from_db()
    assert run.behind
    assert all(f["behind"] for f in _stored(run))


def test_it_does_nothing_for_a_run_that_is_already_final(run_users: dict, tiny_scenario: str) -> None:
    run = _run(run_users["owner"], tiny_scenario, status="cancelled")
    assert run_play(run_id=run.pk) == "cancelled"
    assert not RunFrame.objects.filter(run=run).exists()


def test_it_gives_up_on_a_run_whose_worker_died_three_times(run_users: dict, tiny_scenario: str) -> None:
    run = _run(run_users["owner"], tiny_scenario, status="running", attempts=3, heartbeat_at=timezone.now())
    assert run_play(run_id=run.pk) == "failed"
    run.refresh_from_db()
    assert "died 3 times" in run.reason
    assert not RunFrame.objects.filter(run=run).exists()


def test_it_marks_failed_only_the_runs_whose_heartbeat_stopped(run_users: dict, tiny_scenario: str) -> None:
    owner = run_users["owner"]
    old = timezone.now() - timedelta(seconds=25)
    stale = _run(owner, tiny_scenario, status="running", heartbeat_at=old, worker="w9@host")
    fresh = _run(owner, tiny_scenario, status="running", heartbeat_at=timezone.now())
    queued = _run(owner, tiny_scenario)
    assert runs_reap_stale() == [stale.pk]
    stale.refresh_from_db()
    assert stale.status == "failed" and stale.finished_at is not None
    assert "w9@host" in stale.reason and "no heartbeat for 20 s" in stale.reason
    assert EmulatorRun.objects.get(pk=fresh.pk).status == "running"
    assert EmulatorRun.objects.get(pk=queued.pk).status == "queued"


def test_it_leaves_a_stale_run_as_it_is_when_it_is_only_read(run_users: dict, tiny_scenario: str) -> None:
    from runs_helpers import api

    owner = run_users["owner"]
    stale = _run(owner, tiny_scenario, status="running", heartbeat_at=timezone.now() - timedelta(seconds=60))
    assert api(owner).get("/api/runs/").status_code == 200
    assert api(owner).get(f"/api/runs/{stale.pk}/").json()["status"] == "running"
    assert EmulatorRun.objects.get(pk=stale.pk).status == "running"


def test_it_reaps_stale_runs_in_the_task_the_beat_schedule_sends(run_users: dict, tiny_scenario: str) -> None:
    from django.conf import settings

    from reviewer.tasks import reap_stalled

    stale = _run(run_users["owner"], tiny_scenario, status="running",
                 heartbeat_at=timezone.now() - timedelta(seconds=60))
    scheduled = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert reap_stalled.name in scheduled
    assert reap_stalled() == {"runs": [stale.pk], "requeued": [], "sweeps": []}
    assert EmulatorRun.objects.get(pk=stale.pk).status == "failed"


def test_it_gives_paced_runs_time_limits_that_fit_their_length() -> None:
    soft, hard = time_limits_for(duration_s=300, speed="1")
    assert soft >= 300 * 1.5 and hard > soft
    assert time_limits_for(duration_s=300, speed="100")[0] < soft


def _purged_broker() -> None:
    from reviewer.celery import app

    app.control.purge()


def test_it_hands_a_queued_run_whose_task_was_lost_to_the_broker_again(
    run_users: dict, tiny_scenario: str, django_capture_on_commit_callbacks: Any
) -> None:
    from reviewer.runs.services import (
        REQUEUE_AFTER_S,
        broker_queue_length,
        runs_requeue_lost,
        wait_enqueued,
    )

    _purged_broker()
    run = _run(run_users["owner"], tiny_scenario,
               enqueued_at=timezone.now() - timedelta(seconds=REQUEUE_AFTER_S + 1))
    fresh = _run(run_users["owner"], tiny_scenario)
    with django_capture_on_commit_callbacks(execute=True):
        assert runs_requeue_lost() == {"requeued": [run.pk], "failed": []}
    wait_enqueued()
    assert broker_queue_length() == 1
    _purged_broker()
    run.refresh_from_db()
    assert (run.status, run.dispatches) == ("queued", 1)
    # The first task, should it turn up after all, no longer starts the run; the new one does.
    assert run_play(run_id=run.pk) == "queued"
    assert run_play(run_id=run.pk, dispatch=1) == "done"
    assert EmulatorRun.objects.get(pk=fresh.pk).dispatches == 0


def test_it_leaves_queued_runs_alone_while_their_tasks_wait_in_the_broker(run_users: dict, tiny_scenario: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import uuid

    from reviewer.celery import app
    from reviewer.runs.services import REQUEUE_AFTER_S, runs_requeue_lost

    # A default queue of this test's own, so that no worker another test left on the
    # broker takes the waiting task before it is counted.
    queue = f"waiting-{uuid.uuid4().hex}"
    monkeypatch.setitem(app.conf, "task_default_queue", queue)
    run = _run(run_users["owner"], tiny_scenario,
               enqueued_at=timezone.now() - timedelta(seconds=REQUEUE_AFTER_S + 1))
    # A task waiting, as a queued run's would (its result is not asked for: a result
    # store another test stalled must not stop it being sent).
    app.send_task("reviewer.reap_stalled", queue=queue, ignore_result=True)
    try:
        assert runs_requeue_lost() == {"requeued": [], "failed": []}
    finally:
        with app.connection_for_write() as connection:
            connection.default_channel.queue_purge(queue)
    assert EmulatorRun.objects.get(pk=run.pk).dispatches == 0


def test_it_fails_a_run_no_worker_takes_after_many_hand_offs_with_a_reason(run_users: dict,
                                                                          tiny_scenario: str) -> None:
    from reviewer.runs.services import MAX_DISPATCHES, REQUEUE_AFTER_S, runs_requeue_lost

    _purged_broker()
    run = _run(run_users["owner"], tiny_scenario, dispatches=MAX_DISPATCHES,
               enqueued_at=timezone.now() - timedelta(seconds=REQUEUE_AFTER_S + 1))
    assert runs_requeue_lost() == {"requeued": [], "failed": [run.pk]}
    run.refresh_from_db()
    assert run.status == "failed" and "none started it" in run.reason


@pytest.mark.django_db(transaction=True)
def test_it_plays_a_run_to_its_end_while_redis_stalls(run_users: dict, tiny_scenario: str,
                                                      layer_on_stalled_redis: None) -> None:
    import threading

    from reviewer.realtime import groups as realtime

    run = _run(run_users["owner"], tiny_scenario)
    played = threading.Thread(target=run_play, kwargs={"run_id": run.pk}, daemon=True)
    played.start()
    played.join(timeout=realtime.PUBLISH_TIMEOUT_S * 2 + 10)
    assert not played.is_alive(), "the run hung on publishing"
    run.refresh_from_db()
    assert (run.status, run.frames_stored) == ("done", 12)


def test_it_writes_again_when_the_database_is_locked_instead_of_failing_the_run(
    run_users: dict, tiny_scenario: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db import OperationalError

    monkeypatch.setattr(run_player, "LOCKED_BACKOFF_S", 0.01)
    real_bulk_create = RunFrame.objects.bulk_create
    refusals = iter([True, True])  # the first two writes of frames meet another user's long write

    def locked_at_first(*args: Any, **kwargs: Any) -> Any:
        if next(refusals, False):
            raise OperationalError("database is locked")
        return real_bulk_create(*args, **kwargs)

    monkeypatch.setattr(RunFrame.objects, "bulk_create", locked_at_first)
    run = _run(run_users["owner"], tiny_scenario)
    assert run_play(run_id=run.pk) == "done"
    run.refresh_from_db()
    assert (run.status, run.frames_stored) == ("done", 12)
