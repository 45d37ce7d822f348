"""The home page's runs list shows a queued run's place in the queue for a worker
(the fair queue's ``queue_position``); a run that left the queue shows none."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from reviewer.models import EmulatorRun, RunStatus

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs stay queued: nothing takes them."""
    monkeypatch.setattr("reviewer.runs.services.enqueue_run", lambda run: None)


def start(user: Any, scenario: str) -> int:
    client = APIClient()
    client.force_authenticate(user)
    response = client.post("/api/runs/", {"scenario": scenario, "speed": 10}, format="json")
    assert response.status_code == 202, response.content
    return int(response.json()["id"])


def home(user: Any) -> str:
    client = Client()
    client.force_login(user)
    return client.get("/").content.decode()


def test_the_home_pages_runs_list_shows_each_queued_runs_place(run_users: dict, tiny_scenario: str) -> None:
    owner = run_users["owner"]
    first = start(owner, tiny_scenario)
    start(owner, tiny_scenario)
    page = home(owner)
    assert 'data-queue-place="1"' in page and "place 2 in the queue for a worker" in page

    # The first starts: the second moves up, and a running run shows no place.
    EmulatorRun.objects.filter(pk=first).update(status=RunStatus.RUNNING)
    page = home(owner)
    assert "place 1 in the queue for a worker" in page and 'data-queue-place="2"' not in page
