"""Fair queuing: a free worker slot goes to the users in turn, not to whoever queued the most.

Runs wait in the database until the dispatcher hands them to a free worker
slot; the order is fair between users, and each waiting run shows its place
as ``queue_position``.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from django.db import close_old_connections
from django.test import override_settings
from django.utils import timezone
from runs_helpers import api

from reviewer.models import EmulatorRun
from reviewer.runs.fair_order import announce_worker_slots, withdraw_worker_slots, worker_slots
from reviewer.runs.handoff import runs_dispatch

pytestmark = pytest.mark.usefixtures("redis_url")


@pytest.fixture
def no_dispatch_task(monkeypatch: pytest.MonkeyPatch) -> None:
    """Queuing asks for no dispatch: the test calls the dispatcher itself."""
    monkeypatch.setattr("reviewer.runs.services.enqueue_run", lambda run: None)
    monkeypatch.setattr("reviewer.runs.sweeps.enqueue_sweep", lambda *args: None)


def _queue(user: Any, scenario: str, count: int = 1, speed: Any = "max") -> list[int]:
    ids = []
    for _ in range(count):
        response = api(user).post("/api/runs/", {"scenario": scenario, "speed": speed}, format="json")
        assert response.status_code == 202, response.content
        ids.append(response.json()["id"])
    return ids


def _end(run_id: int) -> None:
    """The run's worker finished it (what the player records)."""
    EmulatorRun.objects.filter(pk=run_id).update(status="done", finished_at=timezone.now())


@pytest.mark.django_db
@override_settings(RUNS_PER_USER=10)
def test_it_starts_the_one_run_of_a_second_user_before_the_rest_of_the_first_users_five(
        run_users: dict, tiny_scenario: str, no_dispatch_task: None) -> None:
    a, b = run_users["owner"], run_users["reviewer"]
    a_runs = _queue(a, tiny_scenario, 5)
    (b_run,) = _queue(b, tiny_scenario)
    started = []
    for _ in range(6):  # one worker slot: each run ends before the next is handed over
        handed = runs_dispatch(slots=1)
        assert len(handed) == 1
        assert runs_dispatch(slots=1) == []  # the slot is taken
        started += handed
        _end(handed[0])
    assert started == [a_runs[0], b_run, *a_runs[1:]]


@pytest.mark.django_db
@override_settings(RUNS_PER_USER=10)
def test_it_shows_each_waiting_runs_place_in_the_fair_order(run_users: dict, tiny_scenario: str,
                                                              no_dispatch_task: None) -> None:
    a, b = run_users["owner"], run_users["reviewer"]
    a_runs = _queue(a, tiny_scenario, 3)
    assert runs_dispatch(slots=1) == [a_runs[0]]
    (b_run,) = _queue(b, tiny_scenario)
    listed = {run["id"]: run["queue_position"] for run in api(a).get("/api/runs/").json()["results"]}
    # The handed-over run first, then B (who holds no slot), then A's others.
    assert listed == {a_runs[0]: 1, a_runs[1]: 3, a_runs[2]: 4}
    assert api(b).get(f"/api/runs/{b_run}/").json()["queue_position"] == 2
    EmulatorRun.objects.filter(pk=a_runs[0]).update(status="running", started_at=timezone.now())
    assert api(a).get(f"/api/runs/{a_runs[0]}/").json()["queue_position"] is None
    assert api(b).get(f"/api/runs/{b_run}/").json()["queue_position"] == 1


@pytest.mark.django_db
@override_settings(RUNS_PER_USER=10)
def test_it_counts_a_sweeps_points_as_runs_of_its_owner(run_users: dict, tiny_scenario: str,
                                                        no_dispatch_task: None) -> None:
    a, b = run_users["owner"], run_users["reviewer"]
    sweep = api(a).post("/api/sweeps/", {"scenario": tiny_scenario, "key": "traffic.qps",
                                         "values": [10, 20, 30, 40]}, format="json").json()
    points = list(EmulatorRun.objects.filter(sweep_id=sweep["id"]).order_by("pk").values_list("pk", flat=True))
    (b_run,) = _queue(b, tiny_scenario)
    handed = runs_dispatch(slots=2)
    assert handed == [points[0], b_run]
    _end(b_run)
    assert runs_dispatch(slots=2) == [points[1]]


