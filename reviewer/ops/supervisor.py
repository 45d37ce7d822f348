"""Starting, watching, restarting and stopping the child processes of ``manage.py serve``.

One machine runs the embedded Redis-compatible server, N Celery workers and
Daphne. Each child runs in its own process group so that stopping it also stops
whatever it forked (Celery's pool processes); on Linux each child is also told
to exit if serve itself dies, so no process outlives the app.

A child started with ``restart=True`` that dies is started again by
:meth:`Supervisor.restart_dead`, after a back-off that doubles with each death
in quick succession (1 s, 2 s, 4 s ... up to ``RESTART_BACKOFF_MAX_S``) and
starts again at 1 s once the child has stayed up ``RESTART_STABLE_S``. What
happened is written to the log and to a small JSON file (``state_path``) that
``/healthz`` reads: each child's state, restart count and last restart.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

_PR_SET_PDEATHSIG = 1

log = logging.getLogger(__name__)

#: The first wait before a dead child is started again; doubled for each death in quick succession.
RESTART_BACKOFF_S = 1.0
#: The longest wait between restarts of a child that keeps dying.
RESTART_BACKOFF_MAX_S = 30.0
#: A child that stayed up this long is healthy again: its next death waits the first back-off.
RESTART_STABLE_S = 60.0
#: The state file is rewritten at least this often, so a reader can tell a live supervisor.
STATE_EVERY_S = 5.0


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    os.setsid()
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        except OSError:
            pass


@dataclass
class Child:
    """One started child process and the name serve reports it by.

    The fields after ``process`` are what a restart needs (how it was started)
    and what ``/healthz`` shows (how often it was restarted, and when).
    """

    name: str
    process: subprocess.Popen[bytes]
    argv: list[str] = field(default_factory=list)
    log_path: Path | None = None
    nice: int = 0
    restart: bool = False
    started_at: float = field(default_factory=time.time)
    restarts: int = 0
    last_restart_at: float | None = None
    last_exit: int | None = None
    quick_deaths: int = 0
    #: When a dead child is due to start again (monotonic clock); None while it runs.
    due_at: float | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def state(self) -> dict[str, object]:
        """What ``/healthz`` shows of this child."""
        return {
            "status": "running" if self.process.poll() is None else "restarting",
            "restarts": self.restarts,
            "last_restart": _iso(self.last_restart_at),
            "last_exit": self.last_exit,
        }


def _iso(at: float | None) -> str | None:
    if at is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


@dataclass
class Supervisor:
    """Starts children, notices when one dies, and stops all of them."""

    env: dict[str, str]
    children: list[Child] = field(default_factory=list)
    #: Where the children's state is written for ``/healthz`` (None: nowhere).
    state_path: Path | None = None
    backoff_s: float = RESTART_BACKOFF_S
    backoff_max_s: float = RESTART_BACKOFF_MAX_S
    stable_s: float = RESTART_STABLE_S
    _state_written_at: float = 0.0

    def start(self, name: str, argv: Sequence[str], *, log_path: Path | None = None, nice: int = 0,
              restart: bool = False) -> Child:
        """Start ``argv`` as a named child in its own process group; ``nice`` lowers its CPU
        priority (background work that must not slow the answers to requests); with
        ``restart`` the child is started again when it dies (see :meth:`restart_dead`)."""
        child = Child(name=name, process=self._spawn(argv, log_path, nice), argv=list(argv),
                      log_path=log_path, nice=nice, restart=restart)
        self.children.append(child)
        self.write_state()
        return child

    def _spawn(self, argv: Sequence[str], log_path: Path | None, nice: int) -> subprocess.Popen[bytes]:
        stdout = open(log_path, "ab") if log_path else None  # noqa: SIM115  (kept open for the child)

        def prepare() -> None:
            _die_with_parent()
            if nice:
                os.nice(nice)

        process = subprocess.Popen(
            list(argv),
            env=self.env,
            stdout=stdout,
            stderr=subprocess.STDOUT if stdout else None,
            preexec_fn=prepare,
        )
        if stdout is not None:
            stdout.close()  # the child holds its own copy
        return process

    def first_dead(self, *, restartable: bool = True) -> Child | None:
        """The first child that has exited, if any (without ``restartable``: only those
        that are not restarted by themselves)."""
        for child in self.children:
            if child.process.poll() is not None and (restartable or not child.restart):
                return child
        return None

    def restart_dead(self, now: float | None = None) -> list[Child]:
        """Start again each restartable child that died and whose back-off is over; those started.

        A death is logged (with the exit status and the wait) when first seen;
        whatever the dead child's process group left behind (Celery's pool
        processes) is killed before the new one starts.
        """
        now = time.monotonic() if now is None else now
        started = []
        changed = False
        for child in self.children:
            if not child.restart or child.process.poll() is None:
                continue
            if child.due_at is None:
                lived_s = time.time() - child.started_at
                child.quick_deaths = 0 if lived_s >= self.stable_s else child.quick_deaths + 1
                wait_s = min(self.backoff_max_s, self.backoff_s * 2 ** max(0, child.quick_deaths - 1))
                child.due_at = now + wait_s
                child.last_exit = child.process.returncode
                log.warning("serve: %s (pid %d) exited with status %s after %.0f s; starting it again in %g s",
                            child.name, child.pid, child.last_exit, lived_s, wait_s)
                _signal_group(child.pid, signal.SIGKILL)
                changed = True
            if now < child.due_at:
                continue
            child.process = self._spawn(child.argv, child.log_path, child.nice)
            child.restarts += 1
            child.started_at = child.last_restart_at = time.time()
            child.due_at = None
            log.warning("serve: %s started again (pid %d, restart %d)", child.name, child.pid, child.restarts)
            started.append(child)
            changed = True
        if changed or time.monotonic() - self._state_written_at >= STATE_EVERY_S:
            self.write_state()
        return started

    def state(self) -> dict[str, object]:
        """The supervisor's pid, when this was written, and each child's state by name."""
        return {"supervisor_pid": os.getpid(), "updated_at": time.time(),
                "processes": {child.name: child.state() for child in self.children}}

    def write_state(self) -> None:
        """Write :meth:`state` to ``state_path`` (atomically: readers never see half a file)."""
        self._state_written_at = time.monotonic()
        if self.state_path is None:
            return
        part = self.state_path.with_name(self.state_path.name + ".part")
        try:
            part.write_text(json.dumps(self.state()))
            part.replace(self.state_path)
        except OSError:
            log.warning("could not write the process state to %s", self.state_path, exc_info=True)

    def forget_state(self) -> None:
        """Remove the state file (the app stopped: nothing is supervised any more)."""
        if self.state_path is not None:
            self.state_path.unlink(missing_ok=True)

    def stop_all(self, timeout_s: float = 10.0) -> None:
        """SIGTERM every child's process group, then SIGKILL what is left after ``timeout_s``."""
        for child in reversed(self.children):
            _signal_group(child.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for child in reversed(self.children):
            remaining = max(0.0, deadline - time.monotonic())
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.process.wait(timeout=remaining)
        # A group can outlive its leader (pool processes): kill whatever remains.
        for child in self.children:
            _signal_group(child.pid, signal.SIGKILL)
            if child.process.poll() is None:
                child.process.wait(timeout=5)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def wait_for_port(host: str, port: int, *, timeout_s: float, child: Child | None = None) -> bool:
    """True once ``host:port`` accepts connections; False on timeout or when ``child`` exits."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if child is not None and child.process.poll() is not None:
            return False
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False


#: Seconds Daphne waits for the app to accept a websocket handshake. Its default, 5 s,
#: drops handshakes on a busy machine (many viewers joining a run while workers
#: emulate), and each dropped viewer reconnects, which adds to the load; a browser
#: or proxy waits longer than that anyway.
WEBSOCKET_CONNECT_TIMEOUT_S = 30


def daphne_command(host: str, port: int) -> list[str]:
    """The command that serves the app with Daphne on ``host:port``."""
    return [sys.executable, "-m", "daphne", "-b", host, "-p", str(port),
            "--websocket_connect_timeout", str(WEBSOCKET_CONNECT_TIMEOUT_S), "reviewer.asgi:application"]
