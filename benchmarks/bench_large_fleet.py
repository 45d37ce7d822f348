"""Benchmark: the web process's memory while the largest fleet a user may save loads.

    python benchmarks/bench_large_fleet.py [--units 128] [--hosts 2] [--ask-hosts 4]

Saves the example fleet (two worker types of 2 and 5 units) with every host at
``--units`` units (the scenario bound, ``emulator.scenario.limits.MAX_HOST_UNITS``,
by default) and ``--hosts`` hosts in each of its two host groups, attaches it to a
session, then loads the session page, its numbers.json, its placement.json and
placement.json?hosts=``--ask-hosts`` through Django's test client in this process, as
the web process would answer them: the figures are worked out by a docs worker, so
the JSON answers are 202 and what the web process would send to the docs queue is
noted. Then a separate process does what the docs worker does with those asks
(``reviewer.tasks.fleet_analysis`` and ``reviewer.tasks.placement_answer``), and the
same answers are asked again. Prints each answer's status, time and size, the peak
resident memory of the web process and of the worker, and the machine. Also shows
that a host of 800 units, the size that once took the web process to 2 GB, is now
refused when saved. Timing and memory decide nothing here; they are reported.

A fleet the exact solver cannot rank (too many near-best fleets, e.g. ``--hosts 40``,
80 hosts) is answered 400 with the solver's reason, as the CLI's ``place`` does.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _peak_rss_mb() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def _toml(units: int, hosts: int | None) -> str:
    import tomli_w

    data = tomllib.loads((ROOT / "emulator/scenario/presets/doc-as-written.toml").read_text())
    for group in data["hosts"]:
        group["units"] = units
        if hosts is not None:
            group["count"] = hosts
    return tomli_w.dumps(data)


def _worker(asks: list[str]) -> None:
    """What the docs worker does with the asks (``TASK:ARG,ARG``), in this process."""
    from reviewer import tasks

    for ask in asks:
        name, _, raw = ask.partition(":")
        task_args = [int(a) for a in raw.split(",")]
        started = time.perf_counter()
        done = getattr(tasks, name).apply(args=task_args).get()
        elapsed = time.perf_counter() - started
        print(f"worker {name}{tuple(task_args)}: {'stored' if done else 'refused'} in {elapsed:6.1f} s  "
              f"worker peak RSS {_peak_rss_mb():.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=None, help="units per host (default: the bound)")
    parser.add_argument("--hosts", type=int, default=None, help="hosts per group (default: the preset's)")
    parser.add_argument("--ask-hosts", type=int, default=4, help="N of the placement.json?hosts=N asked")
    parser.add_argument("--worker", nargs="*", help=argparse.SUPPRESS)  # the docs worker's part
    args = parser.parse_args()

    if args.worker is None:
        os.environ["DATA_DIR"] = tempfile.mkdtemp(prefix="bench-large-fleet-")
        os.environ.pop("DATABASE_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewer.settings")
    import django

    django.setup()
    if args.worker is not None:
        _worker(args.worker)
        return
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.exceptions import ValidationError
    from django.core.management import call_command
    from django.test import Client

    from emulator.scenario.limits import MAX_HOST_UNITS

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.ALLOWED_HOSTS = ["*"]
    settings.ANALYSIS_IN_BACKGROUND = True
    call_command("migrate", verbosity=0)
    from reviewer.runs import services as run_services

    # This script stands for the broker: it notes what the web process sends the docs queue.
    asks: list[str] = []
    run_services.send_task_after_commit = lambda name, task_args, *_: asks.append(  # type: ignore[assignment]
        f"{name}:{','.join(str(a) for a in task_args)}")
    from reviewer.review import services

    units = args.units or MAX_HOST_UNITS
    owner = get_user_model().objects.create_user("owner", password="owner")
    doc = services.doc_create(owner=owner, title="Doc", body="Two hosts of ten units each.\n")
    try:
        services.fleet_config_create(owner=owner, name="too big", toml=_toml(800, None), doc=doc)
        print("a host of 800 units: SAVED (the bound did not hold)")
    except ValidationError as exc:
        print(f"a host of 800 units: refused ({' '.join(exc.messages)[:120]})")
    fleet = services.fleet_config_create(owner=owner, name="large", toml=_toml(units, args.hosts), doc=doc)
    session = services.session_create(owner=owner, doc=doc, reviewers=[], fleet_config=fleet)
    client = Client()
    client.force_login(owner)
    print(f"fleet: {units} units a host, {sum(g['count'] for g in fleet.scenario['hosts'])} hosts")
    print(f"peak RSS before the page: {_peak_rss_mb():.0f} MB")
    urls = [("page", f"/sessions/{session.pk}/"), ("numbers.json", f"/sessions/{session.pk}/numbers.json"),
            ("placement.json", f"/sessions/{session.pk}/placement.json"),
            (f"?hosts={args.ask_hosts}", f"/sessions/{session.pk}/placement.json?hosts={args.ask_hosts}")]

    def ask_all(when: str) -> None:
        for name, url in urls:
            started = time.perf_counter()
            response = client.get(url)
            elapsed = time.perf_counter() - started
            why = response.json().get("error", "")[:110] if response.status_code >= 400 else ""
            print(f"{when} {name:15s} {response.status_code}  {elapsed * 1000:7.0f} ms  "
                  f"{len(response.content) / 1024:8.0f} KB  web peak RSS {_peak_rss_mb():.0f} MB  {why}".rstrip())

    ask_all("web, first ask: ")
    print(f"sent to the docs queue: {', '.join(asks) or 'nothing'}")
    subprocess.run([sys.executable, __file__, "--worker", *asks], check=True, env=os.environ.copy())
    ask_all("web, after worker:")
    print(f"machine: {platform.machine()} {platform.system()} {platform.release()}, "
          f"python {platform.python_version()}, {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
