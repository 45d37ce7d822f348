"""The placement pass (placement.json, and ``?hosts=N``) is solved by a docs worker,
never by the web request: the page gets 202 until the answer is stored, then the
ranked layouts the worker stored."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from test_analysis_in_background import SMALL, _session

pytestmark = pytest.mark.django_db


def _no_solver_here(monkeypatch: Any) -> list[Any]:
    """Make the solver raise unless a worker task is running; the calls the worker made."""
    from emulator.analysis.placement import core

    real = core.solve
    calls: list[Any] = []
    state = {"worker": False}

    def solve(*args: Any, **kwargs: Any) -> Any:
        if not state["worker"]:
            raise AssertionError("the web request ran the placement solver")
        calls.append(kwargs.get("hosts", args[0] if args else None))
        return real(*args, **kwargs)

    monkeypatch.setattr(core, "solve", solve)
    import emulator.analysis.placement as package

    monkeypatch.setattr(package, "solve", solve)
    calls.append(state)
    return calls


def _as_worker(calls: list[Any], task: Any, *args: Any) -> Any:
    state = calls[0]
    state["worker"] = True
    try:
        return task.apply(args=list(args)).get()
    finally:
        state["worker"] = False


@pytest.fixture
def background(settings: Any, monkeypatch: Any) -> list[tuple[str, list[Any]]]:
    from reviewer.runs import broker

    settings.ANALYSIS_IN_BACKGROUND = True
    sent: list[tuple[str, list[Any]]] = []
    monkeypatch.setattr(broker, "send_task_after_commit", lambda name, args, *_: sent.append((name, args)))
    return sent


def test_placement_json_answers_202_until_the_worker_stored_the_answer_then_serves_it(
        django_user_model: Any, monkeypatch: Any, background: list[Any]) -> None:
    from reviewer.tasks import fleet_analysis

    calls = _no_solver_here(monkeypatch)
    owner, session = _session(django_user_model)
    client = Client()
    client.force_login(owner)
    url = f"/sessions/{session.pk}/placement.json"
    version = session.fleet_config.latest_version()

    first = client.get(url)
    assert first.status_code == 202 and first.json()["pending"] is True and first["Retry-After"] == "2"
    assert client.get(url).status_code == 202
    assert background == [("fleet_analysis", [version.pk])], "asked once, not once per poll"

    assert _as_worker(calls, fleet_analysis, version.pk) is True
    assert calls[1:], "the worker ran the solver"
    answer = client.get(url)
    assert answer.status_code == 200
    data = answer.json()
    assert data["hosts"] == 2 and data["units"] == 10
    assert data["ranked"] and all(entry["host_groups"] and entry["config_name"] for entry in data["ranked"])
    version.refresh_from_db()
    stored = version.analysis["placement_answer"]
    assert [e["label"] for e in data["ranked"]] == [e["label"] for e in stored["ranked"]]
    assert data["current_label"] == stored["current_label"]
    # Asking for the configured number of hosts reads the same stored answer.
    assert client.get(f"{url}?hosts=2").json() == data


def test_another_host_count_is_solved_by_the_worker_once_per_version_and_count(
        django_user_model: Any, monkeypatch: Any, background: list[Any]) -> None:
    from reviewer.models import PlacementAnswer
    from reviewer.tasks import placement_answer

    calls = _no_solver_here(monkeypatch)
    owner, session = _session(django_user_model)
    client = Client()
    client.force_login(owner)
    url = f"/sessions/{session.pk}/placement.json?hosts=5"
    version = session.fleet_config.latest_version()

    assert client.get(url).status_code == 202
    assert client.get(url).status_code == 202
    assert background == [("placement_answer", [version.pk, 5])]
    # An ask nobody answered for a minute is sent again.
    PlacementAnswer.objects.filter(version=version, hosts=5).update(asked_at=timezone.now() - timedelta(minutes=5))
    assert client.get(url).status_code == 202
    assert background == [("placement_answer", [version.pk, 5])] * 2
    assert _as_worker(calls, placement_answer, version.pk, 5) is True
    assert calls[1:] == [5]
    data = client.get(url).json()
    assert data["hosts"] == 5
    assert sum(g["count"] for g in data["ranked"][0]["host_groups"]) == 5
    assert client.get(url).json() == data and calls[1:] == [5], "solved once, then read"
    assert list(PlacementAnswer.objects.filter(version=version).values_list("hosts", flat=True)) == [5]
    # Still bounded: no row is made for a count past the bound.
    assert client.get(f"/sessions/{session.pk}/placement.json?hosts=65").status_code == 400
    assert PlacementAnswer.objects.count() == 1


def test_a_placement_over_the_memory_limit_is_refused_and_the_page_stops_waiting(
        django_user_model: Any, settings: Any, monkeypatch: Any, background: list[Any]) -> None:
    from emulator.analysis import record as emulator_record
    from reviewer.tasks import placement_answer

    settings.ANALYSIS_MEMORY_LIMIT_MB = 64
    owner, session = _session(django_user_model)
    version = session.fleet_config.latest_version()

    def greedy(*args: Any, **kwargs: Any) -> Any:
        return bytearray(512 * 1024 * 1024)  # over the limit: MemoryError in the worker

    monkeypatch.setattr(emulator_record, "placement_answer", greedy)
    assert placement_answer.apply(args=[version.pk, 7]).get() is False
    client = Client()
    client.force_login(owner)
    answer = client.get(f"/sessions/{session.pk}/placement.json?hosts=7")
    assert answer.status_code == 422 and "more than 64 MB" in answer.json()["error"]


def test_a_puzzle_that_does_not_apply_is_a_400_with_the_solvers_reason(
        django_user_model: Any, monkeypatch: Any, background: list[Any]) -> None:
    from reviewer.review import services
    from reviewer.tasks import fleet_analysis

    calls = _no_solver_here(monkeypatch)
    owner, session = _session(django_user_model)
    mixed = SMALL.replace("count = 2\nunits = 10", "count = 1\nunits = 10", 1) + (
        '[[hosts]]\ncount = 1\nunits = 12\nworkers = ["small@0"]\n')
    fleet = services.fleet_config_create(owner=owner, name="mixed", toml=mixed, doc=session.doc)
    services.session_update(session=session, fleet_config=fleet)
    client = Client()
    client.force_login(owner)
    url = f"/sessions/{session.pk}/placement.json"
    assert client.get(url).status_code == 202
    assert _as_worker(calls, fleet_analysis, fleet.latest_version().pk) is True
    answer = client.get(url)
    assert answer.status_code == 400 and answer.json()["error"].startswith("hosts: the scenario mixes hosts")
