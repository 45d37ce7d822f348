"""The one way the services send Celery tasks: by name, after the transaction commits, off the request path.

Services never import :mod:`reviewer.tasks` (the tasks import the services);
they name the task instead::

    send_task_after_commit("fleet_analysis", [version.pk], what="the analysis of fleet version 7",
                           retried_by="opening the fleet page")

The task is sent once the current transaction commits (so the worker finds
the rows it was asked about), on one hand-off thread per process (so a broker
that stops answering never holds up a request). A broker that refuses the task
is logged, naming what was not handed over and what sends it again: nothing
waits only on a task that was lost.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import transaction

from reviewer.celery import app

log = logging.getLogger(__name__)

#: Every task of :mod:`reviewer.tasks` is registered as ``reviewer.<function name>``.
TASK_PREFIX = "reviewer."


def task_name(name: str) -> str:
    """The registered name of the task ``name`` (``"run_emulation"`` -> ``"reviewer.run_emulation"``)."""
    return name if name.startswith(TASK_PREFIX) else TASK_PREFIX + name


def send_now(name: str, args: list[Any] | None = None, **options: Any) -> None:
    """Send the task ``name`` to the broker now (``options`` as for ``apply_async``:
    ``soft_time_limit``, ``time_limit``, ``expires``, ``queue``). Raises when the broker refuses."""
    app.send_task(task_name(name), args=args or [], **options)


def send_task_after_commit(task: str, args: list[Any], what: str, retried_by: str, **options: Any) -> None:
    """Send the task ``task`` with ``args`` once the current transaction commits, off the
    request path. A broker that cannot take it is logged, naming ``what`` was not handed
    over and ``retried_by`` what sends it again."""

    def send() -> None:
        try:
            send_now(task, args, **options)
        except Exception:
            log.warning("could not hand %s to the broker; %s sends it again", what, retried_by, exc_info=True)

    transaction.on_commit(lambda: submit_off_request_path(send))


def submit_off_request_path(send: Callable[[], None]) -> None:
    """Run ``send`` (a call to the broker) on this process's hand-off thread, in order."""
    _enqueuer().submit(send)


_ENQUEUER: tuple[int, ThreadPoolExecutor] | None = None


def _enqueuer() -> ThreadPoolExecutor:
    """One thread per process that hands tasks to the broker, in order (a fresh one after a fork)."""
    global _ENQUEUER
    if _ENQUEUER is None or _ENQUEUER[0] != os.getpid():
        _ENQUEUER = (os.getpid(), ThreadPoolExecutor(max_workers=1, thread_name_prefix="run-enqueue"))
    return _ENQUEUER[1]


def wait_sent(timeout_s: float = 10.0) -> None:
    """Block until the tasks handed over so far reached the broker (for commands and tests)."""
    _enqueuer().submit(lambda: None).result(timeout=timeout_s)
