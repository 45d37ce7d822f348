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

from reviewer.ops.supervisor import WEBSOCKET_CONNECT_TIMEOUT_S, daphne_command, free_port

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
        assert {k: v for k, v in report.items() if k != "restarts"} == {
            "database": "ok", "redis": "ok", "celery": "ok", "processes": "ok"}
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


def _child(served: Served, name: str) -> psutil.Process:
    """The direct child of serve that plays ``name`` (as ``/healthz`` names it)."""
    for process in psutil.Process(served.process.pid).children():
        argv = process.cmdline()
        line = " ".join(argv)
        if name == "daphne" and "daphne" in line:
            return process
        if name == "valkey-server" and "valkey-server" in line:
            return process
        if name == "celery beat" and " beat " in line:
            return process
        if name == "celery worker 1" and " worker " in line and "-Q" not in argv:
            return process
        if name == "celery docs worker" and " worker " in line and "-Q" in argv:
            return process
    pytest.fail(f"serve has no child named {name}")


def _wait_restarted(served: Served, name: str, restarts: int, timeout_s: float = 120) -> dict[str, object]:
    """Wait until /healthz is 200 again and shows ``name`` running after ``restarts`` restarts."""
    deadline = time.monotonic() + timeout_s
    last: tuple[int, dict[str, object]] = (0, {})
    while time.monotonic() < deadline:
        if served.process.poll() is not None:
            pytest.fail(f"serve exited with {served.process.returncode}:\n{served.output()}")
        try:
            last = _get_health(served.base_url)  # type: ignore[assignment]
        except (urllib.error.URLError, ConnectionError, json.JSONDecodeError):
            time.sleep(0.5)
            continue
        child = last[1].get("restarts", {}).get(name, {})  # type: ignore[union-attr]
        if last[0] == 200 and child.get("restarts") == restarts and child.get("status") == "running":
            return last[1]
        time.sleep(0.5)
    pytest.fail(f"{name} was not back within {timeout_s} s; last /healthz {last}\n{served.output()}")


def test_it_starts_each_killed_child_again_and_healthz_counts_the_restarts(tmp_path: Path, database_url: str | None) -> None:
    with serve(tmp_path, database_url, "--no-example") as served:
        _, report = _wait_health(served, want_ok=True)
        assert report["processes"] == "ok"
        assert {child["restarts"] for child in report["restarts"].values()} == {0}  # type: ignore[attr-defined]
        names = ["celery worker 1", "celery beat", "daphne"]
        if not os.environ.get("REDIS_URL"):
            names.append("valkey-server")
        for name in names:
            victim = _child(served, name)
            victim.kill()
            report = _wait_restarted(served, name, restarts=1)
            assert _child(served, name).pid != victim.pid
            assert report["restarts"][name]["last_restart"]  # type: ignore[index]
            assert served.process.poll() is None
        # Each restart is logged with the exit status (SIGKILL: -9) and the back-off.
        output = served.output()
        for name in names:
            assert f"serve: {name} (pid" in output
            assert f"serve: {name} started again" in output
        assert "exited with status -9" in output
        # The others were never restarted.
        others = {n: c for n, c in report["restarts"].items() if n not in names}  # type: ignore[attr-defined]
        assert others and all(c["restarts"] == 0 for c in others.values())


