"""Benchmark: one hour of the shipped production trace on a continuous-batching fleet.

    python benchmarks/bench_azure.py [--speedup 20] [--workers 24]

Replays the whole named trace ``azure-conv-2023`` (19,366 requests over 58 minutes,
heavy-tailed prompt and output lengths) at ``trace_speedup = 20`` (about 110 requests
a second over 175 s, then 300 s more for the requests in flight to finish) on 24
continuous workers behind a least-loaded router. Each worker is a Llama-2-70B
replica on 4 x H100-80GB: its step coefficients are the ones ``python -m emulator
calibrate splitwise-llama2-70b --hardware h100-80gb --tp 4`` fits, with a KV cache of
400,000 tokens (about 160 GB left after the 140 GB of fp16 weights, at 320 kB of KV a
token for a GQA 70B model), up to 256 sequences and 8,192 tokens a step. Prints the
wall and cpu time, requests per wall second, events, peak memory, the run's outcomes
and TTFT / TPOT, and the machine. Timing decides nothing here; it is reported.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: Simulated time after the last arrival, for the requests in flight to finish.
DRAIN_S = 300.0

#: The calibrated worker (see the module docstring).
WORKER: dict[str, Any] = {
    "batching": "continuous",
    "max_num_seqs": 256,
    "max_batched_tokens": 8192,
    "kv_cache_tokens": 400_000,
    "step_base_s": 0.02858,
    "prefill_token_s": 9.224e-05,
    "decode_seq_s": 0.0002454,
    "kv_token_s": 1.427e-07,
}


def _peak_rss_mb() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def build(speedup: float, workers: int) -> Any:
    """The scenario: the whole trace at ``speedup`` on ``workers`` one-worker hosts."""
    from emulator.scenario import Scenario
    from emulator.scenario.traces import load_trace

    trace = load_trace("azure-conv-2023")
    duration = trace.duration_s / speedup + DRAIN_S
    return Scenario.from_dict(
        {
            "name": "bench-azure",
            "duration_s": duration,
            "seed": 1,
            "sample_s": 1.0,
            "traffic": {"qps": 0.0, "trace": "azure-conv-2023", "trace_speedup": speedup},
            "models": {"llama2-70b": {"share": 1.0, "worker_units": 4, "tokens": 1000,
                                      "output_tokens": 200}},
            "dispatcher": {"policy": "least_loaded"},
            "client": {"timeout_s": "none"},
            "worker": WORKER,
            "hosts": [{"count": workers, "units": 4, "workers": ["llama2-70b@0"]}],
        },
        max_requests=None,
    )


def main() -> None:
    """Run the replay once and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speedup", type=float, default=20.0)
    parser.add_argument("--workers", type=int, default=24)
    args = parser.parse_args()

    from emulator import Engine

    sc = build(args.speedup, args.workers)
    wall, cpu = time.perf_counter(), time.process_time()
    summary = Engine(sc).run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu

    print(
        f"machine: {platform.platform()}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    print(
        f"azure-conv-2023 at trace_speedup {args.speedup:g} on {args.workers} continuous "
        f"workers (Llama-2-70B on 4 x H100, calibrated): {sc.duration_s:,.1f} s simulated"
    )
    print(
        f"wall {wall:.2f} s, cpu {cpu:.2f} s, {summary.offered / wall:,.0f} requests per "
        f"wall second, {summary.events:,} events, peak memory {_peak_rss_mb():.0f} MB"
    )
    print(
        f"offered {summary.offered:,}, ok {summary.ok:,}, in system at the end "
        f"{summary.in_system_end:,}, preemptions {summary.preemptions:,}, "
        f"books balance: {'yes' if summary.balanced() else 'NO'}"
    )
    for label, q in (("ttft", summary.ttft_s), ("tpot", summary.tpot_s), ("latency", summary.latency_s)):
        print(f"  {label:<8}" + "  ".join(f"{k} {v:.3f} s" for k, v in q.items() if k in ("p50", "p99")))


if __name__ == "__main__":
    main()
