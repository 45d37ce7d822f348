"""Benchmark: the analysis's predicted capacity against the capacity a sweep of runs measures.

    python benchmarks/bench_capacity.py [--only NAME ...] [--tolerance 0.15] [--json]

For every preset (and the two example reviews' fleet configs), the predicted capacity is
``emulator.analysis.fleet.analyse(scenario).capacity_qps``: the total offered QPS, at the
scenario's split of traffic between models, that the fleet as placed serves with every
model's goals met. The measured capacity is the highest total QPS at which every model's
goodput stays at or above 90 % in a run of the emulator, found by bracketing and then
bisecting (to 1 %) over runs of the same seed.

What a run of the sweep changes, and why (each is printed with its row):

* offered load: ``traffic.qps`` (shape constant) or, for a trace, ``trace_speedup``;
* scheduled faults are removed: capacity is the figure with every host up (the
  analysis gives the losses apart);
* an ``[autoscaler]`` or ``[pools.NAME.autoscaler]`` is replaced by its ``max_workers``
  placed from the start (``emulator.analysis.fleet.grown``: the incremental placer the
  autoscaler uses, on the hosts it may use): the top of the autoscaler's range, without
  the warm-ups of a cold start;
* goodput is the share of finished requests that met every SLO the fleet sets; a fleet
  without SLOs holds a request good when it is answered within the client's timeout (60 s
  when clients never give up), and its runs last at least 50 timeouts (at most 20 million
  requests), so a queue that grows slowly has the time to push answers past the timeout;
* a goal no load meets (a TPOT goal under the decode floor) is dropped from the sweep and
  from the prediction alike, and the row says so.

Timing decides nothing here; the table and the machine are printed.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from emulator import Engine  # noqa: E402
from emulator.scenario import Scenario, load_scenario  # noqa: E402

#: Goodput a run must keep for its load to count as served.
GOODPUT = 0.9
#: A no-SLO fleet's runs last at least this many client timeouts.
TIMEOUTS_PER_RUN = 50
MAX_REQUESTS = 20_000_000
#: A fleet with SLOs is run this long at most at each load (its TTFT goal fails within
#: seconds of a queue starting to grow).
SLO_RUN_S = 600.0
EXAMPLES = (ROOT / "reviewer" / "review" / "example" / "chat-70b-fleet.toml",)


def sweep_base(scenario: Scenario) -> tuple[dict[str, Any], list[str]]:
    """The scenario's dict form as the sweep runs it, and the notes on what changed."""
    from emulator.analysis.fleet.grown import grown_hosts

    data = scenario.to_dict()
    notes: list[str] = []
    if data.get("faults"):
        notes.append(f"{len(data['faults'])} scheduled faults removed")
        data["faults"] = []
    if scenario.autoscalers():
        # The analysis's own layout at the top of every autoscaler's range.
        hosts, grown = grown_hosts(scenario)
        groups = _expanded(data["hosts"])
        data["hosts"] = [{"count": 1, "units": g["units"], "workers": [f"{n}@{u}" for n, u in sorted(slots, key=lambda s: s[1])],
                          **({"pool": g["pool"]} if g.get("pool") else {})}
                         for g, slots in zip(groups, hosts, strict=True)]
        data.pop("autoscaler", None)
        for table in data.get("pools", {}).values():
            table.pop("autoscaler", None)
        notes.extend(grown)
    if not scenario.slo.any() and scenario.client.timeout_s is None:
        data["client"]["timeout_s"] = 60.0
        notes.append("clients that never give up held to 60 s")
    return data, notes


def goals_met(scenario: Scenario) -> tuple[Scenario, list[str]]:
    """The scenario without the goals that no load meets (their floor is above them)."""
    from emulator.analysis.fleet import analyse

    gaps = analyse(scenario).gaps
    data = scenario.to_dict()
    dropped = [key for key, gap in (("ttft_s", gaps["ttft"]), ("tpot_s", gaps["tpot"])) if gap is not None and gap > 1]
    if not dropped:
        return scenario, []
    slo = {k: v for k, v in data.get("slo", {}).items() if k not in dropped}
    data["slo"] = slo
    if not slo:
        del data["slo"]
    return Scenario.from_dict(data, max_requests=None), [f"slo.{k} under its floor, dropped" for k in dropped]