def test_a_run_keeps_playing_while_daphne_is_killed_and_started_again(tmp_path: Path, database_url: str | None) -> None:
    from support import TINY_SCENARIO

    with serve(tmp_path, database_url, "--no-example") as served:
        _wait_health(served, want_ok=True)
        out = _shell(tmp_path, database_url, (
            "from django.contrib.auth import get_user_model; from reviewer.runs.services import run_start; "
            f"tiny = {TINY_SCENARIO!r}; user = get_user_model().objects.get(username='admin'); "
            "run = run_start(user=user, scenario=tiny, overrides=['duration_s=20'], speed=1); print(run.pk)"))
        run_id = int(out.strip().splitlines()[-1])
        deadline = time.monotonic() + 60
        while _statuses(tmp_path, database_url, [run_id])[run_id][0] != "running":
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.5)
        _child(served, "daphne").kill()
        _wait_restarted(served, "daphne", restarts=1)
        assert _statuses(tmp_path, database_url, [run_id])[run_id][0] in ("running", "done")
        deadline = time.monotonic() + 90
        while (status := _statuses(tmp_path, database_url, [run_id])[run_id])[0] not in ("done", "failed"):
            assert time.monotonic() < deadline, f"the run did not end: {status}"
            time.sleep(1)
        assert status[0] == "done", status
        # Every frame was stored, none lost while Daphne was down.
        out = _shell(tmp_path, database_url, (
            "import json; from reviewer.models import EmulatorRun, RunFrame; "
            f"run = EmulatorRun.objects.get(pk={run_id}); "
            f"print(json.dumps([run.frames_stored, list(RunFrame.objects.filter(run_id={run_id})"
            ".order_by('i').values_list('i', flat=True))]))"))
        stored, indices = json.loads(out.strip().splitlines()[-1])
        assert stored >= 40 and indices == list(range(stored))  # 20 s at sample_s 0.5


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


def test_the_supervisor_starts_a_dead_child_again_after_a_growing_back_off(tmp_path) -> None:
    from reviewer.ops.supervisor import Supervisor

    state_path = tmp_path / "processes.json"
    supervisor = Supervisor(env=dict(os.environ), state_path=state_path, backoff_s=0.2, backoff_max_s=0.8)
    crash = [sys.executable, "-c", "import sys; sys.exit(3)"]
    try:
        child = supervisor.start("crasher", crash, log_path=tmp_path / "crasher.log", restart=True)
        steady = supervisor.start("steady", [sys.executable, "-c", "import time; time.sleep(60)"])
        first_pid = child.pid
        child.process.wait(timeout=30)
        now = time.monotonic()
        assert supervisor.restart_dead(now) == []  # the death is seen; the restart waits its back-off
        assert json.loads(state_path.read_text())["processes"]["crasher"]["status"] == "restarting"
        assert child.due_at == pytest.approx(now + 0.2)
        assert supervisor.restart_dead(now + 0.1) == []
        assert supervisor.restart_dead(now + 0.2) == [child]
        assert child.pid != first_pid and child.restarts == 1
        # It dies again at once: the wait doubles, up to the longest back-off.
        waits = []
        for _ in range(3):
            child.process.wait(timeout=30)
            now = time.monotonic()
            supervisor.restart_dead(now)
            assert child.due_at is not None
            waits.append(round(child.due_at - now, 3))
            supervisor.restart_dead(child.due_at)
        assert waits == [0.4, 0.8, 0.8]
        state = json.loads(state_path.read_text())
        assert state["processes"]["crasher"]["restarts"] == 4
        assert state["processes"]["crasher"]["last_exit"] == 3
        assert state["processes"]["crasher"]["last_restart"]
        # A child started without restart is left alone.
        assert state["processes"]["steady"] == {"status": "running", "restarts": 0,
                                                "last_restart": None, "last_exit": None}
        assert steady.process.poll() is None
    finally:
        supervisor.stop_all(timeout_s=5)
        supervisor.forget_state()
    assert not state_path.exists()


def test_daphne_waits_longer_than_its_default_for_a_websocket_handshake() -> None:
    from daphne.cli import CommandLineInterface

    command = daphne_command("127.0.0.1", 8123)
    assert command[1:3] == ["-m", "daphne"]
    args = CommandLineInterface().parser.parse_args(command[3:])
    default = CommandLineInterface().parser.parse_args(["reviewer.asgi:application"])
    assert (args.host, args.port, args.application) == ("127.0.0.1", 8123, "reviewer.asgi:application")
    assert args.websocket_connect_timeout == WEBSOCKET_CONNECT_TIMEOUT_S > default.websocket_connect_timeout
