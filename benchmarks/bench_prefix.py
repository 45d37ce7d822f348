"""Benchmark: prefix caching and cache-aware routing.

    python benchmarks/bench_prefix.py [--duration 300] [--reference-s 120]

1. The ``prefix-heavy-chat`` preset under round_robin, least_loaded, prefix_aware,
   weighted and with no cache: wall time, events, prefix hit rate, TTFT p50/p99, SLO
   goodput.
2. The engine against the step-by-step prefix reference on the same requests (two
   workers, 200 prefix groups, eviction pressure, prefix_aware): both wall times, their
   ratio, and whether every finished request's completion time agrees.

Timing decides nothing here; it is reported, with the machine.
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "emulator"))


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def presets(duration: float) -> None:
    from emulator import Engine
    from emulator.scenario.presets import load_preset

    base = load_preset("prefix-heavy-chat").with_overrides([f"duration_s={duration}"])
    print(f"prefix-heavy-chat, {duration:g} s simulated")
    print(f"{'variant':<22}{'wall_s':>8}{'events':>10}{'hit':>8}{'ttft_p50':>10}{'ttft_p99':>10}{'goodput':>9}")
    for label, sets in (
        ("round_robin", ["dispatcher.policy=round_robin"]),
        ("least_loaded", ["dispatcher.policy=least_loaded"]),
        ("prefix_aware", ["dispatcher.policy=prefix_aware"]),
        ("weighted (3/2)", ["dispatcher.policy=weighted"]),
        ("no cache", ["worker.prefix_cache=false"]),
    ):
        engine = Engine(base.with_overrides(sets))
        t0 = time.perf_counter()
        s = engine.run()
        wall = time.perf_counter() - t0
        print(
            f"{label:<22}{wall:>8.2f}{s.events:>10,}{_pct(s.prefix_hit_rate):>8}"
            f"{s.ttft_s['p50'] or 0:>10.3f}{s.ttft_s['p99'] or 0:>10.3f}{_pct(s.slo_goodput):>9}"
        )


def against_reference(duration: float) -> None:
    from prefix_reference import simulate_prefix
    from test_prefix_reference import requests_with_prefixes, run_engine
    from token_scenarios import WORKER

    params = replace(WORKER, kv_cache_tokens=60_000, kv_token_s=2e-8)
    requests = requests_with_prefixes(
        qps=20, duration_s=duration, prompt=1500, output=200, groups=200, prefix=1000,
        prompt_cv=0.5, output_cv=1.0, seed=2,
    )
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        summary, done, _ = run_engine(
            requests, Path(tmp), workers=2, duration_s=duration, policy="prefix_aware", params=params
        )
        engine_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = simulate_prefix(requests, workers=2, params=params, policy="prefix_aware", duration_s=duration)
    ref_s = time.perf_counter() - t0
    finished = [(i, r) for i, r in enumerate(ref.run.records) if r.outcome == "ok"]
    agree = all(abs(done[i][1] - r.done_s) < 1e-6 for i, r in finished if i in done) and len(done) == len(finished)
    print(f"\nengine vs reference: {len(requests):,} requests over {duration:g} s, 2 workers, prefix_aware")
    print(f"engine {engine_s:.2f} s, reference {ref_s:.2f} s, ratio {ref_s / engine_s:.1f}x")
    print(f"hit rate engine {_pct(summary.prefix_hit_rate)}, reference {_pct(ref.hit_rate)}; "
          f"evicted {ref.evicted:,} tokens, preemptions {ref.run.preemptions}; every completion agrees: {agree}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=300.0)
    parser.add_argument("--reference-s", type=float, default=120.0)
    args = parser.parse_args()
    print(f"machine: {platform.machine()} {platform.processor() or ''} python {platform.python_version()}")
    presets(args.duration)
    against_reference(args.reference_s)


if __name__ == "__main__":
    main()
