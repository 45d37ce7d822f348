"""``python -m emulator place``: rank worker placements on identical hosts; check fragmentation.

    python -m emulator place --hosts 3 --units 10 --worker small=2 --worker big=5 \\
        [--split small=0.5,big=0.5] [--qps-per-worker small=13.33,big=13.33] [--json]
    python -m emulator place --units 10 --worker small=2 --worker big=5 \\
        --check small@1,small@6 --check big@0 [--add big=2]
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from emulator.analysis.fleet import analyse
from emulator.analysis.numbers import compute
from emulator.analysis.placement import PlacementError, make_problem, solve
from emulator.analysis.placement.fragment import fleet_fragmentation, parse_slots, place_incremental
from emulator.analysis.placement.scenario import current_fleet, problem_args, rank_of
from emulator.cli import place_text as cli_place_text
from emulator.scenario import ScenarioError, load_scenario

__all__ = ["register", "run"]


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``place`` subcommand to an argparse subparsers object."""
    parser = subparsers.add_parser(
        "place",
        help="rank placements of workers on hosts by the worst single-host loss; check fragmentation",
        description="Rank fleet placements exactly, or report fragmentation of hosts given with --check.",
    )
    # Values are parsed here rather than by argparse types so that every bad
    # input gets the same one-line message and status 2.
    parser.add_argument("--scenario", metavar="FILE|PRESET",
                        help="take hosts, worker sizes, split, throughput and demand from a scenario, "
                             "and show where its placement ranks")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
        help="with --scenario: override a key by dotted path, as run takes (repeatable)",
    )
    parser.add_argument("--hosts", help="number of identical hosts")
    parser.add_argument("--units", help="units per host, e.g. 10")
    parser.add_argument(
        "--worker",
        action="append",
        default=[],
        metavar="NAME=UNITS",
        help="a worker type and its size in adjacent units (repeat per type)",
    )
    parser.add_argument(
        "--split", help="traffic share per model, e.g. small=0.5,big=0.5 (default: equal)"
    )
    parser.add_argument(
        "--qps-per-worker",
        dest="qps_per_worker",
        action="append",
        default=[],
        metavar="NAME=QPS",
        help="throughput of one worker, e.g. small=13.33 (default: 1 each)",
    )
    parser.add_argument(
        "--demand-qps",
        dest="demand_qps",
        help="total demand; ratios become capacity / (share x demand)",
    )
    parser.add_argument(
        "--top", default="10", help="fleets to show, plus every tie with the last (default 10)"
    )
    parser.add_argument(
        "--method", default="counts", help="counts (exact, fast) or brute_force (reference)"
    )
    parser.add_argument(
        "--check",
        action="append",
        default=[],
        metavar="SLOTS",
        help="a host's workers, e.g. small@1,small@6 (repeat per host): report fragmentation",
    )
    parser.add_argument(
        "--add", help="with --check: place these workers incrementally, e.g. big=2,small=3"
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run)
    return parser


def _int(text: str | None, name: str, *, minimum: int) -> int:
    if text is None:
        raise PlacementError(f"--{name}: missing; give a whole number, e.g. --{name} 3")
    try:
        value = int(text)
    except ValueError:
        raise PlacementError(f"--{name}: {text!r} is not a whole number") from None
    if value < minimum:
        raise PlacementError(f"--{name}: {value} must be at least {minimum}")
    return value


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        for part in (p.strip() for p in item.split(",")):
            if not part:
                continue
            name, sep, value = part.partition("=")
            if not sep or not name.strip() or not value.strip():
                raise PlacementError(f"--{flag}: {part!r} should look like NAME=VALUE")
            if name.strip() in out:
                raise PlacementError(f"--{flag}: {name.strip()!r} given twice")
            out[name.strip()] = value.strip()
    return out


def run(args: argparse.Namespace) -> int:
    """Run the subcommand; bad input is one line on stderr and status 2."""

    try:
        if args.overrides and not args.scenario:
            raise PlacementError("--set: only with --scenario (the scenario to override)")
        data, text = _run_scenario(args) if args.scenario else _run(args)
    except (PlacementError, ScenarioError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(data, indent=2) if args.json else text)
    return 0


def _run(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    workers_raw = _pairs(args.worker, "worker")
    if not workers_raw:
        raise PlacementError("--worker: give at least one worker type, e.g. --worker small=2")
    workers = {n: _int(v, f"worker {n}", minimum=1) for n, v in workers_raw.items()}
    units = _int(args.units, "units", minimum=1)
    for name, size in workers.items():
        if size > units:
            raise PlacementError(
                f"--worker {name}: a {size}-unit worker cannot fit on a {units}-unit host; "
                "use larger hosts or a smaller worker"
            )
    if args.check:
        return _run_check(args, units, workers)
    if args.add:
        raise PlacementError("--add: only with --check (the hosts to add to)")
    hosts = _int(args.hosts, "hosts", minimum=1)
    split = _pairs([args.split], "split") if args.split else None
    qps = _pairs(args.qps_per_worker, "qps-per-worker") or None
    result = solve(
        hosts,
        units,
        workers,
        split,
        qps_per_worker=qps,
        demand_qps=args.demand_qps,
        top=_int(args.top, "top", minimum=1),
        method=args.method,
    )
    data = result.to_dict()
    return data, cli_place_text.render_ranking(data)


def _run_scenario(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    clash = [flag for flag, value in (("--hosts", args.hosts), ("--units", args.units), ("--worker", args.worker),
                                      ("--split", args.split), ("--qps-per-worker", args.qps_per_worker),
                                      ("--demand-qps", args.demand_qps), ("--check", args.check)) if value]
    if clash:
        raise PlacementError(f"{clash[0]}: not with --scenario, which gives hosts, workers, split and throughput")
    scenario = load_scenario(args.scenario, max_requests=None)
    if args.overrides:
        scenario = scenario.with_overrides(args.overrides, max_requests=None)
    analysis = analyse(scenario)
    report = compute(scenario, analysis).to_dict()
    kwargs = problem_args(scenario, analysis)
    result = solve(**kwargs, top=_int(args.top, "top", minimum=1), method=args.method)
    problem = make_problem(**kwargs)
    current = current_fleet(problem, scenario)
    data = result.to_dict()
    data["scenario"] = scenario.name
    data["current"] = current.to_dict(problem)
    ranked = rank_of(problem, current)
    data["current"]["rank"], data["current"]["ranks"] = ranked if ranked else (None, None)
    # The page's figures: the numbers pass's headline and the analysis it reads.
    data["headline"] = report["headline"]
    data["analysis"] = report["analysis"]
    text = "\n".join([*cli_place_text.analysis_lines(report), "", cli_place_text.render_ranking(data)])
    return data, text


def _run_check(
    args: argparse.Namespace, units: int, workers: dict[str, int]
) -> tuple[dict[str, Any], str]:

    hosts = [parse_slots(text, field_name=f"--check host {i}") for i, text in enumerate(args.check)]
    frag = fleet_fragmentation(units, workers, hosts)
    data: dict[str, Any] = {
        "units": units,
        "workers": workers,
        "checked": [[f"{n}@{u}" for n, u in slots] for slots in hosts],
        "fragmentation": frag.to_dict(),
    }
    if args.add:
        add = {n: _int(v, f"add {n}", minimum=0) for n, v in _pairs([args.add], "add").items()}
        placed = place_incremental(units, workers, hosts, add)
        after = fleet_fragmentation(units, workers, [list(s) for s in placed.hosts])
        data["incremental"] = placed.to_dict()
        data["fragmentation_after"] = after.to_dict()
    return data, cli_place_text.render_check(data)