@pytest.mark.django_db
@override_settings(RUNS_PER_USER=10)
def test_it_gives_a_user_with_fewer_runs_going_the_next_slot(run_users: dict, tiny_scenario: str,
                                                             no_dispatch_task: None) -> None:
    a, b, c = run_users["owner"], run_users["reviewer"], run_users["outsider"]
    a_runs = _queue(a, tiny_scenario, 3)
    assert runs_dispatch(slots=2) == a_runs[:2]  # nobody else waits: both slots to A
    b_runs = _queue(b, tiny_scenario, 2)
    (c_run,) = _queue(c, tiny_scenario)
    _end(a_runs[0])
    _end(a_runs[1])
    # A was served last; B and C hold nothing, B queued first; then C, then A and B in turns.
    assert runs_dispatch(slots=2) == [b_runs[0], c_run]
    _end(b_runs[0])
    _end(c_run)
    assert runs_dispatch(slots=2) == [a_runs[2], b_runs[1]]


@pytest.mark.django_db
def test_it_leaves_runs_waiting_for_a_slot_to_the_dispatcher_not_the_lost_task_check(
        run_users: dict, tiny_scenario: str, no_dispatch_task: None) -> None:
    from reviewer.celery import app
    from reviewer.runs.services import REQUEUE_AFTER_S, runs_requeue_lost

    app.control.purge()
    (run_id,) = _queue(run_users["owner"], tiny_scenario)
    EmulatorRun.objects.filter(pk=run_id).update(
        created_at=timezone.now() - timedelta(seconds=REQUEUE_AFTER_S * 10),
        enqueued_at=timezone.now() - timedelta(seconds=REQUEUE_AFTER_S * 10))
    assert runs_requeue_lost() == {"requeued": [], "failed": []}
    run = EmulatorRun.objects.get(pk=run_id)
    assert (run.status, run.awaiting_slot, run.dispatches) == ("queued", True, 0)


@pytest.mark.django_db
@override_settings(RUN_SLOTS=0)
def test_it_counts_the_slots_the_live_workers_announce() -> None:
    before = worker_slots()
    announce_worker_slots("fair-test-a@localhost", 2)
    announce_worker_slots("fair-test-b@localhost", 1)
    try:
        assert worker_slots() == before + 3
    finally:
        withdraw_worker_slots("fair-test-a@localhost")
        withdraw_worker_slots("fair-test-b@localhost")
    assert worker_slots() == before
    with override_settings(RUN_SLOTS=4):
        assert worker_slots() == 4


@pytest.mark.django_db(transaction=True)
@override_settings(RUNS_PER_USER=10)
def test_it_never_hands_out_more_runs_than_slots_when_dispatchers_race(
        run_users: dict, tiny_scenario: str, no_dispatch_task: None) -> None:
    _queue(run_users["owner"], tiny_scenario, 4)
    _queue(run_users["reviewer"], tiny_scenario, 4)
    handed: list[list[int]] = []
    gate = threading.Barrier(4)

    def dispatcher() -> None:
        try:
            gate.wait()
            handed.append(runs_dispatch(slots=3))
        finally:
            close_old_connections()

    threads = [threading.Thread(target=dispatcher) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    every = [run_id for batch in handed for run_id in batch]
    assert len(handed) == 4
    assert len(every) == 3 and len(set(every)) == 3
    assert EmulatorRun.objects.filter(status="queued", awaiting_slot=False).count() == 3


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@override_settings(RUNS_PER_USER=10)
def test_it_plays_a_second_users_run_second_on_one_real_worker(
        celery_workers: Any, run_users: dict, tiny_scenario: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # One worker process, told it is the only slot (earlier modules' workers may still be counted).
    monkeypatch.setenv("RUN_SLOTS", "1")
    celery_workers.start("fair")
    a, b = run_users["owner"], run_users["reviewer"]
    # A's first run is paced (6 s at speed 1), so everything below is queued while it plays.
    a_runs = _queue(a, tiny_scenario, 1, speed=1) + _queue(a, tiny_scenario, 4)
    (b_run,) = _queue(b, tiny_scenario)
    every = [*a_runs, b_run]
    deadline = time.monotonic() + 120
    while EmulatorRun.objects.filter(pk__in=every).exclude(status__in=["done", "failed", "cancelled"]).exists():
        assert time.monotonic() < deadline, list(EmulatorRun.objects.filter(pk__in=every).values("pk", "status"))
        time.sleep(0.3)
    runs = EmulatorRun.objects.filter(pk__in=every).order_by("started_at")
    assert [run.status for run in runs] == ["done"] * 6
    assert [run.pk for run in runs][:2] == [a_runs[0], b_run]
