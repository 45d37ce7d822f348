"""Time ``place`` on 3, 30, 300 and 1000 hosts (the seed's worker sizes, 50/50 split).

Prints the machine, then per fleet size: the in-process time of what the command
does (solve, JSON form and text rendering; best and median of several runs), the
number of candidate fleets scored, and the wall time of the whole command run as
``python -m emulator place`` (interpreter start-up included). Then harder
questions with three worker types (more maximal host layouts per host).

    /work/venv/bin/python benchmarks/bench_place.py [--runs 5]
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import statistics
import subprocess
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from emulator.analysis.placement import solve  # noqa: E402
from emulator.cli import place as cli_place  # noqa: E402

SIZES = (3, 30, 300, 1000)
ARGS = ["--units", "10", "--worker", "small=2", "--worker", "big=5", "--split", "small=0.5,big=0.5",
        "--qps-per-worker", "small=13.33,big=13.33"]


def machine() -> str:
    """One line naming the CPU, cores, OS and Python."""
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{cpu}; {os.cpu_count()} cores; {platform.system()} {platform.release()}; "
            f"Python {platform.python_version()}")


def in_process(hosts: int) -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    cli_place.register(sub)
    args = parser.parse_args(["place", "--hosts", str(hosts), *ARGS])
    with redirect_stdout(io.StringIO()):
        status = args.func(args)
    if status != 0:
        raise SystemExit(f"place failed with status {status}")


def whole_command(hosts: int) -> float | None:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "emulator", "place", "--hosts", str(hosts), *ARGS],
                          cwd=ROOT, capture_output=True, text=True)
    took = time.perf_counter() - start
    return took if done.returncode == 0 else None


def main() -> None:
    """Run the timings and print them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    print(f"machine: {machine()}")
    print("place --units 10 --worker small=2 --worker big=5 --split small=0.5,big=0.5 "
          "--qps-per-worker small=13.33,big=13.33 --hosts N")
    print(f"{'hosts':>6} {'best s':>9} {'median s':>9} {'candidates':>11} {'scored':>8} {'command s':>10}  top fleet")
    for hosts in SIZES:
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            in_process(hosts)
            times.append(time.perf_counter() - start)
        result = solve(hosts, 10, {"small": 2, "big": 5}, {"small": 0.5, "big": 0.5})
        command = whole_command(hosts)
        command_text = f"{command:10.3f}" if command is not None else f"{'n/a':>10}"
        print(f"{hosts:>6} {min(times):9.4f} {statistics.median(times):9.4f} {result.candidates:>11,} "
              f"{result.scored:>8,} {command_text}  {result.ranked[0].label(result.problem.names)}")
    more_layouts()


def more_layouts() -> None:
    """Harder questions: three worker types give 6 to 10 maximal layouts per host."""
    from emulator.analysis.placement import PlacementError

    print()
    print("three worker types on 10-unit hosts, default split and throughput, one run each")
    print(f"{'workers':<22} {'layouts':>7} {'hosts':>6} {'time s':>8} {'candidates':>22} {'scored':>10}")
    for workers in ({"small": 2, "mid": 3, "big": 5}, {"small": 2, "mid": 4, "big": 5}, {"a": 1, "b": 2, "c": 5}):
        label = ",".join(f"{n}={u}" for n, u in workers.items())
        for hosts in (30, 300, 1000):
            start = time.perf_counter()
            try:
                result = solve(hosts, 10, workers)
            except PlacementError as exc:
                print(f"{label:<22} {'':>7} {hosts:>6} {time.perf_counter() - start:8.3f}  refused: {exc}")
                continue
            layouts = sum(1 for lay in result.layouts if lay.maximal)
            print(f"{label:<22} {layouts:>7} {hosts:>6} {time.perf_counter() - start:8.3f} "
                  f"{result.candidates:>22,} {result.scored:>10,}")


if __name__ == "__main__":
    main()
