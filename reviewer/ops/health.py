"""Checks behind /healthz and /readyz: the database, Redis and at least one Celery worker,
and, under ``manage.py serve``, the processes it supervises.

Each check answers ``"ok"`` or ``"error: <reason>"``. The reasons can hold host
names and exception text, so the endpoints show them to staff only; everyone
else sees ``"ok"`` or ``"error"``, and the reason goes to the log.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import redis
from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from reviewer.celery import app

log = logging.getLogger(__name__)

# A probe's default deadline (Kubernetes: 1 s); each check stays well under it.
REDIS_TIMEOUT_S = 0.3
CELERY_TIMEOUT_S = 0.6


def check_database() -> str:
    """'ok', or the reason the database cannot answer a query."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"
    return "ok"


def check_migrations() -> str:
    """'ok' when every migration is applied (a process on an old schema is not ready)."""

    try:
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"
    return f"error: {len(pending)} migrations not applied; run manage.py migrate" if pending else "ok"


def check_redis(timeout_s: float = REDIS_TIMEOUT_S) -> str:
    """'ok', or the reason the Redis server at REDIS_URL does not answer PING."""

    try:
        client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
        client.ping()
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"
    return "ok"


def check_celery(timeout_s: float = CELERY_TIMEOUT_S) -> str:
    """'ok' as soon as one Celery worker answers a ping; an error if none does within ``timeout_s``.

    ``limit=1`` stops collecting at the first reply, so a healthy cluster
    answers in milliseconds instead of the whole timeout.
    """

    try:
        replies = app.control.ping(timeout=timeout_s, limit=1)
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"
    if not replies:
        return f"error: no Celery worker answered a ping within {timeout_s} s"
    return "ok"


#: ``manage.py serve`` writes its children's state here (see :mod:`reviewer.ops.supervisor`).
PROCESS_STATE_FILE = "processes.json"
#: A state file older than this is from a supervisor that no longer runs.
PROCESS_STATE_STALE_S = 20.0


def supervised_processes() -> dict[str, Any] | None:
    """The state ``serve`` last wrote of its children, or None when no serve supervises this app."""
    path = Path(settings.DATA_DIR) / PROCESS_STATE_FILE
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) and isinstance(state.get("processes"), dict) else None


def check_processes(state: dict[str, Any]) -> str:
    """'ok' when every supervised child runs; else which ones are being started again."""
    age_s = time.time() - float(state.get("updated_at") or 0)
    if age_s > PROCESS_STATE_STALE_S:
        return f"error: serve last reported its processes {age_s:.0f} s ago; is it still running?"
    down = [f"{name} (exited with status {child.get('last_exit')}, starting again)"
            for name, child in state["processes"].items() if child.get("status") != "running"]
    return f"error: {'; '.join(down)}" if down else "ok"


def process_restarts(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each supervised child's state, restart count and last restart (no pids, no reasons)."""
    return {name: {"status": child.get("status"), "restarts": child.get("restarts", 0),
                   "last_restart": child.get("last_restart")}
            for name, child in state["processes"].items()}


def health_report() -> dict[str, str]:
    """The database, Redis and Celery checks by name (and serve's processes, under serve)."""
    report = {"database": check_database(), "redis": check_redis()}
    # Without Redis there is no broker to carry a ping; say so rather than wait.
    report["celery"] = check_celery() if report["redis"] == "ok" else "error: Redis is unreachable"
    state = supervised_processes()
    if state is not None:
        report["processes"] = check_processes(state)
    return report


def readiness_report() -> dict[str, str]:
    """What this web process needs to serve requests: the database, its schema and Redis.

    Celery workers are left out: a web process without workers still serves
    pages and the API, and taking it out of rotation would not bring one back.
    """
    report = {"database": check_database()}
    report["migrations"] = check_migrations() if report["database"] == "ok" else "error: database unreachable"
    report["redis"] = check_redis()
    return report


def public(report: dict[str, str]) -> dict[str, str]:
    """The report without reasons ("ok" or "error"), logging the reasons it drops."""
    for name, value in report.items():
        if value != "ok":
            log.warning("health check %s failed: %s", name, value)
    return {name: "ok" if value == "ok" else "error" for name, value in report.items()}
