"""Benchmark: KV in blocks with a watermark and the two schedulers on Vidur's streams.

    python benchmarks/bench_kv_blocks.py [--peer ../shared/peers/vidur] [--kv 60000]

Replays the shared request streams (3,000 requests of 512 + 128 tokens at 4 and 10.5
QPS, Llama-2-70B on 4 H100) with the linear step model fitted to Vidur's step times,
four ways: KV counted by the token with no watermark, or in vLLM's blocks of 16 with
1 % kept free at admission; steps mixed (Sarathi, vLLM v1) or prefill-first (vLLM
v0). Prints TTFT, TPOT, TBT and end-to-end percentiles, preemptions and wall time of
each, beside Vidur's own figures (Vidur ran its sarathi scheduler with blocks of 16
and the 1 % watermark). Then the same streams under KV pressure (``--kv`` tokens a
worker), where Vidur's figures are not shared: ours only. Timing decides nothing
here; it is reported.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STREAMS = ("fixed-q4", "fixed-q10.5")
VARIANTS = (
    ("tokens, mixed", 1, 0.0, "mixed"),
    ("blocks, mixed", 16, 0.01, "mixed"),
    ("tokens, prefill_first", 1, 0.0, "prefill_first"),
    ("blocks, prefill_first", 16, 0.01, "prefill_first"),
)


def vidur_figures(peer: Path, stream: str) -> dict[str, float]:
    """Vidur's percentiles from its per-request metrics (TPOT as its README defines)."""
    with gzip.open(peer / f"{stream}.vidur-request-metrics.csv.gz", "rt") as f:
        rows = list(csv.DictReader(f))
    ttft = np.array([float(r["prefill_e2e_time"]) for r in rows])
    e2e = np.array([float(r["request_e2e_time"]) for r in rows])
    out = np.array([float(r["request_num_decode_tokens"]) for r in rows])
    tpot = (e2e - ttft) / (out - 1)
    return {
        "ttft_p50": float(np.percentile(ttft, 50)), "ttft_p90": float(np.percentile(ttft, 90)),
        "ttft_p99": float(np.percentile(ttft, 99)), "tpot_p50": float(np.percentile(tpot, 50)),
        "e2e_p50": float(np.percentile(e2e, 50)), "e2e_p99": float(np.percentile(e2e, 99)),
        "preemptions": float(sum(float(r["request_num_restarts"]) for r in rows)),
    }


def ours(peer: Path, stream: str, tmp: Path, block: int, watermark: float, scheduler: str,
         kv: int | None) -> dict[str, Any]:
    from emulator import Engine
    from emulator.scenario import load_scenario

    trace = tmp / f"{stream}.requests.jsonl"
    if not trace.exists():
        with gzip.open(peer / f"{stream}.requests.jsonl.gz") as packed:
            trace.write_bytes(packed.read())
    text = (peer / "fixed-q4.fitted.toml").read_text().replace('"fixed-q4.requests.jsonl"', f'"{trace}"')
    sc = load_scenario(text, max_requests=None).with_overrides([
        f"worker.kv_block_tokens={block}",
        f"worker.kv_watermark={watermark}", f'worker.scheduler="{scheduler}"',
        *([f"worker.kv_cache_tokens={kv}"] if kv else []),
    ])
    wall = time.perf_counter()
    s = Engine(sc).run()
    wall = time.perf_counter() - wall
    return {
        "ttft_p50": s.ttft_s["p50"], "ttft_p90": s.ttft_s["p90"], "ttft_p99": s.ttft_s["p99"],
        "tpot_p50": s.tpot_s["p50"], "tbt_p50": s.tbt_s["p50"], "tbt_p99": s.tbt_s["p99"],
        "e2e_p50": s.latency_s["p50"], "e2e_p99": s.latency_s["p99"],
        "preemptions": s.preemptions, "ok": s.ok, "wall_s": wall,
    }


COLS = ("ttft_p50", "ttft_p90", "ttft_p99", "tpot_p50", "tbt_p50", "tbt_p99", "e2e_p50", "e2e_p99")


def _line(label: str, f: dict[str, Any], ref: dict[str, float] | None) -> str:
    cells = []
    for c in COLS:
        v = f.get(c)
        if v is None:
            cells.append(f"{'-':>16}")
        elif ref is not None and c in ref and ref[c]:
            cells.append(f"{v * 1000:>8.1f} {100 * (v / ref[c] - 1):+5.1f}%")
        else:
            cells.append(f"{v * 1000:>16.1f}")
    wall = f"{f['wall_s']:>7.2f}" if "wall_s" in f else f"{'':>7}"
    return f"{label:<24}" + "".join(cells) + f"{int(f['preemptions']):>8,}" + wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", type=Path, default=ROOT.parent / "shared" / "peers" / "vidur")
    parser.add_argument("--kv", type=int, default=60_000, help="KV tokens a worker under pressure")
    args = parser.parse_args()
    head = f"{'(ms; vs Vidur)':<24}" + "".join(f"{c:>16}" for c in COLS) + f"{'preempt':>8}{'wall_s':>7}"
    with tempfile.TemporaryDirectory() as tmp:
        for stream in STREAMS:
            ref = vidur_figures(args.peer, stream)
            print(f"\n{stream}: 3,000 requests, KV 524,288 tokens")
            print(head)
            print(_line("Vidur (sarathi)", ref, None))
            for label, block, wm, sched in VARIANTS:
                print(_line(label, ours(args.peer, stream, Path(tmp), block, wm, sched, None), ref))
        for stream in STREAMS:
            print(f"\n{stream} under KV pressure: {args.kv:,} tokens a worker (no Vidur figures)")
            print(head)
            for label, block, wm, sched in VARIANTS:
                print(_line(label, ours(args.peer, stream, Path(tmp), block, wm, sched, args.kv), None))


if __name__ == "__main__":
    main()
