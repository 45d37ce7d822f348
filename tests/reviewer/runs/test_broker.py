"""Services send Celery tasks by name, once the transaction commits, off the request
path; a broker that refuses is logged, naming what was not handed over."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.db import transaction

from reviewer.celery import app
from reviewer.runs import broker

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[Any], dict[str, Any]]]:
    calls: list[tuple[str, list[Any], dict[str, Any]]] = []
    monkeypatch.setattr(app, "send_task", lambda name, args=None, **options: calls.append((name, args, options)))
    return calls


def test_every_name_a_service_sends_is_a_registered_task() -> None:
    import reviewer.tasks  # noqa: F401 (registers the tasks)

    for name in ("run_emulation", "dispatch_runs", "fleet_analysis", "placement_answer", "break_advice",
                 "trace_upload", "reanchor_revision"):
        assert broker.task_name(name) in app.tasks, name


def test_a_task_is_sent_by_name_only_once_the_transaction_commits(sent: list[Any]) -> None:
    with transaction.atomic():
        broker.send_task_after_commit("fleet_analysis", [7], "the analysis of fleet version 7", "the next ask",
                                      soft_time_limit=5)
        broker.wait_sent()
        assert sent == []
    broker.wait_sent()
    assert sent == [("reviewer.fleet_analysis", [7], {"soft_time_limit": 5})]


def test_a_task_rolled_back_with_its_transaction_is_never_sent(sent: list[Any]) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        broker.send_task_after_commit("trace_upload", [3], "trace upload 3", "nothing")
        raise RuntimeError("the request failed")
    broker.wait_sent()
    assert sent == []


def test_a_refused_task_is_logged_with_what_was_lost_and_what_sends_it_again(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("broker down")

    monkeypatch.setattr(app, "send_task", refuse)
    with caplog.at_level(logging.WARNING, logger="reviewer.runs.broker"):
        broker.send_task_after_commit("break_advice", [9], "the break advice of fleet version 9", "the page's next ask")
        broker.wait_sent()
    assert "could not hand the break advice of fleet version 9 to the broker; the page's next ask sends it again" \
        in caplog.text
