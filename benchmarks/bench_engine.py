"""Benchmark: the engine against the straightforward SimPy model on the ``peak-sized`` preset.

    python benchmarks/bench_engine.py [--duration 600] [--repeat 3] [--baseline REV]

Each measurement runs in its own child process, so peak memory (ru_maxrss) belongs to
that run alone. The engine also runs at a quarter of the duration: its peak memory
should not grow with the number of requests served. Prints wall and CPU times, their
ratio, simulated requests per wall second, peak memory, whether the two models'
statistics agree (served_qps, p50, p99 within 3 %), and the machine. With
``--baseline REV`` the engine of that git revision (extracted to a temporary folder)
runs the same scenario too, alternating with this one, so a change's cost is measured
in one run. Each engine measurement is the best of ``--repeat`` runs. Timing decides
nothing here; it is reported.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: Where the child imports ``emulator`` from: this checkout, or a baseline's extract.
sys.path.insert(0, os.environ.get("BENCH_EMULATOR_ROOT", str(ROOT)))
sys.path.insert(0, str(ROOT / "tests" / "emulator"))

TOLERANCE = 0.03


def _scenario(duration_s: float) -> Any:
    try:
        from emulator.scenario.presets import load_preset
    except ImportError:  # a baseline from before the scenario package
        from emulator.presets import load_preset  # type: ignore[no-redef]

    scenario = load_preset("peak-sized", max_requests=None)
    return scenario.with_overrides([f"duration_s={duration_s}"], max_requests=None)


def _peak_rss_mb() -> float:
    # ru_maxrss is in kilobytes on Linux, bytes on macOS.
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def measure_engine(duration_s: float) -> dict[str, Any]:
    """Run the engine on the scenario; return its figures."""
    from emulator import Engine

    scenario = _scenario(duration_s)
    wall, cpu = time.perf_counter(), time.process_time()
    summary = Engine(scenario).run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "offered": summary.offered,
        "served_qps": summary.served_qps,
        "p50_s": summary.latency_s["p50"],
        "p99_s": summary.latency_s["p99"],
        "balanced": summary.balanced(),
        "events": summary.events,
        "peak_rss_mb": _peak_rss_mb(),
    }


def measure_simpy(duration_s: float) -> dict[str, Any]:
    """Run the SimPy reference on the same system; return its figures."""
    from simpy_reference import ModelLoad, simulate

    s = _scenario(duration_s)
    models = [
        ModelLoad(
            qps=s.traffic.qps * m.share,
            workers=s.worker_count(name),
            batch_n=s.dispatcher.max_batch_tokens // m.tokens,
        )
        for name, m in s.models.items()
    ]
    wall, cpu = time.perf_counter(), time.process_time()
    ref = simulate(
        models,
        duration_s=duration_s,
        batch_s=s.worker.batch_s,
        close_after_s=s.dispatcher.close_after_s,
        seed=s.seed,
    )
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "offered": ref.offered,
        "served_qps": ref.served_qps,
        "p50_s": ref.p50_s,
        "p99_s": ref.p99_s,
        "peak_rss_mb": _peak_rss_mb(),
    }


def _child(which: str, duration_s: float, root: Path | None = None) -> dict[str, Any]:
    env = dict(os.environ)
    if root is not None:
        env["BENCH_EMULATOR_ROOT"] = str(root)
    out = subprocess.run(
        [sys.executable, __file__, "--only", which, "--duration", str(duration_s)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return json.loads(out.stdout)


def _extract(rev: str, into: Path) -> Path:
    """The ``emulator`` package of git revision ``rev``, extracted under ``into``."""
    archive = into / "baseline.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "-C", str(ROOT), "archive", rev, "emulator"], stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return min(runs, key=lambda r: r["wall_s"])


def main() -> None:
    """Run both measurements in child processes and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--duration",
        type=float,
        default=600.0,
        help="simulated seconds (default 600: about 6 million requests)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="engine runs to take the best of")
    parser.add_argument("--baseline", metavar="REV", help="also time the engine of this git revision")
    parser.add_argument("--only", choices=("engine", "simpy"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only == "engine":
        print(json.dumps(measure_engine(args.duration)))
        return
    if args.only == "simpy":
        print(json.dumps(measure_simpy(args.duration)))
        return

    print(
        f"machine: {platform.platform()}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(f"scenario: peak-sized preset for {args.duration:g} simulated seconds")
    quarter = _child("engine", args.duration / 4)
    with tempfile.TemporaryDirectory() as tmp:
        base_root = _extract(args.baseline, Path(tmp)) if args.baseline else None
        runs: list[dict[str, Any]] = []
        base_runs: list[dict[str, Any]] = []
        for _ in range(max(1, args.repeat)):  # alternated, so load on the machine hits both
            runs.append(_child("engine", args.duration))
            if base_root is not None:
                base_runs.append(_child("engine", args.duration, base_root))
    engine = _best(runs)
    simpy = _child("simpy", args.duration)

    def line(name: str, r: dict[str, Any]) -> str:
        return (
            f"{name:<8} wall {r['wall_s']:8.2f} s  cpu {r['cpu_s']:8.2f} s  "
            f"{r['offered']:>10,} requests  {r['offered'] / r['wall_s']:>11,.0f} req/wall-s  "
            f"peak RSS {r['peak_rss_mb']:7.1f} MB"
        )

    print(line("engine", engine))
    if base_runs:
        base = _best(base_runs)
        print(line("baseline", base) + f"  ({args.baseline})")
        same = all(base[k] == engine[k] for k in ("offered", "served_qps", "p50_s", "p99_s"))
        print(
            f"this engine vs {args.baseline}: {engine['wall_s'] / base['wall_s'] - 1:+.1%} wall "
            f"(best of {len(runs)} each; target: no more than +10%); "
            f"identical results: {'yes' if same else 'NO'}"
        )
    print(line("simpy", simpy))
    print(
        f"speed-up: {simpy['wall_s'] / engine['wall_s']:.1f}x wall, "
        f"{simpy['cpu_s'] / engine['cpu_s']:.1f}x cpu (target: at least 12x)"
    )
    print(
        f"engine memory: peak RSS {quarter['peak_rss_mb']:.1f} MB at "
        f"{quarter['offered']:,} requests, {engine['peak_rss_mb']:.1f} MB at "
        f"{engine['offered']:,} requests"
    )
    print(
        f"engine books balance: {'yes' if engine['balanced'] else 'NO'}; "
        f"events: {engine['events']:,}"
    )
    agree = True
    for key in ("served_qps", "p50_s", "p99_s"):
        a, b = engine[key], simpy[key]
        rel = abs(a / b - 1)
        agree &= rel <= TOLERANCE
        print(f"  {key:<10} engine {a:12.4f}  simpy {b:12.4f}  diff {rel:6.2%}")
    print(f"statistics agree within {TOLERANCE:.0%}: {'yes' if agree else 'NO'}")


if __name__ == "__main__":
    main()
