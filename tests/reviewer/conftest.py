"""Fixtures for the reviewer app's tests.

The folders mirror ``reviewer/`` (``runs/`` tests ``reviewer/runs/``, and so on;
tests of the top-level modules sit here). The shared fixture modules beside this
file (``review_data_fixtures``, ``collab_fixtures``, ``runs_helpers``) import by
name from every folder, as pytest puts this directory on ``sys.path`` for its
conftest; test file names stay unique across ``tests/`` for the same reason.

Live runs: ``celery_workers`` starts real Celery worker processes on the test
Redis server and the test database (they must open the same database, so tests
that use them take ``transactional_db``); ``celery_worker_process`` is one such
worker shared by a test module.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import TINY_SCENARIO, subprocess_database_url

ROOT = Path(__file__).resolve().parents[2]



class CeleryWorkers:
    """Real ``celery worker`` processes for one test module."""

    def __init__(self, redis_url: str, database_url: str) -> None:
        self.redis_url = redis_url
        self.database_url = database_url
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.logs: dict[str, Path] = {}
        self.log_dir = Path(tempfile.mkdtemp(prefix="review-test-celery-"))

    def start(self, label: str = "w") -> str:
        """Start one worker (prefork, one child); return its node name once it answers a ping."""
        return self.start_many([label])[0]

    def start_many(self, labels: list[str]) -> list[str]:
        """Start several workers at once (they boot in parallel); their node names."""
        names = [self._spawn(label) for label in labels]
        for name in names:
            self.wait_for_ping(name)
        return names

    def _spawn(self, label: str) -> str:
        name = f"{label}-{uuid.uuid4().hex[:6]}@localhost"
        env = {**os.environ, "REDIS_URL": self.redis_url, "DATABASE_URL": self.database_url,
               "DJANGO_SETTINGS_MODULE": "reviewer.settings", "PYTHONUNBUFFERED": "1"}
        log_path = self.log_dir / f"{label}.log"
        with log_path.open("wb") as log_file:
            proc = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "reviewer", "worker", "-P", "prefork", "-c", "1",
                 "--without-heartbeat", "--without-gossip", "--without-mingle", "-n", name,
                 "--loglevel", "INFO"],
                cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True,
            )
        self.procs[name] = proc
        self.logs[name] = log_path
        return name

    def wait_for_ping(self, name: str, timeout_s: float = 60.0) -> None:
        """Block until the worker answers a control ping."""
        from reviewer.celery import app

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.procs[name].poll() is not None:
                raise RuntimeError(f"worker {name} exited:\n{self.log(name)}")
            if app.control.ping(destination=[name], timeout=0.5):
                return
        raise RuntimeError(f"worker {name} did not answer a ping in {timeout_s} s:\n{self.log(name)}")

    def log(self, name: str) -> str:
        """The worker's output so far."""
        return self.logs[name].read_text(errors="replace")

    def pool_child_pids(self, name: str) -> list[int]:
        """Process ids of the worker's pool children."""
        parent = self.procs[name].pid
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(parent)], capture_output=True, text=True)
        return [int(pid) for pid in out.stdout.split()]

    def kill(self, name: str) -> None:
        """SIGKILL the worker and its pool children at once."""
        proc = self.procs[name]
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)

    def stop_all(self) -> None:
        """Kill every worker started here and its pool children (nothing outlives the module)."""
        for proc in self.procs.values():
            # Children orphaned by a killed parent keep the group id.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)


@pytest.fixture(scope="module")
def celery_workers(redis_url: str, django_db_setup: Any, django_db_blocker: Any) -> Iterator[CeleryWorkers]:
    """A factory of real Celery workers on the test Redis and test database."""
    with django_db_blocker.unblock():
        database_url = subprocess_database_url()
    workers = CeleryWorkers(redis_url, database_url)
    _purge_queue()
    try:
        yield workers
    finally:
        workers.stop_all()
        _purge_queue()


@pytest.fixture(autouse=True)
def _docs_work_in_process(settings: Any) -> None:
    """Revisions re-anchor their findings before returning, and the break pass's advice is
    worked out when asked, as with eager tasks; the tasks' own tests turn them on."""
    settings.REANCHOR_IN_BACKGROUND = False
    settings.BREAK_ADVICE_IN_BACKGROUND = False
    settings.ANALYSIS_IN_BACKGROUND = False


@pytest.fixture(scope="module")
def celery_worker_process(celery_workers: CeleryWorkers) -> str:
    """One real Celery worker for the module; its node name."""
    return celery_workers.start("w1")


def _purge_queue() -> None:
    """Drop tasks left in the queue by an earlier module (their rows are gone)."""
    from reviewer.celery import app

    app.control.purge()


@pytest.fixture
def tiny_scenario() -> str:
    """TOML text of the smallest useful scenario."""
    return TINY_SCENARIO


@pytest.fixture
def run_users(django_user_model: Any) -> dict[str, Any]:
    """An owner, a reviewer, an outsider and a staff member (logged in without passwords)."""
    make = django_user_model.objects.create_user
    return {
        "owner": make("owner"),
        "reviewer": make("reviewer"),
        "outsider": make("outsider"),
        "staff": make("staffer", is_staff=True),
    }


@pytest.fixture
def review_session(run_users: dict[str, Any]) -> Any:
    """A review session owned by ``owner`` with ``reviewer`` taking part; it files
    findings directly (drafts are tested in test_drafts.py)."""
    from reviewer.models import DesignDoc, ReviewSession

    doc = DesignDoc.objects.create(title="Inference serving", body="A doc.", owner=run_users["owner"])
    session = ReviewSession.objects.create(title="Review", doc=doc, owner=run_users["owner"], file_directly=True)
    session.reviewers.add(run_users["reviewer"])
    return session



@pytest.fixture
def fresh_channel_layer(redis_url: str) -> Iterator[None]:
    """A new channel layer for each test: each async test runs on its own event
    loop, and channels-redis keeps receive locks bound to the loop that made them."""
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture
def stalled_redis() -> Iterator[str]:
    """A Redis URL whose server accepts connections and never answers (a SIGSTOPped Redis)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(server.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"redis://127.0.0.1:{server.getsockname()[1]}/0"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


@pytest.fixture
def layer_on_stalled_redis(settings, stalled_redis: str) -> Iterator[None]:
    from channels.layers import channel_layers

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                           "CONFIG": {"hosts": [{"address": stalled_redis, "socket_timeout": None}]}}}
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()
