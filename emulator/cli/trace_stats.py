"""``python -m emulator trace-stats NAME|PATH [--json]``: what a trace holds.

Count, duration, mean rate, the rate minute by minute (mean, peak and lowest whole
minute, and a sparkline), and the spread of prompt and output lengths. A bad trace is
one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from emulator.analysis.trace_stats import trace_stats
from emulator.scenario import ScenarioError
from emulator.scenario.traces import NAMED_TRACES, load_trace

__all__ = ["register", "render_text", "run"]

# ASCII, so a terminal or pipe of any encoding can print it.
_BARS = " .:-=+*#%@"


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``trace-stats`` subcommand to an argparse subparsers object."""

    parser = subparsers.add_parser(
        "trace-stats",
        help="count, rate over time and length distributions of a trace",
        description="Statistics of a request trace (Azure CSV or JSONL, or a named trace: "
        f"{', '.join(NAMED_TRACES)}).",
    )
    parser.add_argument("trace", metavar="NAME|PATH", help="a named trace or a trace file")
    parser.add_argument("--json", action="store_true", help="print the statistics as JSON")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Read the trace and print its statistics; a bad trace is one line and status 2."""

    try:
        stats = trace_stats(load_trace(args.trace, key="trace"))
    except ScenarioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    data = stats.to_dict()
    print(json.dumps(data, indent=2) if args.json else render_text(data))
    return 0


def render_text(data: dict[str, Any]) -> str:
    """A short report: totals, the rate over time, then one row per length column."""
    rate = data["rate_over_time"]
    mean = "-" if data["mean_qps"] is None else f"{data['mean_qps']:.2f}"
    lines = [
        f"Trace {data['name']}: {data['count']:,} requests over {data['duration_s']:,.1f} s "
        f"({data['duration_s'] / 60:.1f} min), mean rate {mean} requests/s",
        f"rate per whole minute (requests/s): mean {rate['mean_minute_qps']:.2f}, "
        f"peak {rate['peak_minute_qps']:.2f}, lowest {rate['min_minute_qps']:.2f}",
        f"  minute by minute: {_sparkline(rate['per_minute_qps'])}",
        "",
        f"{'tokens':<8}{'mean':>10}{'p50':>10}{'p90':>10}{'p99':>10}{'max':>10}{'min':>10}",
    ]
    for label, key in (("prompt", "prompt_tokens"), ("output", "output_tokens")):
        s = data[key]
        lines.append(
            f"{label:<8}{s['mean']:>10.1f}{s['p50']:>10.0f}{s['p90']:>10.0f}"
            f"{s['p99']:>10.0f}{s['max']:>10,}{s['min']:>10,}"
        )
    if data["models"]:
        lines.append("")
        lines.append("requests per model: " + ", ".join(f"{k} {v:,}" for k, v in data["models"].items()))
    return "\n".join(lines)


def _sparkline(values: list[float]) -> str:
    """One character per value, scaled from 0 to the largest."""
    top = max(values) if values else 0.0
    if top <= 0:
        return "".join(_BARS[0] for _ in values)
    return "".join(_BARS[min(len(_BARS) - 1, round(v / top * (len(_BARS) - 1)))] for v in values)
