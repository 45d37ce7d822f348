"""A live dashboard for end-to-end tests in headless Chromium.

``dashboard`` starts Daphne (HTTP and websockets) and one Celery worker as
subprocesses on the test database and the test Redis, for one test module.
Tests take ``transactional_db`` so the rows they create are committed and the
subprocesses see them; the database is flushed after each test, so each test
makes its own data (``example_review``).

``browser`` is one headless Chromium for the module; ``signed_in`` opens a
new browser context and signs a user in through the login page. Every page
opened through it records console errors and uncaught exceptions, and the
test fails if there were any.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import PASSWORD, ExampleReview, LiveServer
from support import subprocess_database_url

from reviewer.ops.supervisor import daphne_command

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]

pytestmark = pytest.mark.browser


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _wait_http(server: LiveServer, path: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in server.procs):
            raise RuntimeError(f"a live-server process exited early:\n{server.log_tail()}")
        try:
            with urllib.request.urlopen(server.url + path, timeout=2) as response:
                if response.status < 500:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"the live server did not answer {path} in {timeout_s} s:\n{server.log_tail()}")


def _wait_celery(server: LiveServer, timeout_s: float) -> None:
    from reviewer.celery import app

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in server.procs):
            raise RuntimeError(f"a live-server process exited early:\n{server.log_tail()}")
        if app.control.ping(timeout=0.5):
            return
    raise RuntimeError(f"no Celery worker answered in {timeout_s} s:\n{server.log_tail()}")


@pytest.fixture(scope="module")
def dashboard(redis_url: str, django_db_setup: Any, django_db_blocker: Any) -> Iterator[LiveServer]:
    """Daphne and Celery workers (runs, docs) on the test database and Redis, for the module."""
    from reviewer.celery import app

    with django_db_blocker.unblock():
        database_url = subprocess_database_url()
    port = _free_port()
    server = LiveServer(url=f"http://127.0.0.1:{port}")
    log_dir = Path(tempfile.mkdtemp(prefix="review-browser-"))
    env = {**os.environ, "REDIS_URL": redis_url, "DATABASE_URL": database_url,
           "DJANGO_SETTINGS_MODULE": "reviewer.settings", "PYTHONUNBUFFERED": "1", "SERVE_STATIC": "1"}
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    app.control.purge()
    try:
        server.logs.append(log_dir / "daphne.log")
        server.procs.append(_start(
            daphne_command("127.0.0.1", port), env, server.logs[-1]))
        # A worker for runs and one for the docs queue (re-anchoring, the break pass's
        # advice), as serve starts them: docs work never holds a run back.
        for name, queue in (("celery", "celery"), ("celery-docs", "docs")):
            server.logs.append(log_dir / f"{name}.log")
            server.procs.append(_start(
                [sys.executable, "-m", "celery", "-A", "reviewer", "worker", "-Q", queue, "-P", "prefork", "-c", "1",
                 "--without-heartbeat", "--without-gossip", "--without-mingle", "-n",
                 f"browser-{queue}-{port}@localhost", "--loglevel", "INFO"],
                env, server.logs[-1]))
        _wait_http(server, "/accounts/login/", 60)
        _wait_celery(server, 60)
        yield server
    finally:
        server.stop()
        app.control.purge()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module (the system's, never a downloaded one)."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium); "
                    "the browser tests never download a browser")

    # Playwright's sync API keeps an event loop in this thread; Django's ORM,
    # used by the tests to make their data, refuses to run next to one
    # unless told it is safe (it is: the loop is idle while the test runs).
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    pw = sync_playwright().start()
    chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    try:
        yield chromium
    finally:
        chromium.close()
        pw.stop()
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def example_review(transactional_db: Any, django_user_model: Any) -> ExampleReview:
    """``manage.py load_example`` owned by alice, with bob as a reviewer."""
    from django.core.management import call_command
    from django.db import connection

    from reviewer.management.commands.load_example import EXAMPLE_TITLE
    from reviewer.models import ReviewSession

    alice = django_user_model.objects.create_user("alice", password=PASSWORD, is_staff=False)
    bob = django_user_model.objects.create_user("bob", password=PASSWORD)
    def load() -> None:
        # In a thread of its own: the events load_example publishes go through
        # async_to_sync, which refuses to run beside Playwright's event loop.
        try:
            with open(os.devnull, "w") as quiet:
                call_command("load_example", owner="alice", example=["gateway"], stdout=quiet)
        finally:
            connection.close()

    loader = threading.Thread(target=load)
    loader.start()
    loader.join(timeout=60)
    session = ReviewSession.objects.get(doc__title=EXAMPLE_TITLE)
    session.reviewers.add(bob)
    return ExampleReview(session_id=session.pk, alice=alice, bob=bob)


@pytest.fixture
def second_example(example_review: ExampleReview) -> ExampleReview:
    """The second example (``load_example --example chat-70b``) beside the first, owned by
    alice with bob as a reviewer."""
    from django.core.management import call_command
    from django.db import connection

    from reviewer.models import ReviewSession
    from reviewer.review.example.reviews import SECOND

    def load() -> None:
        try:
            with open(os.devnull, "w") as quiet:
                call_command("load_example", owner="alice", example=[SECOND.key], stdout=quiet)
        finally:
            connection.close()

    loader = threading.Thread(target=load)
    loader.start()
    loader.join(timeout=120)
    session = ReviewSession.objects.get(doc__title=SECOND.title)
    session.reviewers.add(example_review.bob)
    return ExampleReview(session_id=session.pk, alice=example_review.alice, bob=example_review.bob)


@pytest.fixture
def console_errors() -> list[str]:
    """Console errors and uncaught exceptions of every page a test opens."""
    return []


@pytest.fixture
def signed_in(
    browser: Any, dashboard: LiveServer, console_errors: list[str]
) -> Iterator[Callable[..., Any]]:
    """``signed_in("alice")`` -> a page in a fresh context, signed in via the login form."""
    contexts: list[Any] = []

    def sign_in(username: str, width: int = 1280, height: int = 900) -> Any:
        context = browser.new_context(viewport={"width": width, "height": height}, accept_downloads=True)
        contexts.append(context)
        page = context.new_page()
        page.on("console", lambda m: console_errors.append(f"{username}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: console_errors.append(f"{username}: uncaught {e}"))
        page.goto(dashboard.url + "/")
        page.fill("#id_username", username)
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(dashboard.url + "/")
        return page

    yield sign_in
    for context in contexts:
        context.close()
    assert console_errors == [], f"errors in the browser console: {console_errors}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed browser test reports the tail of the live server's logs with it."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    server = getattr(item, "funcargs", {}).get("dashboard")
    if report.failed and server is not None:
        report.sections.append(("dashboard logs", server.log_tail()))
