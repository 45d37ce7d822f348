"""The websocket Origin check: the page's origin must be the server the socket reaches."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from reviewer.realtime.origin import is_same_origin

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("origin", "host"), [
    ("http://localhost:8000", "localhost:8000"),
    ("http://127.0.0.1:8000", "127.0.0.1:8000"),
    ("https://localhost", "localhost"),
    ("http://localhost", "localhost"),
    ("http://[::1]:8000", "[::1]:8000"),
])
def test_it_accepts_the_origin_of_the_server_itself(origin: str, host: str) -> None:
    assert is_same_origin(origin, host)


@pytest.mark.parametrize(("origin", "host"), [
    ("http://localhost:9999", "localhost:8000"),  # another program on an allowed host
    ("http://localhost:8000", "localhost"),
    ("http://evil.example", "localhost:8000"),
    ("http://evil.example:8000", "evil.example:8000"),  # not an allowed host
    ("null", "localhost:8000"),
    ("http://localhost:notaport", "localhost:8000"),
    (None, "localhost:8000"),
    ("http://localhost:8000", None),
])
def test_it_refuses_any_other_origin(origin: str | None, host: str | None) -> None:
    assert not is_same_origin(origin, host)


def test_it_accepts_an_origin_listed_as_trusted(settings) -> None:
    settings.CSRF_TRUSTED_ORIGINS = ["https://review.example.com"]
    assert is_same_origin("https://review.example.com", "localhost:8000")


def test_it_does_not_answer_to_testserver_outside_tests() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("ALLOWED_HOSTS", "DJANGO_SETTINGS_MODULE")}
    code = "from reviewer import settings; print(settings.ALLOWED_HOSTS)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         check=True)
    assert "testserver" not in out.stdout and "localhost" in out.stdout
