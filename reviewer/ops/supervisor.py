"""Starting, watching and stopping the child processes of ``manage.py serve``.

One machine runs the embedded Redis-compatible server, N Celery workers and
Daphne. Each child runs in its own process group so that stopping it also stops
whatever it forked (Celery's pool processes); on Linux each child is also told
to exit if serve itself dies, so no process outlives the app.
"""

from __future__ import annotations

import contextlib
import ctypes
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
    """One started child process and the name serve reports it by."""

    name: str
    process: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.process.pid


@dataclass
class Supervisor:
    """Starts children, notices when one dies, and stops all of them."""

    env: dict[str, str]
    children: list[Child] = field(default_factory=list)

    def start(self, name: str, argv: Sequence[str], *, log_path: Path | None = None, nice: int = 0) -> Child:
        """Start ``argv`` as a named child in its own process group; ``nice`` lowers its CPU
        priority (background work that must not slow the answers to requests)."""
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
        child = Child(name=name, process=process)
        self.children.append(child)
        return child

    def first_dead(self) -> Child | None:
        """The first child that has exited, if any."""
        for child in self.children:
            if child.process.poll() is not None:
                return child
        return None

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
