"""Benchmark: disaggregated prefill and decode in the engine, against the same fleet
undivided and against the step-by-step reference of disaggregated serving.

    python benchmarks/bench_disagg.py [--duration 600] [--qps 40] [--prefill 4] [--decode 8]

Poisson traffic, prompts of 2,000 tokens and outputs of 200 (lognormal, cv 1), the
default worker of the token-level scenarios and Llama-2-70B's KV at 50 GB/s. Prints the
wall time of the engine with the pools, of the engine on the same workers without them
(every worker prefills and decodes), and of the reference on the same requests; the
engine's TTFT and TPOT in both layouts; how many requests the engine and the reference
time alike (first token and completion within 1e-9 s); and the machine. Timing decides
nothing here; it is reported.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "emulator"))


def main() -> None:
    from disagg_reference import simulate_disagg
    from disagg_scenarios import KV_BYTES, pd_data
    from token_scenarios import WORKER, poisson_requests, write_trace

    from emulator import Engine
    from emulator.scenario import Scenario

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--duration", type=float, default=600.0)
    p.add_argument("--qps", type=float, default=40.0)
    p.add_argument("--prefill", type=int, default=4)
    p.add_argument("--decode", type=int, default=8)
    args = p.parse_args()
    requests = poisson_requests(qps=args.qps, duration_s=args.duration, prompt=2000, output=200,
                                prompt_cv=1.0, output_cv=1.0, seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        trace = write_trace(requests, Path(tmp) / "requests.jsonl")
        data = pd_data(prefill=args.prefill, decode=args.decode, duration_s=args.duration,
                       trace=trace)
        split = Scenario.from_dict(data, max_requests=None)
        del data["models"]["m"]["disaggregated"]
        for group in data["hosts"]:
            del group["pool"]
        whole = Scenario.from_dict(data, max_requests=None)

        engine = Engine(split)
        done: dict[int, tuple[float, float]] = {}
        record = engine.disp[0].complete_request

        def spy(rec: tuple) -> None:
            done[rec[0]] = (rec[1], rec[2])
            record(rec)

        engine.disp[0].complete_request = spy  # type: ignore[method-assign]
        t0 = time.perf_counter()
        s_split = engine.run()
        t_split = time.perf_counter() - t0
        t0 = time.perf_counter()
        s_whole = Engine(whole).run()
        t_whole = time.perf_counter() - t0
        t0 = time.perf_counter()
        ref = simulate_disagg(requests, prefill_workers=args.prefill, decode_workers=args.decode,
                              params=WORKER, transfer_s_per_token=KV_BYTES / 50e9,
                              duration_s=args.duration)
        t_ref = time.perf_counter() - t0
    ok = [(i, r) for i, r in enumerate(ref.records) if r.outcome == "ok"]
    alike = sum(
        1 for i, r in ok
        if i in done and abs(done[i][0] - r.first_token_s) <= 1e-9 and abs(done[i][1] - r.done_s) <= 1e-9
    )
    n = len(requests)
    print(f"{n:,} requests over {args.duration:g} s at {args.qps:g} QPS; "
          f"{args.prefill} prefill + {args.decode} decode workers")
    print(f"engine, pools:       {t_split:8.2f} s wall ({n / t_split:,.0f} requests/s), "
          f"{s_split.events:,} events")
    print(f"engine, undivided:   {t_whole:8.2f} s wall ({n / t_whole:,.0f} requests/s), "
          f"{s_whole.events:,} events")
    print(f"reference, pools:    {t_ref:8.2f} s wall ({t_ref / t_split:.1f}x the engine)")
    for label, s in (("pools", s_split), ("undivided", s_whole)):
        print(f"TTFT p50/p99 {label:<10} {s.ttft_s['p50']:.4f} / {s.ttft_s['p99']:.4f} s; "
              f"TPOT p50/p99 {s.tpot_s['p50']:.4f} / {s.tpot_s['p99']:.4f} s")
    print(f"timed alike by engine and reference: {alike:,} of {len(ok):,} completed")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}")


if __name__ == "__main__":
    main()
