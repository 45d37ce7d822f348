"""``python -m emulator numbers FILE|PRESET [--set KEY=VALUE ...] [--json]``: the numbers
pass on the command line, the same figures the page shows: the headline, every figure
with how it was computed, what each host's loss leaves, and the suggested findings."""

from __future__ import annotations

import argparse
import json
import sys
from fractions import Fraction
from typing import Any

from emulator.analysis.numbers import compute, show
from emulator.analysis.placement import PlacementError
from emulator.scenario import ScenarioError, load_scenario

__all__ = ["register", "render_text", "run"]


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``numbers`` subcommand to an argparse subparsers object."""
    parser = subparsers.add_parser(
        "numbers",
        help="capacity per model and pool, floors, KV check, headroom under each host's loss, explained",
        description="The numbers pass: every figure of the fleet's analysis, with how it was computed.",
    )
    parser.add_argument("scenario", help="scenario file (TOML) or preset name")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
        help="override a key by dotted path, as run takes (repeatable), e.g. --set dispatcher.policy=prefix_aware",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Compute and print the report; a bad scenario is one line on stderr and status 2."""

    try:
        scenario = load_scenario(args.scenario, max_requests=None)
        if args.overrides:
            scenario = scenario.with_overrides(args.overrides, max_requests=None)
        report = compute(scenario)
    except (ScenarioError, PlacementError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(render_text(report.to_dict()))
    return 0


def render_text(data: dict[str, Any]) -> str:
    """The headline, a plain table per model and for the fleet, the host losses, then
    the suggested findings with the figures they stand on."""
    lines = [f"Numbers for {data['scenario']} (exact arithmetic; shown to 3 significant figures)", ""]
    lines.extend(headline_lines(data))
    scopes: list[str] = []
    for fig in data["figures"]:
        if fig["model"] not in scopes:
            scopes.append(fig["model"])
    for scope in scopes:
        figs = [f for f in data["figures"] if f["model"] == scope]
        lines.append("")
        lines.append(f"== {scope} ==")
        width = max(len(f["label"]) for f in figs)
        value_width = max(len(f["display"]) for f in figs)
        for fig in figs:
            lines.append(f"  {fig['label']:<{width}}  {fig['display']:>{value_width}}  {fig['explain']}")
    lines.extend(_losses(data.get("analysis") or {}))
    lines.append("")
    lines.append(f"Suggested findings ({len(data['findings'])})")
    for finding in data["findings"]:
        lines.append(f"  [{finding['severity']}] {finding['title']}")
        lines.append(f"      {finding['body']}")
        if finding.get("figures"):
            lines.append(f"      stands on: {', '.join(finding['figures'])}")
    return "\n".join(lines)


def headline_lines(data: dict[str, Any]) -> list[str]:
    """The numbers pass's headline, one line a slot with the figures beside it."""
    lines = ["Headline"]
    for h in data.get("headline", []):
        beside = "; ".join(f"{b['label']} {b['display']}" for b in h.get("beside", []))
        scope = "" if h["model"] == "fleet" else f" ({h['model']})"
        lines.append(f"  {h['slot']}{scope}: {h['display']}" + (f"  [{beside}]" if beside else ""))
    return lines


def _losses(analysis: dict[str, Any]) -> list[str]:
    """One line per host: what its loss leaves each model, and what it takes down."""
    losses = analysis.get("losses") or []
    if not losses:
        return []


    models = list(analysis.get("models") or {})
    lines = ["", "== each host's loss ==", "  " + f"{'host':<8}" + "".join(f"{m:>16}" for m in models)
             + f"{'fleet at split':>18}  down"]
    for loss in losses:
        cells = "".join(f"{show(Fraction(loss['capacity_qps'][m]).limit_denominator(10**6), 'QPS'):>16}"
                        for m in models)
        fleet = show(Fraction(loss["fleet_qps"]).limit_denominator(10**6), "QPS")
        lines.append(f"  {'host:' + str(loss['host']):<8}{cells}{fleet:>18}  {', '.join(loss['down']) or '-'}")
    return lines
