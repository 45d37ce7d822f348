"""Benchmark: the web process's memory while the largest fleet a user may save loads.

    python benchmarks/bench_large_fleet.py [--units 128] [--hosts 2]

Saves the example fleet (two worker types of 2 and 5 units) with every host at
``--units`` units (the scenario bound, ``emulator.scenario.limits.MAX_HOST_UNITS``,
by default), attaches it to a session, then loads the session page, its
numbers.json and its placement.json through Django's test client in this process,
as the web process would answer them. Prints each answer's time and size, the peak
resident memory of the process before and after, and the machine. Also shows that a
host of 800 units, the size that once took the web process to 2 GB, is now refused
when saved. Timing and memory decide nothing here; they are reported.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=None, help="units per host (default: the bound)")
    parser.add_argument("--hosts", type=int, default=None, help="hosts per group (default: the preset's)")
    args = parser.parse_args()

    os.environ["DATA_DIR"] = tempfile.mkdtemp(prefix="bench-large-fleet-")
    os.environ.pop("DATABASE_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewer.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.exceptions import ValidationError
    from django.core.management import call_command
    from django.test import Client

    from emulator.scenario.limits import MAX_HOST_UNITS

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.ALLOWED_HOSTS = ["*"]
    call_command("migrate", verbosity=0)
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
    for name, url in [("page", f"/sessions/{session.pk}/"), ("numbers.json", f"/sessions/{session.pk}/numbers.json"),
                      ("placement.json", f"/sessions/{session.pk}/placement.json")]:
        started = time.perf_counter()
        response = client.get(url)
        elapsed = time.perf_counter() - started
        print(f"{name:15s} {response.status_code}  {elapsed * 1000:7.0f} ms  {len(response.content) / 1024:8.0f} KB  "
              f"peak RSS {_peak_rss_mb():.0f} MB")
    print(f"machine: {platform.machine()} {platform.system()} {platform.release()}, "
          f"python {platform.python_version()}, {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
