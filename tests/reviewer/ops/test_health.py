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
