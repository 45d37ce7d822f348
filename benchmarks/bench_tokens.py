"""Benchmark: the continuous-batching engine against the step-by-step reference model.

    python benchmarks/bench_tokens.py [--duration 3600] [--qps 100] [--workers 24]
                                      [--build auto|python|compiled]

One hour of Poisson traffic at 100 QPS over 24 workers, prompts of 1000 tokens and
outputs of 200, the default worker of the token-level scenarios. Both models get the
same requests: the engine replays them as a trace. Each runs in its own child process,
so peak memory (ru_maxrss) belongs to that run alone. Prints wall and CPU times, their
ratios (target: at least 20x, on CPU time: the machine is shared), requests per wall
second, peak memory, whether TTFT, TPOT and latency percentiles agree (within 2 %),
and the machine. Then a composed fleet: a model split into prefill and decode pools,
one with shared prefixes and prefix caching, and one the autoscaler sizes, in one run,
with its requests per wall (and CPU) second.

The engine runs as pure Python and, if ``benchmarks/build_compiled.py`` has built it,
as the mypyc-compiled copy of its worker models and event core (``--build auto``, the
default: both when the build exists); each line says which build it ran. The compiled
build must give the very same results. Timing decides nothing here; it is reported.
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
COMPILED = ROOT / "build" / "compiled"

TOLERANCE = 0.02


def _peak_rss_mb() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def _requests(args: argparse.Namespace) -> list[Any]:
    from token_scenarios import poisson_requests

    return poisson_requests(
        qps=args.qps, duration_s=args.duration, prompt=args.prompt, output=args.output, seed=1
    )


def _use_build(build: str) -> str:
    """Put the compiled copy first on the path if asked; the build actually imported."""
    if build == "compiled":
        sys.path.insert(0, str(COMPILED))
    import emulator.sim.workers.continuous as continuous

    ran = "compiled" if not continuous.__file__.endswith(".py") else "python"
    if ran != build:
        raise SystemExit(f"asked for the {build} build, imported {continuous.__file__}")
    return ran


def _has_compiled() -> bool:
    return any((COMPILED / "emulator" / "sim" / "workers").glob("continuous*.so"))


def composed_data(duration_s: float) -> dict[str, Any]:
    """The composed fleet: ``pd`` split into prefill and decode pools, ``chat`` with 400
    shared preambles and prefix caching, ``auto`` sized by the autoscaler (1 to 6
    workers on running sequences); 60 QPS in all for ``duration_s``."""
    sizes = {"worker_units": 1, "tokens_cv": 1.0, "output_tokens_cv": 1.0}
    return {
        "name": "composed", "duration_s": duration_s, "seed": 1, "sample_s": 1.0,
        "traffic": {"qps": 60, "shape": "constant"},
        "models": {
            "pd": {
                "share": 0.4, **sizes, "tokens": 2000, "output_tokens": 200,
                "disaggregated": {
                    "prefill_workers": "prefill", "decode_workers": "decode",
                    "kv_transfer_gb_s": 50, "kv_bytes_per_token": 327680,
                    "decider_threshold_tokens": 256,
                },
            },
            "chat": {
                "share": 0.4, **sizes, "tokens": 3000, "tokens_cv": 0.3, "output_tokens": 150,
                "prefixes": {"groups": 400, "prefix_tokens": 2400, "zipf_s": 0.9},
                "worker": {"prefix_cache": True, "block_tokens": 16},
            },
            "auto": {"share": 0.2, **sizes, "tokens": 800, "output_tokens": 200},
        },
        "dispatcher": {"policy": "least_loaded"},
        "worker": {
            "batching": "continuous", "max_num_seqs": 256, "max_batched_tokens": 8192,
            "kv_cache_tokens": 200000, "step_base_s": 0.006, "prefill_token_s": 2.5e-5,
            "decode_seq_s": 1.2e-4, "kv_token_s": 2e-8,
        },
        "client": {"timeout_s": 60},
        "autoscaler": {
            "model": "auto", "metric": "running", "target": 12, "min_workers": 1,
            "max_workers": 6, "interval_s": 30, "warmup_s": 60, "cooldown_s": 60,
        },
        "hosts": [
            {"count": 3, "units": 1, "workers": ["pd@0"], "pool": "prefill"},
            {"count": 4, "units": 1, "workers": ["pd@0"], "pool": "decode"},
            {"count": 4, "units": 1, "workers": ["chat@0"]},
            {"count": 6, "units": 1, "workers": ["auto@0"]},
        ],
    }


def measure_composed(args: argparse.Namespace) -> dict[str, Any]:
    """The composed fleet's run; its figures."""
    build = _use_build(args.build)
    from emulator import Engine
    from emulator.scenario import Scenario

    sc = Scenario.from_dict(composed_data(args.duration), max_requests=None)
    wall, cpu = time.perf_counter(), time.process_time()
    summary = Engine(sc).run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "build": build, "wall_s": wall, "cpu_s": cpu, "offered": summary.offered,
        "ok": summary.ok, "events": summary.events, "prefix_hit_rate": summary.prefix_hit_rate,
        "latency": summary.latency_s, "peak_rss_mb": _peak_rss_mb(),
    }


