"""The health checks behind /healthz, in process."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

from reviewer.ops import health


@pytest.mark.django_db
def test_it_reports_the_database_ok() -> None:
    assert health.check_database() == "ok"


@override_settings(REDIS_URL="redis://127.0.0.1:1/0")
def test_it_names_the_reason_when_redis_is_unreachable() -> None:
    result = health.check_redis()
    assert result.startswith("error: ")
    assert "Connection" in result


def test_it_reports_redis_ok_when_it_answers(redis_url: str) -> None:
    assert health.check_redis() == "ok"


def test_it_reports_celery_down_when_no_worker_answers(redis_url: str) -> None:
    assert health.check_celery(timeout_s=0.5).startswith("error: no Celery worker answered")


@pytest.mark.django_db
@override_settings(REDIS_URL="redis://127.0.0.1:1/0")
def test_it_answers_503_with_each_reason_to_staff_when_something_is_down(django_user_model) -> None:
    client = Client()
    client.force_login(django_user_model.objects.create_user("ops", is_staff=True))
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["database"] == "ok"
    assert body["redis"].startswith("error: ")
    assert body["celery"] == "error: Redis is unreachable"


@pytest.mark.django_db
@override_settings(REDIS_URL="redis://127.0.0.1:1/0")
def test_it_shows_anyone_else_only_ok_or_error(django_user_model) -> None:
    anonymous, member = Client(), Client()
    member.force_login(django_user_model.objects.create_user("member"))
    for client in (anonymous, member):
        response = client.get("/healthz")
        assert response.status_code == 503
        assert response.json() == {"database": "ok", "redis": "error", "celery": "error"}
        assert b"127.0.0.1" not in response.content and b"Error" not in response.content


@pytest.mark.django_db
def test_it_is_ready_when_the_database_is_migrated_and_redis_answers(redis_url: str) -> None:
    response = Client().get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"database": "ok", "migrations": "ok", "redis": "ok"}


@pytest.mark.django_db
@override_settings(REDIS_URL="redis://127.0.0.1:1/0")
def test_it_is_not_ready_without_redis() -> None:
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.json()["redis"] == "error"


def test_it_answers_at_the_first_worker_ping_not_after_the_whole_timeout(celery_worker_process: str) -> None:
    import time

    health.check_celery(timeout_s=5.0)  # the first ping opens the broker connection
    started = time.monotonic()
    assert health.check_celery(timeout_s=5.0) == "ok"
    # A reply from an idle worker takes milliseconds; waiting out the timeout takes 5 s.
    assert time.monotonic() - started < 2.5


def _write_processes(directory, processes: dict, updated_at: float | None = None) -> None:
    import json
    import time

    (directory / health.PROCESS_STATE_FILE).write_text(json.dumps(
        {"supervisor_pid": 1, "updated_at": time.time() if updated_at is None else updated_at,
         "processes": processes}))


@pytest.mark.django_db
def test_healthz_shows_serves_restarts_and_a_child_being_started_again(tmp_path, django_user_model) -> None:
    _write_processes(tmp_path, {
        "daphne": {"status": "running", "restarts": 0, "last_restart": None, "last_exit": None},
        "celery worker 1": {"status": "restarting", "restarts": 2, "last_restart": "2026-01-02T03:04:05Z",
                            "last_exit": -9},
    })
    staff = Client()
    staff.force_login(django_user_model.objects.create_user("ops", is_staff=True))
    with override_settings(DATA_DIR=str(tmp_path), REDIS_URL="redis://127.0.0.1:1/0"):
        anonymous, seen_by_staff = Client().get("/healthz"), staff.get("/healthz")
    assert anonymous.status_code == 503
    assert anonymous.json()["processes"] == "error"
    assert anonymous.json()["restarts"] == {
        "daphne": {"status": "running", "restarts": 0, "last_restart": None},
        "celery worker 1": {"status": "restarting", "restarts": 2, "last_restart": "2026-01-02T03:04:05Z"},
    }
    assert seen_by_staff.json()["processes"] == "error: celery worker 1 (exited with status -9, starting again)"


def test_the_process_check_is_ok_when_every_child_runs_and_an_error_when_serve_stopped_reporting(tmp_path) -> None:
    import time

    running = {"daphne": {"status": "running", "restarts": 1, "last_restart": "x", "last_exit": 1}}
    _write_processes(tmp_path, running)
    with override_settings(DATA_DIR=str(tmp_path)):
        assert health.check_processes(health.supervised_processes()) == "ok"
        _write_processes(tmp_path, running, updated_at=time.time() - 120)
        assert "is it still running" in health.check_processes(health.supervised_processes())
    with override_settings(DATA_DIR=str(tmp_path / "elsewhere")):
        assert health.supervised_processes() is None  # not under serve: no process check