def _expanded(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [g for g in groups for _ in range(g["count"])]


def at_qps(data: dict[str, Any], scenario: Scenario, qps: float) -> Scenario:
    """The sweep's scenario at ``qps`` offered in all."""
    d = json.loads(json.dumps(data))
    t = d["traffic"]
    if t.get("trace"):
        base = scenario.expected_requests() / scenario.duration_s / (1 + scenario.client.retries)
        t["trace_speedup"] = float(t.get("trace_speedup", 1.0)) * qps / base
        t["trace_loop"] = True
    else:
        t.update(shape="constant", qps=qps, peak_qps=qps)
    # A steady load needs minutes, not the day a diurnal preset simulates.
    duration = min(float(d["duration_s"]), SLO_RUN_S)
    if not scenario.slo.any():
        timeout = float(d["client"]["timeout_s"])
        duration = min(max(duration, TIMEOUTS_PER_RUN * timeout), MAX_REQUESTS / qps)
    d["duration_s"] = duration
    d["sample_s"] = max(float(d["sample_s"]), duration / 100)
    return Scenario.from_dict(d, max_requests=None)


def goodput(scenario: Scenario) -> float:
    """The lowest goodput over the models of one run."""
    summary = Engine(scenario).run()
    worst = 1.0
    for outcome in summary.per_model.values():
        finished = outcome.offered - outcome.in_system_end
        if finished <= 0:
            continue
        good = outcome.slo_met if scenario.slo.any() else outcome.ok
        worst = min(worst, good / finished)
    return worst


def measure(data: dict[str, Any], scenario: Scenario, guess: float, precision: float = 0.01) -> tuple[float, int]:
    """The highest QPS with goodput >= GOODPUT (within ``precision``), and the runs it took."""
    runs = 0

    def served(qps: float) -> bool:
        nonlocal runs
        runs += 1
        return goodput(at_qps(data, scenario, qps)) >= GOODPUT

    lo, hi = 0.0, None
    q = max(guess, 1e-3)
    while hi is None or lo == 0.0:
        if served(q):
            lo = q
            if hi is None:
                q *= 1.5
        else:
            hi = q
            q /= 1.5
        if q < 1e-3:
            return 0.0, runs
    while hi - lo > precision * lo:
        mid = (lo + hi) / 2
        if served(mid):
            lo = mid
        else:
            hi = mid
    return lo, runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="preset names (or files) to measure")
    parser.add_argument("--tolerance", type=float, default=0.15)
    parser.add_argument("--guess", type=float, default=None,
                        help="first QPS tried (default: the load the scenario offers)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="an override applied to every scenario measured, as run takes")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from emulator.analysis.fleet import analyse
    from emulator.scenario.presets import PRESETS

    names = args.only or [*sorted(PRESETS), *(str(p) for p in EXAMPLES)]
    rows = []
    print(f"machine: {platform.machine()} {platform.processor() or ''}, python {platform.python_version()}, "
          f"{platform.system()} {platform.release()}")
    print(f"goodput threshold {GOODPUT:.0%}; target: predicted within {args.tolerance:.0%} of measured")
    header = f"{'scenario':<28}{'predicted':>11}{'measured':>11}{'ratio':>8}  {'ok':<4}{'runs':>5}{'wall_s':>8}  notes"
    print(header)
    for name in names:
        scenario = load_scenario(name, max_requests=None)
        if args.set:
            scenario = scenario.with_overrides(args.set, max_requests=None)
        scenario, dropped = goals_met(scenario)
        predicted = float(analyse(scenario).offered_capacity_qps)
        data, notes = sweep_base(scenario)
        notes = dropped + notes
        # The sweep starts from the load the config offers, not from the prediction, so
        # the prediction cannot steer what is measured.
        start = args.guess or scenario.expected_requests() / scenario.duration_s / (1 + scenario.client.retries)
        t0 = time.perf_counter()
        measured, runs = measure(data, scenario, start or 1.0)
        wall = time.perf_counter() - t0
        ratio = predicted / measured if measured else None
        ok = ratio is not None and abs(ratio - 1) <= args.tolerance
        rows.append({"scenario": scenario.name, "predicted_qps": predicted, "measured_qps": measured,
                     "ratio": ratio, "within": ok, "runs": runs, "wall_s": wall, "notes": notes})
        print(f"{scenario.name:<28}{predicted:>11.2f}{measured:>11.2f}"
              f"{'-' if ratio is None else f'{ratio:.3f}':>8}  {'yes' if ok else 'NO':<4}{runs:>5}{wall:>8.0f}  "
              f"{'; '.join(notes)}", flush=True)
    worst = max((abs(r["ratio"] - 1) for r in rows if r["ratio"] is not None), default=0.0)
    within = sum(r["within"] for r in rows)
    print(f"{within} of {len(rows)} within {args.tolerance:.0%}; largest error {worst:.1%}")
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
