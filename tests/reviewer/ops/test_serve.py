"""``manage.py serve`` as a user runs it: a real subprocess on loopback ports."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from reviewer.ops.supervisor import free_port

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow


@dataclass
class Served:
    process: subprocess.Popen[str]
    base_url: str
    output_path: Path

    def output(self) -> str:
        return self.output_path.read_text()


def _get_health(base_url: str) -> tuple[int, dict[str, str]]:
    try:
        with urllib.request.urlopen(base_url + "healthz", timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _wait_health(served: Served, *, want_ok: bool, timeout_s: float = 60) -> tuple[int, dict[str, str]]:
    deadline = time.monotonic() + timeout_s
    last: tuple[int, dict[str, str]] = (0, {})
    while time.monotonic() < deadline:
        if served.process.poll() is not None:
            pytest.fail(f"serve exited early with {served.process.returncode}:\n{served.output()}")
        try:
            last = _get_health(served.base_url)
            if not want_ok or last[0] == 200:
                return last
        except (urllib.error.URLError, ConnectionError, json.JSONDecodeError):
            pass
        time.sleep(0.5)
    pytest.fail(f"/healthz did not answer as expected within {timeout_s} s; last {last}\n{served.output()}")


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def database_url() -> Iterator[str | None]:
    """A new, empty database on the server DATABASE_URL names (None: SQLite in DATA_DIR).

    serve migrates and creates its first account in whatever database it is
    given, so each test gets one of its own.
    """
    url = os.environ.get("DATABASE_URL", "").strip()
    if not url:
        yield None
        return
    import dj_database_url
    import psycopg

    config = dj_database_url.parse(url)
    name = f"serve_test_{uuid.uuid4().hex[:12]}"
    admin = psycopg.connect(
        host=config["HOST"] or None, port=config["PORT"] or None, user=config["USER"] or None,
        password=config["PASSWORD"] or None, dbname="postgres", autocommit=True,
    )
    try:
        admin.execute(f'CREATE DATABASE "{name}"')
        yield url.rsplit("/", 1)[0] + "/" + name
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@contextmanager
def serve(tmp_path: Path, database_url: str | None, *extra: str) -> Iterator[Served]:
    port = free_port()
    env = dict(os.environ, DATA_DIR=str(tmp_path / "data"), PYTHONUNBUFFERED="1")
    if database_url:
        env["DATABASE_URL"] = database_url
    output_path = tmp_path / f"serve-{port}.out"
    with open(output_path, "w") as out:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", str(port), *extra],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, text=True,
        )
    served = Served(process, f"http://127.0.0.1:{port}/", output_path)
    try:
        yield served
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def test_it_comes_up_healthy_and_leaves_no_process_behind_on_ctrl_c(tmp_path: Path, database_url: str | None) -> None:
    with serve(tmp_path, database_url) as served:
        status, report = _wait_health(served, want_ok=True)
        assert status == 200
        assert report == {"database": "ok", "redis": "ok", "celery": "ok"}
        started = _descendants(served.process.pid)
        names = " ".join(" ".join(p.cmdline()) for p in started)
        assert "daphne" in names
        assert "celery" in names
        # One beat sends the periodic reaper of stalled runs and sweeps.
        assert sum(1 for p in started if " beat " in " ".join(p.cmdline())) == 1
        if not os.environ.get("REDIS_URL"):
            assert "valkey-server" in names
        output = served.output()
        assert "Sign in as 'admin' with password" in output
        assert served.base_url in output
        # Every long step is announced before it starts, so the first start is never silent.
        steps = ["serve: migrating the database", "serve: done migrating the database in",
                 "Sign in as 'admin'", "serve: loading the example reviews", "load_example: loading ",
                 "serve: done loading the example reviews in", served.base_url]
        at = [output.find(step) for step in steps]
        assert -1 not in at and at == sorted(at), output

        served.process.send_signal(signal.SIGINT)
        assert served.process.wait(timeout=30) == 0
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in started) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = [" ".join(p.cmdline()) for p in started if _alive(p)]
        assert left == []


def test_it_reports_celery_unhealthy_without_workers_and_keeps_its_first_account(tmp_path: Path, database_url: str | None) -> None:
    with serve(tmp_path, database_url, "--workers", "0") as first:
        status, report = _wait_health(first, want_ok=False)
        assert status == 503
        assert report["database"] == "ok"
        assert report["redis"] == "ok"
        # Anonymous callers see no reasons; serve logs them.
        assert report["celery"] == "error"
        logs = "".join(path.read_text(errors="replace") for path in (tmp_path / "data" / "logs").iterdir())
        assert "no Celery worker answered" in logs
    with serve(tmp_path, database_url, "--workers", "0") as second:
        _wait_health(second, want_ok=False)
    assert "Sign in as 'admin' with password" in first.output()
    assert "password" not in second.output()
    assert "already loaded" in second.output()


def test_it_stops_with_an_error_naming_the_worker_that_died(tmp_path: Path, database_url: str | None) -> None:
    with serve(tmp_path, database_url) as served:
        _wait_health(served, want_ok=True)
        workers = [
            p for p in psutil.Process(served.process.pid).children()
            if "celery" in " ".join(p.cmdline()) and " worker " in " ".join(p.cmdline())
            and "-Q" not in p.cmdline()  # not the docs queue's worker
        ]
        assert len(workers) == 1
        everything = _descendants(served.process.pid)
        workers[0].kill()
        assert served.process.wait(timeout=30) != 0
        assert "celery worker 1" in served.output()
        assert "exited" in served.output()
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in everything) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert [p.pid for p in everything if _alive(p)] == []


def _shell(tmp_path: Path, database_url: str | None, code: str) -> str:
    """Run Python in ``manage.py shell`` beside serve (same DATA_DIR, database and Redis)."""
    env = dict(os.environ, DATA_DIR=str(tmp_path / "data"))
    if database_url:
        env["DATABASE_URL"] = database_url
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _statuses(tmp_path: Path, database_url: str | None, ids: list[int]) -> dict[int, tuple[str, str]]:
    out = _shell(tmp_path, database_url,
                 "import json; from reviewer.models import EmulatorRun; "
                 f"print(json.dumps({{r.pk: [r.status, r.reason] for r in EmulatorRun.objects.filter(pk__in={ids})}}))")
    return {int(k): (v[0], v[1]) for k, v in json.loads(out.strip().splitlines()[-1]).items()}


def test_it_ends_every_run_after_serve_is_killed_and_started_again(tmp_path: Path, database_url: str | None) -> None:
    from support import TINY_SCENARIO

    with serve(tmp_path, database_url, "--no-example") as first:
        _wait_health(first, want_ok=True)
        # One worker: a long paced run holds it, two flat-out runs wait in the queue behind it.
        out = _shell(tmp_path, database_url, (
            "from django.contrib.auth import get_user_model; from reviewer.runs.services import run_start; "
            f"tiny = {TINY_SCENARIO!r}; user = get_user_model().objects.get(username='admin'); "
            "long = run_start(user=user, scenario=tiny, overrides=['duration_s=600'], speed=1); "
            "queued = [run_start(user=user, scenario=tiny, speed='max') for _ in range(2)]; "
            "print([long.pk] + [r.pk for r in queued])"))
        ids = json.loads(out.strip().splitlines()[-1])
        deadline = time.monotonic() + 30
        while _statuses(tmp_path, database_url, ids)[ids[0]][0] != "running":
            assert time.monotonic() < deadline, "the long run never started"
            time.sleep(0.5)
        time.sleep(1.5)  # the append-only file is synced every second
        # A crash: serve and everything it started die at once.
        everything = [psutil.Process(first.process.pid), *_descendants(first.process.pid)]
        for process in everything:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        first.process.wait(timeout=10)
    if not os.environ.get("REDIS_URL"):
        assert (tmp_path / "data" / "valkey" / "appendonlydir").is_dir()
    with serve(tmp_path, database_url, "--no-example") as second:
        _wait_health(second, want_ok=True)
        deadline = time.monotonic() + 60
        while True:
            statuses = _statuses(tmp_path, database_url, ids)
            if all(status in ("done", "failed") for status, _ in statuses.values()):
                break
            assert time.monotonic() < deadline, f"runs not ended 60 s after the restart: {statuses}"
            time.sleep(1)
    assert all(reason for status, reason in statuses.values() if status == "failed"), statuses
    assert statuses[ids[1]][0] == statuses[ids[2]][0] == "done", statuses


def test_the_supervisor_starts_a_background_child_at_a_lower_cpu_priority(tmp_path) -> None:
    from reviewer.ops.supervisor import Supervisor

    supervisor = Supervisor(env=dict(os.environ))
    probe = [sys.executable, "-c", "import os; print(os.nice(0))"]
    try:
        plain = supervisor.start("plain", probe, log_path=tmp_path / "plain.log")
        lowered = supervisor.start("lowered", probe, log_path=tmp_path / "lowered.log", nice=7)
        assert plain.process.wait(timeout=30) == 0 and lowered.process.wait(timeout=30) == 0
    finally:
        supervisor.stop_all(timeout_s=5)
    base = int((tmp_path / "plain.log").read_text())
    assert int((tmp_path / "lowered.log").read_text()) == min(base + 7, 19)