def measure_engine(args: argparse.Namespace, trace: Path) -> dict[str, Any]:
    """The engine replaying the requests; its figures."""
    build = _use_build(args.build)
    from token_scenarios import scenario

    from emulator import Engine

    sc = scenario(workers=args.workers, duration_s=args.duration, trace=trace)
    wall, cpu = time.perf_counter(), time.process_time()
    summary = Engine(sc).run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "build": build,
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


def _child(which: str, args: argparse.Namespace, trace: Path, build: str = "python") -> dict[str, Any]:
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--only",
            which,
            "--build",
            build,
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
    parser.add_argument(
        "--build", choices=("auto", "python", "compiled"), default="auto",
        help="the engine's build: auto (both when the compiled one exists), python, compiled",
    )
    parser.add_argument("--composed-duration", type=float, default=3600.0,
                        help="simulated seconds of the composed fleet")
    parser.add_argument("--only", choices=("engine", "reference", "composed"), help=argparse.SUPPRESS)
    parser.add_argument("--trace", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only == "engine":
        print(json.dumps(measure_engine(args, args.trace)))
        return
    if args.only == "reference":
        print(json.dumps(measure_reference(args)))
        return
    if args.only == "composed":
        print(json.dumps(measure_composed(args)))
        return
    if args.build == "auto":
        builds = ["python", "compiled"] if _has_compiled() else ["python"]
    else:
        builds = [args.build]
    if "compiled" in builds and not _has_compiled():
        raise SystemExit("no compiled build: run python benchmarks/build_compiled.py first")

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
        engines = [_child("engine", args, trace, b) for b in builds]
        reference = _child("reference", args, trace)

    def line(name: str, r: dict[str, Any]) -> str:
        return (
            f"{name:<18} wall {r['wall_s']:8.2f} s  cpu {r['cpu_s']:8.2f} s  "
            f"{r['offered']:>9,} requests  {r['offered'] / r['wall_s']:>10,.0f} req/wall-s  "
            f"peak RSS {r['peak_rss_mb']:7.1f} MB"
        )

    for engine in engines:
        print(line(f"engine ({engine['build']})", engine) + f"  ({engine['events']:,} events)")
    print(line("reference", reference) + f"  ({reference['steps']:,} steps)")
    for engine in engines:
        print(
            f"speed-up ({engine['build']}): {reference['wall_s'] / engine['wall_s']:.1f}x wall, "
            f"{reference['cpu_s'] / engine['cpu_s']:.1f}x cpu (target: at least 20x)"
        )
    engine = engines[-1]
    if len(engines) > 1:
        same = all(
            e["ok"] == engine["ok"] and e["events"] == engine["events"]
            and all(e[k] == engine[k] for k in ("ttft", "tpot", "latency"))
            for e in engines
        )
        print(f"builds give identical results: {'yes' if same else 'NO'}")
    print(f"requests completed: engine {engine['ok']:,}, reference {reference['ok']:,}")
    agree = engine["ok"] == reference["ok"]
    for key in ("ttft", "tpot", "latency"):
        for q in ("p50", "p95", "p99"):
            a, b = engine[key][q], reference[key][q]
            rel = abs(a / b - 1)
            agree &= rel <= TOLERANCE
            print(f"  {key:<8}{q}  engine {a:10.5f} s  reference {b:10.5f} s  diff {rel:6.2%}")
    print(f"results agree within {TOLERANCE:.0%}: {'yes' if agree else 'NO'}")

    composed_args = argparse.Namespace(**{**vars(args), "duration": args.composed_duration})
    print(
        f"composed fleet: split prefill/decode pools, prefix caching, an autoscaled model; "
        f"60 QPS for {args.composed_duration:g} s"
    )
    for b in builds:
        c = _child("composed", composed_args, trace, b)
        print(
            line(f"composed ({c['build']})", c)
            + f"  {c['offered'] / c['cpu_s']:,.0f} req/cpu-s, {c['ok']:,} ok, "
            f"prefix hit rate {c['prefix_hit_rate']:.1%}"
        )


if __name__ == "__main__":
    main()
