"""Runs waiting for a worker show their place in the queue: in the API, in the runs
list and on the home page; a run that left the queue has none."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from reviewer import selectors
from reviewer.models import EmulatorRun, RunStatus

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs stay queued: nothing takes them."""
    monkeypatch.setattr("reviewer.services.runs.enqueue_run", lambda run: None)


def api(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def start(user: Any, scenario: str) -> int:
    response = api(user).post("/api/runs/", {"scenario": scenario, "speed": 10}, format="json")
    assert response.status_code == 202, response.content
    return int(response.json()["id"])


def test_queued_runs_have_places_in_the_order_they_were_queued_across_users(
    run_users: dict, tiny_scenario: str
) -> None:
    first = start(run_users["owner"], tiny_scenario)
    second = start(run_users["reviewer"], tiny_scenario)
    third = start(run_users["owner"], tiny_scenario)
    owner = api(run_users["owner"])
    assert owner.get(f"/api/runs/{first}/").json()["queue_place"] == 1
    assert owner.get(f"/api/runs/{third}/").json()["queue_place"] == 3  # behind the reviewer's run

    # The first leaves the queue for a worker: the others move up; a running run has no place.
    EmulatorRun.objects.filter(pk=first).update(status=RunStatus.RUNNING)
    assert owner.get(f"/api/runs/{first}/").json()["queue_place"] is None
    assert owner.get(f"/api/runs/{third}/").json()["queue_place"] == 2
    listed = {r["id"]: r["queue_place"] for r in owner.get("/api/runs/").json()["results"]}
    assert listed[third] == 2 and listed[first] is None
    assert selectors.queue_place(EmulatorRun.objects.get(pk=second)) == 1


def test_the_home_pages_runs_list_shows_a_queued_runs_place(run_users: dict, tiny_scenario: str) -> None:
    start(run_users["reviewer"], tiny_scenario)
    start(run_users["owner"], tiny_scenario)
    client = Client()
    client.force_login(run_users["owner"])
    page = client.get("/").content.decode()
    assert 'data-queue-place="2"' in page and "place 2 in the queue for a worker" in page
