"""The runs API without a worker: starting, refusing, reading frames, commands."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from reviewer.models import EmulatorRun, RunCommand, RunFrame

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs stay queued: these tests check the API, not the worker."""
    monkeypatch.setattr("reviewer.runs.services.enqueue_run", lambda run: None)


def api(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def start(user: Any, tiny_scenario: str, **extra: Any) -> Any:
    return api(user).post("/api/runs/", {"scenario": tiny_scenario, "speed": 10, **extra}, format="json")


def test_it_starts_a_run_and_answers_202_with_its_id(run_users: dict, tiny_scenario: str) -> None:
    response = start(run_users["owner"], tiny_scenario, overrides=["traffic.qps=20"], seed=3)
    assert response.status_code == 202, response.content
    run = EmulatorRun.objects.get(pk=response.json()["id"])
    assert run.status == "queued"
    assert run.seed == 3
    assert run.scenario["traffic"]["qps"] == 20.0
    assert run.layout["models"] == ["small"]
    assert response.json()["speed"] == 10


def test_it_starts_a_run_from_a_preset(run_users: dict) -> None:
    response = api(run_users["owner"]).post("/api/runs/", {"scenario": "doc-as-written", "speed": "max"},
                                            format="json")
    assert response.status_code == 202, response.content
    assert response.json()["speed"] == "max"


def test_it_never_reads_a_file_named_as_the_scenario(run_users: dict) -> None:
    response = api(run_users["owner"]).post("/api/runs/", {"scenario": "/etc/hostname"}, format="json")
    assert response.status_code == 400
    assert "is not a preset" in response.json()["scenario"][0]


def test_it_refuses_a_speed_it_does_not_offer(run_users: dict, tiny_scenario: str) -> None:
    response = start(run_users["owner"], tiny_scenario, speed=7)
    assert response.status_code == 400
    assert "speed" in response.json()


@pytest.mark.parametrize("seed", [-1, 2**63])
def test_it_refuses_a_seed_it_cannot_store_naming_the_field(run_users: dict, tiny_scenario: str,
                                                             seed: int) -> None:
    response = start(run_users["owner"], tiny_scenario, seed=seed)
    assert response.status_code == 400, response.content
    assert "seed" in response.json()
    assert not EmulatorRun.objects.exists()


def test_it_names_the_key_of_a_bad_override(run_users: dict, tiny_scenario: str) -> None:
    response = start(run_users["owner"], tiny_scenario, overrides=["hosts[5].count=2"])
    assert response.status_code == 400
    assert "hosts[5]" in response.json()["overrides"][0]


@override_settings(RUN_REQUEST_BUDGET=100)
def test_it_refuses_a_run_over_the_request_budget_naming_the_setting(
    run_users: dict, tiny_scenario: str
) -> None:
    response = start(run_users["owner"], tiny_scenario)
    assert response.status_code == 400
    message = response.json()["scenario"][0]
    assert "RUN_REQUEST_BUDGET" in message and "240" in message


@override_settings(RUNS_PER_USER=2)
def test_it_answers_429_when_the_user_has_too_many_runs_going(run_users: dict, tiny_scenario: str) -> None:
    assert start(run_users["owner"], tiny_scenario).status_code == 202
    assert start(run_users["owner"], tiny_scenario).status_code == 202
    response = start(run_users["owner"], tiny_scenario)
    assert response.status_code == 429
    assert "RUNS_PER_USER" in response.json()["detail"]
    # Someone else is not held back by the owner's runs.
    assert start(run_users["reviewer"], tiny_scenario).status_code == 202


def test_it_hides_a_run_from_outsiders(run_users: dict, tiny_scenario: str, review_session: Any) -> None:
    run_id = start(run_users["owner"], tiny_scenario, session=review_session.pk).json()["id"]
    assert api(run_users["reviewer"]).get(f"/api/runs/{run_id}/").status_code == 200
    assert api(run_users["staff"]).get(f"/api/runs/{run_id}/").status_code == 200
    assert api(run_users["outsider"]).get(f"/api/runs/{run_id}/").status_code == 404
    assert api(run_users["outsider"]).post(f"/api/runs/{run_id}/cancel/").status_code == 404


def test_it_lists_the_runs_of_one_session(run_users: dict, tiny_scenario: str, review_session: Any) -> None:
    in_session = start(run_users["owner"], tiny_scenario, session=review_session.pk).json()["id"]
    start(run_users["owner"], tiny_scenario)
    listed = api(run_users["owner"]).get(f"/api/runs/?session={review_session.pk}").json()["results"]
    assert [run["id"] for run in listed] == [in_session]


@pytest.mark.parametrize("value", ["abc", "\u00b2", "1.5", str(2**63), "-3"])
def test_it_names_the_session_filter_when_it_is_not_a_session_id(run_users: dict, value: str) -> None:
    response = api(run_users["owner"]).get("/api/runs/", {"session": value})
    assert response.status_code == 400
    assert "session" in response.json()


def test_it_refuses_a_session_the_user_is_not_in(run_users: dict, tiny_scenario: str,
                                                 review_session: Any) -> None:
    response = start(run_users["outsider"], tiny_scenario, session=review_session.pk)
    assert response.status_code == 400
    assert "session" in response.json()


def test_it_cancels_a_queued_run_at_once(run_users: dict, tiny_scenario: str) -> None:
    run_id = start(run_users["owner"], tiny_scenario).json()["id"]
    response = api(run_users["owner"]).post(f"/api/runs/{run_id}/cancel/")
    assert response.status_code == 202
    assert response.json()["status"] == "cancelled"
    assert "owner" in response.json()["reason"]
    again = api(run_users["owner"]).post(f"/api/runs/{run_id}/cancel/")
    assert again.status_code == 409


def test_it_records_a_fault_for_a_running_run(run_users: dict, tiny_scenario: str) -> None:
    run_id = start(run_users["owner"], tiny_scenario).json()["id"]
    EmulatorRun.objects.filter(pk=run_id).update(status="running")
    response = api(run_users["owner"]).post(f"/api/runs/{run_id}/faults/", {"kill": "host:1"}, format="json")
    assert response.status_code == 202, response.content
    command = RunCommand.objects.get(pk=response.json()["id"])
    assert (command.kind, command.command, command.applied_after_frame) == ("fault", "kill host:1", None)


@pytest.mark.parametrize(
    ("fault", "field", "words"),
    [
        ({"kill": "host:9"}, "kill", "host"),
        ({"explode": "host:1"}, "kill", "kill"),
        ({"kill": "host:1", "restore": "host:1"}, "kill", "exactly one"),
    ],
)
def test_it_names_what_is_wrong_with_a_fault(run_users: dict, tiny_scenario: str, fault: dict,
                                             field: str, words: str) -> None:
    run_id = start(run_users["owner"], tiny_scenario).json()["id"]
    EmulatorRun.objects.filter(pk=run_id).update(status="running")
    response = api(run_users["owner"]).post(f"/api/runs/{run_id}/faults/", fault, format="json")
    assert response.status_code == 400
    assert words in response.json()[field][0]


def test_it_refuses_a_fault_for_a_finished_run(run_users: dict, tiny_scenario: str) -> None:
    run_id = start(run_users["owner"], tiny_scenario).json()["id"]
    EmulatorRun.objects.filter(pk=run_id).update(status="done")
    response = api(run_users["owner"]).post(f"/api/runs/{run_id}/faults/", {"kill": "host:1"}, format="json")
    assert response.status_code == 409


def _store_frames(run_id: int, count: int) -> None:
    RunFrame.objects.bulk_create(
        RunFrame(run_id=run_id, i=i, t_s=(i + 1) * 0.5, data={
            "i": i, "t_s": (i + 1) * 0.5, "models": ["small"], "behind": i == 1,
            "m": {"offered": [10 + i], "ok": [9], "p99_s": [None if i == 0 else 1.25]},
            "h": {"alive": [1, 1]}, "events": ["kill host:1"] if i == 2 else [],
        })
        for i in range(count)
    )


def test_it_gives_the_frames_as_json_after_a_frame_number(run_users: dict, tiny_scenario: str) -> None:
    run_id = start(run_users["owner"], tiny_scenario).json()["id"]
    _store_frames(run_id, 4)
    body = api(run_users["owner"]).get(f"/api/runs/{run_id}/frames/?after=1").json()
    assert [frame["i"] for frame in body["frames"]] == [2, 3]
    assert body["next_after"] is None


def test_it_pages_the_frames_with_a_limit(run_users: dict, tiny_scenario: str) -> None:
    run_id = start(run_users["owner"], tiny_scenario).json()["id"]
    _store_frames(run_id, 5)
    first = api(run_users["owner"]).get(f"/api/runs/{run_id}/frames/?limit=2").json()
    assert ([f["i"] for f in first["frames"]], first["next_after"]) == ([0, 1], 1)
    rest = api(run_users["owner"]).get(f"/api/runs/{run_id}/frames/?after=3&limit=2").json()
    assert ([f["i"] for f in rest["frames"]], rest["next_after"]) == ([4], None)
    bad = api(run_users["owner"]).get(f"/api/runs/{run_id}/frames/?limit=lots")
    assert bad.status_code == 400 and "limit" in bad.json()


def test_it_gives_the_frames_as_csv(run_users: dict, tiny_scenario: str) -> None:
    run_id = start(run_users["owner"], tiny_scenario).json()["id"]
    _store_frames(run_id, 3)
    response = api(run_users["owner"]).get(f"/api/runs/{run_id}/frames/?format=csv")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [row["i"] for row in rows] == ["0", "1", "2"]
    assert rows[1]["small.offered"] == "11" and rows[1]["behind"] == "1"
    assert rows[0]["small.p99_s"] == "" and rows[1]["small.p99_s"] == "1.25"
    assert rows[2]["events"] == "kill host:1"
    assert rows[0]["hosts_alive"] == "2"


def test_it_gives_a_csv_column_for_each_metric_the_frames_carry() -> None:
    from reviewer.api.runs import frames_csv_rows

    # A continuous-batching run's frames carry KV figures a static run's do not.
    frame = {"i": 0, "t_s": 1.0, "models": ["small"], "m": {"offered": [4], "kv_used": [0.5]},
             "h": {"alive": [1]}, "events": []}
    header, row = list(frames_csv_rows(iter([frame])))
    assert header[5:] == ["small.offered", "small.kv_used"]
    assert row[5:] == [4, 0.5]


def test_it_answers_a_csv_request_for_a_hidden_run_with_404(run_users: dict, tiny_scenario: str) -> None:
    run_id = start(run_users["owner"], tiny_scenario).json()["id"]
    response = api(run_users["outsider"]).get(f"/api/runs/{run_id}/frames/?format=csv")
    assert response.status_code == 404
    assert response.content.decode().splitlines()[0] == "detail"
    empty = api(run_users["owner"]).get(f"/api/runs/{run_id}/frames/?format=csv")
    assert b"".join(empty.streaming_content).decode().strip() == "i,t_s,behind,hosts_alive,events"


@override_settings(RUN_WALL_BUDGET_S=100)
def test_it_refuses_a_paced_run_that_would_hold_a_worker_too_long(run_users: dict, tiny_scenario: str) -> None:
    response = start(run_users["owner"], tiny_scenario, overrides=["duration_s=600"], speed=1)
    assert response.status_code == 400
    assert "RUN_WALL_BUDGET_S" in response.json()["duration_s"][0]
    # The same run at a speed that takes a minute of wall time is fine.
    assert start(run_users["owner"], tiny_scenario, overrides=["duration_s=600"], speed=10).status_code == 202


def test_it_refuses_a_paced_run_longer_than_the_paced_limit_naming_the_setting(
        run_users: dict, tiny_scenario: str) -> None:
    # Two hours at speed 1 would hold the only run worker of a one-worker install for two hours.
    response = start(run_users["owner"], tiny_scenario, overrides=["duration_s=7200"], speed=1)
    assert response.status_code == 400
    message = response.json()["duration_s"][0]
    assert "RUN_PACED_MAX_S" in message and "7,200 s" in message and "900 s" in message
    assert not EmulatorRun.objects.filter(started_by=run_users["owner"]).exists()
    # The same simulated time flat out, or paced within the limit, is accepted.
    assert start(run_users["owner"], tiny_scenario, overrides=["duration_s=7200"], speed="max").status_code == 202
    assert start(run_users["owner"], tiny_scenario, overrides=["duration_s=7200"], speed=10).status_code == 202


@override_settings(RUN_PACED_MAX_S=50)
def test_the_paced_limit_follows_its_setting(run_users: dict, tiny_scenario: str) -> None:
    response = start(run_users["owner"], tiny_scenario, overrides=["duration_s=60"], speed=1)
    assert response.status_code == 400
    assert "RUN_PACED_MAX_S" in response.json()["duration_s"][0]
    assert start(run_users["owner"], tiny_scenario, overrides=["duration_s=40"], speed=1).status_code == 202


@override_settings(USER_WALL_BUDGET_S=100)
def test_it_keeps_a_users_paced_runs_within_their_wall_time_budget(run_users: dict, tiny_scenario: str) -> None:
    assert start(run_users["owner"], tiny_scenario, overrides=["duration_s=60"], speed=1).status_code == 202
    response = start(run_users["owner"], tiny_scenario, overrides=["duration_s=60"], speed=1)
    assert response.status_code == 429
    assert response.json()["setting"] == "USER_WALL_BUDGET_S"
    assert start(run_users["reviewer"], tiny_scenario, overrides=["duration_s=60"], speed=1).status_code == 202


@override_settings(USER_REQUEST_BUDGET=400)
def test_it_keeps_a_users_runs_within_their_request_budget(run_users: dict, tiny_scenario: str) -> None:
    assert start(run_users["owner"], tiny_scenario).status_code == 202  # about 240 requests
    response = start(run_users["owner"], tiny_scenario)
    assert response.status_code == 429
    assert response.json()["setting"] == "USER_REQUEST_BUDGET"
    # A finished run no longer counts.
    EmulatorRun.objects.filter(started_by=run_users["owner"]).update(status="done")
    assert start(run_users["owner"], tiny_scenario).status_code == 202


@override_settings(GLOBAL_REQUEST_BUDGET=500)
def test_it_keeps_everyones_runs_within_the_global_request_budget(run_users: dict, tiny_scenario: str) -> None:
    assert start(run_users["owner"], tiny_scenario).status_code == 202
    assert start(run_users["reviewer"], tiny_scenario).status_code == 202
    response = start(run_users["outsider"], tiny_scenario)
    assert response.status_code == 429
    assert response.json()["setting"] == "GLOBAL_REQUEST_BUDGET"


@override_settings(RUN_COMMANDS_MAX=2)
def test_it_caps_the_live_commands_one_run_takes(run_users: dict, tiny_scenario: str) -> None:
    run_id = start(run_users["owner"], tiny_scenario).json()["id"]
    EmulatorRun.objects.filter(pk=run_id).update(status="running")
    url = f"/api/runs/{run_id}/faults/"
    for _ in range(2):
        assert api(run_users["owner"]).post(url, {"kill": "host:1"}, format="json").status_code == 202
    response = api(run_users["owner"]).post(url, {"kill": "host:1"}, format="json")
    assert response.status_code == 429
    assert response.json()["setting"] == "RUN_COMMANDS_MAX"
    assert RunCommand.objects.filter(run_id=run_id).count() == 2
