"""Checks behind /healthz: the database, Redis and at least one Celery worker."""

from __future__ import annotations

from django.conf import settings
from django.db import connection


def check_database() -> str:
    """'ok', or the reason the database cannot answer a query."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"
    return "ok"


def check_redis() -> str:
    """'ok', or the reason the Redis server at REDIS_URL does not answer PING."""
    import redis

    try:
        client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=1)
        client.ping()
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"
    return "ok"


def check_celery(timeout_s: float = 1.5) -> str:
    """'ok' when at least one Celery worker answers a ping within ``timeout_s``."""
    from reviewer.celery import app

    try:
        replies = app.control.ping(timeout=timeout_s)
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"
    if not replies:
        return f"error: no Celery worker answered a ping within {timeout_s} s"
    return "ok"


def health_report() -> dict[str, str]:
    """The three checks by name."""
    report = {"database": check_database(), "redis": check_redis()}
    # Without Redis there is no broker to carry a ping; say so rather than wait.
    report["celery"] = check_celery() if report["redis"] == "ok" else "error: Redis is unreachable"
    return report
