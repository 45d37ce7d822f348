"""Sweeps: one run per value at speed max, queued as runs of the owner, gathered into a curve."""

from __future__ import annotations

import time

import pytest
from django.test import override_settings
from runs_helpers import api, engine_summary, without_wall

from reviewer.models import EmulatorRun, Sweep

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.slow
def test_it_sweeps_five_values_into_a_curve_and_answers_the_smallest_that_meets_the_target(
    celery_worker_process: str, run_users: dict, tiny_scenario: str
) -> None:
    owner = api(run_users["owner"])
    response = owner.post("/api/sweeps/", {
        "scenario": tiny_scenario, "key": "hosts[0].count", "values": [5, 1, 2, 3, 4],
        "overrides": ["traffic.qps=120"], "target_p99_s": 2.0, "seed": 11,
    }, format="json")
    assert response.status_code == 202, response.content
    sweep_id = response.json()["id"]
    assert response.json()["progress"]["total"] == 5

    deadline = time.monotonic() + 90
    while True:
        body = owner.get(f"/api/sweeps/{sweep_id}/").json()
        if body["status"] in ("done", "failed"):
            break
        assert time.monotonic() < deadline, body
        time.sleep(0.3)

    assert body["status"] == "done", body
    assert body["progress"] == {"done": 5, "total": 5}
    curve = body["curve"]
    assert [point["value"] for point in curve] == [1, 2, 3, 4, 5]
    for point in curve:
        run = EmulatorRun.objects.get(pk=point["run_id"])
        assert (run.status, run.speed, run.sweep_id) == ("done", "max", sweep_id)
        assert run.scenario["hosts"][0]["count"] == point["value"]
        summary = run.summary
        assert point["p99_s"] == summary["latency_s"]["p99"]
        assert point["ok_rate"] == pytest.approx(summary["ok"] / summary["offered"])
    # Each point is the engine's own result for that value.
    last = EmulatorRun.objects.get(pk=curve[-1]["run_id"])
    assert without_wall(last.summary) == engine_summary(last.scenario, 11)

    meeting = [p["value"] for p in curve if p["p99_s"] is not None and p["p99_s"] <= 2.0]
    answer = body["answer"]
    assert answer["value"] == (min(meeting) if meeting else None)
    assert "hosts[0].count" in answer["text"]


