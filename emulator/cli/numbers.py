"""``python -m emulator numbers FILE|PRESET [--json]``: the numbers pass on the command line."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["register", "render_text", "run"]


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``numbers`` subcommand to an argparse subparsers object."""
    parser = subparsers.add_parser(
        "numbers",
        help="capacity, workers needed, gap, latency floor and queue growth of a scenario, explained",
        description="The numbers pass: every figure computed exactly from the scenario, with how.",
    )
    parser.add_argument("scenario", help="scenario file (TOML) or preset name")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Compute and print the report; a bad scenario is one line on stderr and status 2."""
    from emulator.analysis.numbers import compute
    from emulator.analysis.placement import PlacementError
    from emulator.scenario import ScenarioError, load_scenario

    try:
        scenario = load_scenario(args.scenario, max_requests=None)
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
    """A plain table per model and for the fleet, then the suggested findings."""
    lines = [f"Numbers for {data['scenario']} (exact arithmetic; shown to 3 significant figures)"]
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
            lines.append(
                f"  {fig['label']:<{width}}  {fig['display']:>{value_width}}  {fig['explain']}"
            )
    lines.append("")
    lines.append(f"Suggested findings ({len(data['findings'])})")
    for finding in data["findings"]:
        lines.append(f"  [{finding['severity']}] {finding['title']}")
        lines.append(f"      {finding['body']}")
    return "\n".join(lines)
