"""Benchmark: a preset with a pipeline group against the same fleet without it, at its
load and at twice it: goodput, and the long prompts' TTFT and share within the goal.

    python benchmarks/bench_pipeline.py [--preset NAME] [--json]

"Without" sets ``pipeline_threshold_tokens = 0``: every prefill worker serves every
prompt. A long prompt is one above the preset's threshold; its TTFT is the client's
(prefill, transfer and the decode worker's first step), read from the requests the
workers complete (those answered within the client's timeout).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from emulator import Engine  # noqa: E402
from emulator.scenario import Scenario  # noqa: E402
from emulator.scenario.presets import load_preset  # noqa: E402
from emulator.sim.requests import OK  # noqa: E402


def run(scenario: Scenario, threshold: int) -> dict[str, Any]:
    """One run's goodput and its long prompts' client TTFTs."""
    engine = Engine(scenario)
    d = engine.disp[0]
    timeout = scenario.client.timeout_s
    long: list[float] = []
    book = d.book_done

    def booked() -> None:
        st = d.store
        for row, first, done, code, *_ in d.token_done:
            i = int(row) - st.base
            arrival = float(st.arrival[i])
            if st.tokens[i] > threshold and code == OK and (timeout is None or done <= arrival + timeout):
                long.append(first - arrival)
        book()

    d.book_done = booked  # type: ignore[method-assign]
    summary = engine.run().per_model[next(iter(scenario.models))].to_dict()
    goal = scenario.slo.ttft_s
    x = np.array(long)
    return {
        "slo_goodput": summary["slo_goodput"], "ok": summary["ok"], "offered": summary["offered"],
        "ttft_p95_s": summary["ttft_s"]["p95"], "long_answered": len(long),
        "long_ttft_p50_s": float(np.median(x)) if len(x) else None,
        "long_ttft_max_s": float(x.max()) if len(x) else None,
        "long_within_goal": int(np.count_nonzero(x <= goal)) if goal is not None else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="mooncake-long-context-pipeline")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    base = load_preset(args.preset, max_requests=None)
    name = next(iter(base.models))
    split = base.models[name].disaggregated
    assert split is not None and split.pipeline_threshold_tokens, "the preset has no pipeline group"
    rows = []
    for factor in (1, 2):
        qps = base.traffic.qps * factor
        for label, sets in (("with", []), ("without", [f"models.{name}.disaggregated.pipeline_threshold_tokens=0"])):
            sc = base.with_overrides([f"traffic.qps={qps:g}", *sets], max_requests=None)
            rows.append({"qps": qps, "pipeline": label, **run(sc, split.pipeline_threshold_tokens)})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{args.preset}: long prompts are those above {split.pipeline_threshold_tokens} tokens; "
          f"TTFT goal {base.slo.ttft_s} s")
    print(f"{'qps':>5} {'pipeline':>8} {'goodput':>8} {'ttft p95':>9} {'long':>5} {'long p50':>9} "
          f"{'long max':>9} {'in goal':>8}")
    for r in rows:
        print(f"{r['qps']:>5g} {r['pipeline']:>8} {r['slo_goodput']:>8.2%} {r['ttft_p95_s']:>8.2f}s "
              f"{r['long_answered']:>5} {r['long_ttft_p50_s']:>8.1f}s {r['long_ttft_max_s']:>8.1f}s "
              f"{r['long_within_goal']:>8}")


if __name__ == "__main__":
    main()
