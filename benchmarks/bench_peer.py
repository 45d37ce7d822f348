"""Our token-level engine against an independent simulator on identical request streams.

Replays the peer's shared streams (``../shared/peers/vidur/``: 3,000 requests of 512
prompt and 128 output tokens at 4 and 10.5 QPS on one replica of Llama-2-70B over 4
H100s, Sarathi-style chunks of 512 tokens, 128 sequences at most, 524,288 KV tokens) and
prints our TTFT, TPOT, time between tokens and end-to-end percentiles beside the peer's,
with the differences, under three step models:

* ``linear``: the coefficients least-squares fitted to the peer's step times (the
  stream's shared scenario);
* ``table``: ``step_model = "table"`` on the peer's step-time table;
* ``roofline``: the catalog's H100 and Llama-2-70B at mbu 0.6 and mfu 0.5, with the
  collectives of tensor parallelism.

Targets: within 5% of the peer for the linear and table models, within 15% for the
roofline. TPOT is per request, (end to end - TTFT) / (output - 1), as the peer's notes
define it. Each run's wall time is printed.

    python benchmarks/bench_peer.py [--peer ../shared/peers/vidur] [--streams fixed-q4,fixed-q10.5]
"""

from __future__ import annotations

import argparse
import csv
import gzip
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from emulator import Engine  # noqa: E402
from emulator.scenario import Scenario, load_scenario  # noqa: E402

PEER = ROOT.parent / "shared" / "peers" / "vidur"
MODELS = {
    "linear": [],
    "table": ['worker.step_model="table"', 'worker.step_table="vidur-llama2-70b-h100-tp4"'],
    "roofline": ['worker.step_model="roofline"', "worker.mbu=0.6", "worker.mfu=0.5"],
}
FIGURES = (("TTFT p50", "ttft", 50), ("TTFT p99", "ttft", 99), ("TPOT p50", "tpot", 50),
           ("TPOT p99", "tpot", 99), ("e2e p50", "e2e", 50), ("e2e p99", "e2e", 99))


def peer_metrics(path: Path) -> dict[str, np.ndarray]:
    """The peer's per-request TTFT, TPOT and end to end, in request order."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    ttft = np.array([float(r["prefill_e2e_time"]) for r in rows])
    e2e = np.array([float(r["request_e2e_time"]) for r in rows])
    out = np.array([float(r["request_num_decode_tokens"]) for r in rows])
    return {"ttft": ttft, "e2e": e2e, "tpot": (e2e - ttft) / np.maximum(out - 1, 1),
            "restarts": np.array([float(r["request_num_restarts"]) for r in rows])}


def scenario_for(stream: str, peer: Path, work: Path, overrides: list[str]) -> Scenario:
    """The shared fitted scenario (written for the 4 QPS stream) pointed at ``stream``."""
    trace = work / f"{stream}.requests.jsonl"
    if not trace.exists():
        with gzip.open(peer / f"{stream}.requests.jsonl.gz", "rb") as src, trace.open("wb") as dst:
            shutil.copyfileobj(src, dst)
    text = (peer / "fixed-q4.fitted.toml").read_text(encoding="utf-8")
    toml = work / f"{stream}.toml"
    toml.write_text(text.replace('trace = "fixed-q4.requests.jsonl"', f'trace = "{trace}"'), encoding="utf-8")
    return load_scenario(toml, max_requests=None).with_overrides(overrides)


def ours(summary: Any) -> dict[str, dict[str, float]]:
    """Our percentiles by figure name (seconds)."""
    return {"ttft": summary.ttft_s, "tpot": summary.tpot_s, "e2e": summary.latency_s,
            "tbt": getattr(summary, "tbt_s", None) or {}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peer", type=Path, default=PEER)
    parser.add_argument("--streams", default="fixed-q4,fixed-q10.5")
    args = parser.parse_args()
    if not (args.peer / "fixed-q4.fitted.toml").is_file():
        print(f"bench_peer: the peer's files are not in {args.peer}; give --peer", file=sys.stderr)
        return 2
    worst: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for stream in args.streams.split(","):
            peer = peer_metrics(args.peer / f"{stream}.vidur-request-metrics.csv.gz")
            print(f"\n== {stream}: {len(peer['ttft']):,} requests; peer preemptions "
                  f"{int(peer['restarts'].sum())} ==")
            print(f"{'figure':<10}{'peer':>10}" + "".join(f"{m:>18}" for m in MODELS))
            runs: dict[str, dict[str, Any]] = {}
            walls: dict[str, float] = {}
            for name, overrides in MODELS.items():
                sc = scenario_for(stream, args.peer, work, overrides)
                start = time.perf_counter()
                summary = Engine(sc).run()
                walls[name] = time.perf_counter() - start
                runs[name] = {"figures": ours(summary), "preemptions": summary.preemptions, "ok": summary.ok}
            for label, key, q in FIGURES:
                theirs = float(np.percentile(peer[key], q))
                cells = []
                for name in MODELS:
                    mine = runs[name]["figures"][key].get(f"p{q}")
                    diff = mine / theirs - 1
                    worst[name] = max(worst.get(name, 0.0), abs(diff))
                    cells.append(f"{_fmt(mine, key)} {diff:+6.1%}")
                print(f"{label:<10}{_fmt(theirs, key):>10}" + "".join(f"{c:>18}" for c in cells))
            for q in (50, 90, 99):
                tbt = [runs[n]["figures"]["tbt"].get(f"p{q}") for n in MODELS]
                if any(v is not None for v in tbt):
                    print(f"{f'TBT p{q}':<10}{'—':>10}" + "".join(
                        f"{_fmt(v, 'tpot') if v is not None else '—':>18}" for v in tbt))
            print(f"{'completed':<10}{len(peer['ttft']):>10,}" + "".join(f"{runs[n]['ok']:>18,}" for n in MODELS))
            print(f"{'preempted':<10}{int(peer['restarts'].sum()):>10,}"
                  + "".join(f"{runs[n]['preemptions']:>18,}" for n in MODELS))
            print(f"{'wall s':<10}{'':>10}" + "".join(f"{walls[n]:>18.2f}" for n in MODELS))
    print("\nlargest difference from the peer over the figures above: "
          + ", ".join(f"{n} {v:.1%}" for n, v in worst.items())
          + " (targets: linear and table 5%, roofline 15%)")
    return 0


def _fmt(value: float | None, key: str) -> str:
    if value is None:
        return "—"
    return f"{value * 1000:.1f} ms" if key == "tpot" or value < 1 else f"{value:.3f} s"


if __name__ == "__main__":
    raise SystemExit(main())
