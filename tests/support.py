"""Helpers shared by test fixtures that start the app's processes."""

from __future__ import annotations


def subprocess_database_url() -> str:
    """A DATABASE_URL that opens the test database pytest-django set up.

    Test servers and Celery workers run as subprocesses; they must read and
    write the same database as the test that started them.
    """
    from django.db import connection

    settings = connection.settings_dict
    name = settings["NAME"]
    if settings["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{name}"
    user = settings.get("USER") or ""
    password = settings.get("PASSWORD") or ""
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = settings.get("HOST") or "127.0.0.1"
    port = settings.get("PORT") or "5432"
    return f"postgres://{auth}{host}:{port}/{name}"