def test_it_refuses_a_sweep_with_a_bad_value_naming_it(run_users: dict, tiny_scenario: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("reviewer.runs.sweeps.enqueue_sweep", lambda *args: None)
    response = api(run_users["owner"]).post("/api/sweeps/", {
        "scenario": tiny_scenario, "key": "hosts[0].count", "values": [1, 0.5],
    }, format="json")
    assert response.status_code == 400
    assert "hosts[0].count=0.5" in response.json()["values"][0]
    assert not Sweep.objects.exists()


def test_it_finishes_a_sweep_whose_chord_never_fired_in_the_periodic_reaper_not_on_read(
        run_users: dict, tiny_scenario: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from reviewer.tasks import reap_stalled

    monkeypatch.setattr("reviewer.runs.sweeps.enqueue_sweep", lambda *args: None)
    owner = api(run_users["owner"])
    body = owner.post("/api/sweeps/", {"scenario": tiny_scenario, "key": "traffic.qps",
                                       "values": [10, 20], "target_p99_s": 1.0}, format="json").json()
    runs = list(EmulatorRun.objects.filter(sweep_id=body["id"]).order_by("sweep_value"))
    summaries = [{"ok": 9, "offered": 10, "latency_s": {"p99": 1.5}},
                 {"ok": 10, "offered": 10, "latency_s": {"p99": 0.8}}]
    for run, summary in zip(runs, summaries, strict=True):
        EmulatorRun.objects.filter(pk=run.pk).update(status="done", summary=summary)
    read = owner.get(f"/api/sweeps/{body['id']}/").json()
    assert (read["status"], read["progress"], read["curve"]) == ("running", {"done": 2, "total": 2}, None)

    assert reap_stalled() == {"runs": [], "requeued": [], "sweeps": [body["id"]]}
    body = owner.get(f"/api/sweeps/{body['id']}/").json()
    assert body["status"] == "done"
    assert [(p["value"], p["p99_s"], p["ok_rate"]) for p in body["curve"]] == [(10, 1.5, 0.9), (20, 0.8, 1.0)]
    assert body["answer"]["value"] == 20
    assert reap_stalled() == {"runs": [], "requeued": [], "sweeps": []}
    assert api(run_users["outsider"]).get(f"/api/sweeps/{body['id']}/").status_code == 404


def test_it_leaves_a_sweep_with_runs_still_going_to_its_chord(run_users: dict, tiny_scenario: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from reviewer.runs.sweeps import sweeps_finish_stalled

    monkeypatch.setattr("reviewer.runs.sweeps.enqueue_sweep", lambda *args: None)
    body = api(run_users["owner"]).post("/api/sweeps/", {"scenario": tiny_scenario, "key": "traffic.qps",
                                                         "values": [10, 20]}, format="json").json()
    first = EmulatorRun.objects.filter(sweep_id=body["id"]).order_by("sweep_value").first()
    EmulatorRun.objects.filter(pk=first.pk).update(status="done", summary={"ok": 1, "offered": 1})
    assert sweeps_finish_stalled() == []


@override_settings(RUNS_PER_USER=1)
def test_it_counts_a_sweep_once_against_the_runs_per_user_limit(run_users: dict, tiny_scenario: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("reviewer.runs.sweeps.enqueue_sweep", lambda *args: None)
    owner = api(run_users["owner"])
    first = owner.post("/api/sweeps/", {"scenario": tiny_scenario, "key": "traffic.qps",
                                        "values": [10, 20, 30]}, format="json")
    assert first.status_code == 202
    again = owner.post("/api/runs/", {"scenario": tiny_scenario}, format="json")
    assert again.status_code == 429
    assert "RUNS_PER_USER" in again.json()["detail"]


@override_settings(USER_REQUEST_BUDGET=500)
def test_it_refuses_a_sweep_whose_points_together_are_over_the_users_budget(
        run_users: dict, tiny_scenario: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("reviewer.runs.sweeps.enqueue_sweep", lambda *args: None)
    response = api(run_users["owner"]).post("/api/sweeps/", {
        "scenario": tiny_scenario, "key": "traffic.qps", "values": [40, 80, 120]}, format="json")
    assert response.status_code == 429
    assert response.json()["setting"] == "USER_REQUEST_BUDGET"
    assert not Sweep.objects.exists() and not EmulatorRun.objects.exists()


def test_it_cancels_a_sweep_its_queued_points_at_once_its_running_ones_at_their_next_step(
        run_users: dict, tiny_scenario: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from reviewer.models import RunCommand

    monkeypatch.setattr("reviewer.runs.sweeps.enqueue_sweep", lambda *args: None)
    owner = api(run_users["owner"])
    body = owner.post("/api/sweeps/", {"scenario": tiny_scenario, "key": "traffic.qps",
                                       "values": [10, 20, 30]}, format="json").json()
    running = EmulatorRun.objects.filter(sweep_id=body["id"]).order_by("sweep_value").first()
    EmulatorRun.objects.filter(pk=running.pk).update(status="running")
    assert api(run_users["outsider"]).post(f"/api/sweeps/{body['id']}/cancel/").status_code == 404
    response = owner.post(f"/api/sweeps/{body['id']}/cancel/")
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "cancelled"
    statuses = dict(EmulatorRun.objects.filter(sweep_id=body["id"]).values_list("pk", "status"))
    assert statuses.pop(running.pk) == "running"
    assert set(statuses.values()) == {"cancelled"}
    assert RunCommand.objects.filter(run=running, kind="cancel").count() == 1
    assert owner.post(f"/api/sweeps/{body['id']}/cancel/").status_code == 409
