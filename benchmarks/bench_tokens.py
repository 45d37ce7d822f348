"""Benchmark: the continuous-batching engine against the step-by-step reference model.

    python benchmarks/bench_tokens.py [--duration 3600] [--qps 100] [--workers 24]

One hour of Poisson traffic at 100 QPS over 24 workers, prompts of 1000 tokens and
outputs of 200, the default worker of the token-level scenarios. Both models get the
same requests: the engine replays them as a trace. Each runs in its own child process,
so peak memory (ru_maxrss) belongs to that run alone. Prints both wall times, their
ratio (target: at least 20x), requests per wall second, peak memory, whether TTFT,
TPOT and latency percentiles agree (within 2 %), and the machine. Timing decides
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
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "emulator"))

TOLERANCE = 0.02


def _peak_rss_mb() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def _requests(args: argparse.Namespace) -> list[Any]:
    from token_scenarios import poisson_requests

    return poisson_requests(
        qps=args.qps, duration_s=args.duration, prompt=args.prompt, output=args.output, seed=1
    )


def measure_engine(args: argparse.Namespace, trace: Path) -> dict[str, Any]:
    """The engine replaying the requests; its figures."""
    from token_scenarios import scenario

    from emulator import Engine

    sc = scenario(workers=args.workers, duration_s=args.duration, trace=trace)
    wall, cpu = time.perf_counter(), time.process_time()
    summary = Engine(sc).run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "offered": summary.offered,
        "ok": summary.ok,
        "ttft": summary.ttft_s,
        "tpot": summary.tpot_s,
        "latency": summary.latency_s,
        "events": summary.events,
        "peak_rss_mb": _peak_rss_mb(),
    }


def measure_reference(args: argparse.Namespace) -> dict[str, Any]:
    """The step-by-step reference on the same requests; its figures."""
    from token_reference import simulate
    from token_scenarios import WORKER, reference_percentiles

    requests = _requests(args)
    wall, cpu = time.perf_counter(), time.process_time()
    result = simulate(requests, workers=args.workers, params=WORKER, duration_s=args.duration)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "offered": len(result.records),
        "ok": result.count("ok"),
        "ttft": reference_percentiles(result, "ttft_s"),
        "tpot": reference_percentiles(result, "tpot_s"),
        "latency": reference_percentiles(result, "latency_s"),
        "steps": result.steps,
        "peak_rss_mb": _peak_rss_mb(),
    }


def _child(which: str, args: argparse.Namespace, trace: Path) -> dict[str, Any]:
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--only",
            which,
            "--trace",
            str(trace),
            "--duration",
            str(args.duration),
            "--qps",
            str(args.qps),
            "--workers",
            str(args.workers),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def main() -> None:
    """Run both measurements in child processes and print the comparison."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--duration", type=float, default=3600.0, help="simulated seconds")
    parser.add_argument("--qps", type=float, default=100.0)
    parser.add_argument("--workers", type=int, default=24)
    parser.add_argument("--prompt", type=int, default=1000)
    parser.add_argument("--output", type=int, default=200)
    parser.add_argument("--only", choices=("engine", "reference"), help=argparse.SUPPRESS)
    parser.add_argument("--trace", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only == "engine":
        print(json.dumps(measure_engine(args, args.trace)))
        return
    if args.only == "reference":
        print(json.dumps(measure_reference(args)))
        return

    print(
        f"machine: {platform.platform()}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(
        f"workload: {args.qps:g} QPS for {args.duration:g} s over {args.workers} workers, "
        f"prompt {args.prompt}, output {args.output}"
    )
    from token_scenarios import write_trace

    with tempfile.TemporaryDirectory() as tmp:
        trace = write_trace(_requests(args), Path(tmp) / "requests.jsonl")
        engine = _child("engine", args, trace)
        reference = _child("reference", args, trace)

    def line(name: str, r: dict[str, Any]) -> str:
        return (
            f"{name:<10} wall {r['wall_s']:8.2f} s  cpu {r['cpu_s']:8.2f} s  "
            f"{r['offered']:>9,} requests  {r['offered'] / r['wall_s']:>10,.0f} req/wall-s  "
            f"peak RSS {r['peak_rss_mb']:7.1f} MB"
        )

    print(line("engine", engine) + f"  ({engine['events']:,} events)")
    print(line("reference", reference) + f"  ({reference['steps']:,} steps)")
    print(
        f"speed-up: {reference['wall_s'] / engine['wall_s']:.1f}x wall, "
        f"{reference['cpu_s'] / engine['cpu_s']:.1f}x cpu (target: at least 20x)"
    )
    print(f"requests completed: engine {engine['ok']:,}, reference {reference['ok']:,}")
    agree = engine["ok"] == reference["ok"]
    for key in ("ttft", "tpot", "latency"):
        for q in ("p50", "p95", "p99"):
            a, b = engine[key][q], reference[key][q]
            rel = abs(a / b - 1)
            agree &= rel <= TOLERANCE
            print(f"  {key:<8}{q}  engine {a:10.5f} s  reference {b:10.5f} s  diff {rel:6.2%}")
    print(f"results agree within {TOLERANCE:.0%}: {'yes' if agree else 'NO'}")


if __name__ == "__main__":
    main()
