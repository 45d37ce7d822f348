"""The SQLite backend takes one process's write transactions in turn (reviewer/ops/sqlite_backend)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import DatabaseError, OperationalError, connection, connections, transaction

from reviewer.models import DesignDoc
from reviewer.ops.sqlite_backend import base

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "sqlite", reason="the SQLite backend only"),
]


def _in_thread(work: Any) -> tuple[threading.Thread, dict[str, Any]]:
    """Run ``work`` in a thread with its own connection; its result or error lands in the dict."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["result"] = work()
        except Exception as error:  # handed to the test
            out["error"] = error
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def test_a_write_transaction_holds_the_turn_until_it_ends(django_user_model: Any) -> None:
    owner = django_user_model.objects.create_user("owner")
    assert not base._WRITE_TURN.locked()
    with transaction.atomic():
        DesignDoc.objects.create(owner=owner, title="A")
        assert base._WRITE_TURN.locked()
    assert not base._WRITE_TURN.locked()
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        DesignDoc.objects.create(owner=owner, title="B")
        1 / 0  # noqa: B018 - rolls the transaction back
    assert not base._WRITE_TURN.locked()
    assert list(DesignDoc.objects.values_list("title", flat=True)) == ["A"]


def test_a_second_writer_waits_for_the_first_to_commit_then_goes_on(django_user_model: Any) -> None:
    owner = django_user_model.objects.create_user("owner")
    started = threading.Event()

    def second() -> int:
        started.set()
        with transaction.atomic():
            return DesignDoc.objects.create(owner_id=owner.pk, title="second").pk

    with transaction.atomic():
        DesignDoc.objects.create(owner=owner, title="first")
        thread, out = _in_thread(second)
        assert started.wait(5)
        thread.join(0.3)
        assert thread.is_alive(), "the second writer went in while the first held the turn"
    thread.join(10)
    assert not thread.is_alive() and "error" not in out, out
    assert list(DesignDoc.objects.order_by("pk").values_list("title", flat=True)) == ["first", "second"]


def test_the_wait_is_bounded_by_the_database_timeout(django_user_model: Any, monkeypatch: Any) -> None:
    owner = django_user_model.objects.create_user("owner")

    def writer() -> None:
        # settings_dict is shared by every thread's connection: put it back after the test,
        # or every later test in this process waits at most 0.2 s for a lock.
        monkeypatch.setitem(connection.settings_dict, "OPTIONS", {**connection.settings_dict["OPTIONS"], "timeout": 0.2})
        with transaction.atomic():
            DesignDoc.objects.create(owner_id=owner.pk, title="late")

    with transaction.atomic():
        DesignDoc.objects.create(owner=owner, title="first")
        thread, out = _in_thread(writer)
        thread.join(10)
    assert isinstance(out.get("error"), OperationalError) and "database is locked" in str(out["error"])
    assert not base._WRITE_TURN.locked()
    assert list(DesignDoc.objects.values_list("title", flat=True)) == ["first"]


def test_a_connection_closed_inside_a_transaction_gives_the_turn_back(django_user_model: Any) -> None:
    owner = django_user_model.objects.create_user("owner")
    with pytest.raises(DatabaseError), transaction.atomic():
        DesignDoc.objects.create(owner=owner, title="lost")
        connection.close()
        DesignDoc.objects.create(owner=owner, title="after close")
    assert not base._WRITE_TURN.locked()
