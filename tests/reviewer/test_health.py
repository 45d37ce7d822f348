"""The health checks behind /healthz, in process."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

from reviewer import health


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
def test_it_answers_503_with_each_reason_when_something_is_down() -> None:
    response = Client().get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["database"] == "ok"
    assert body["redis"].startswith("error: ")
    assert body["celery"] == "error: Redis is unreachable"
