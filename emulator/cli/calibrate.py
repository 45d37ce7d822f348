"""``python -m emulator calibrate MEASUREMENTS.csv|NAME [--model M --hardware H --tp N]
[--prefill-attn] [--keep-outliers] [--json]``: fit the continuous worker's step-time
coefficients to measured step times.

Prints, per model / hardware / tensor-parallel group, each point's measured and fitted
step time and its error, the median and largest error, the outliers left out of the
fit, the three step models (linear, roofline, table) side by side, and the ``[worker]``
TOML to paste. A file with several groups and no filter has each group fitted on its
own. A bad file or filter is one line and exit status 2.

A step-time table (the columns ``n_dec, sum_ctx, prefill_tokens, sum_chunk_attn, t_ms``,
such as the shipped ``vidur-llama2-70b-h100-tp4``) is compared the same way; its
roofline needs the catalog names of what it was measured on: ``--gpu``, ``--arch`` and
``--tp``.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emulator.analysis.calibration import (
    NAMED_MEASUREMENTS,
    fit,
    read_groups,
    resolve_measurements,
    select,
)
from emulator.analysis.roofline_gap import floors, roofline_for
from emulator.analysis.step_fits import compare
from emulator.scenario import ScenarioError
from emulator.scenario.hardware import GPUS, MODEL_SHAPES, Roofline
from emulator.scenario.step_table import NAMED_TABLES, STEP_COLUMNS, group_rows, read_step_rows

if TYPE_CHECKING:
    from emulator.analysis.calibration import Fit

__all__ = ["register", "render_text", "run"]

CAVEAT = (
    "A linear step model is a fit to these measurements, not a physical model of the "
    "GPU: trust it near the prompt sizes, batch sizes and contexts it was fitted on."
)


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``calibrate`` subcommand to an argparse subparsers object."""

    parser = subparsers.add_parser(
        "calibrate",
        help="fit the continuous worker's step-time coefficients to measured step times",
        description="Non-negative least squares on relative error, from a SplitwiseSim-style "
        f"CSV of measured prompt and token times (or a named set: {', '.join(NAMED_MEASUREMENTS)}).",
    )
    parser.add_argument("measurements", metavar="MEASUREMENTS.csv|NAME",
                        help="a CSV of measured step times or a named measurement set")
    parser.add_argument("--model", help="fit only the rows of this model")
    parser.add_argument("--hardware", help="fit only the rows of this hardware")
    parser.add_argument("--tp", type=int, help="fit only the rows at this tensor parallelism")
    parser.add_argument("--prefill-attn", action="store_true",
                        help="also fit prefill_attn_s (attention cost of a prompt, per token squared)")
    parser.add_argument("--keep-outliers", action="store_true",
                        help="fit every point, even those a fit without them misses by over 2x")
    parser.add_argument("--gpu", help="a step-time table's GPU, by its catalog name (for the roofline)")
    parser.add_argument("--arch", help="a step-time table's model, by its catalog name (for the roofline)")
    parser.add_argument("--json", action="store_true", help="print the fits as JSON")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Read, fit and print; a bad file or filter is one line on stderr and status 2."""

    try:
        if _is_step_table(args.measurements):
            return _run_table(args)
        source = resolve_measurements(args.measurements).name
        groups = select(
            read_groups(args.measurements), model=args.model, hardware=args.hardware, tp=args.tp
        )
    except ScenarioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    fits = [fit(g, attention=args.prefill_attn, keep_outliers=args.keep_outliers) for g in groups]
    data = {"source": source, "note": CAVEAT, "fits": [_with_roofline(f) for f in fits]}
    print(json.dumps(data, indent=2) if args.json else render_text(data))
    return 0


def _is_step_table(name_or_path: str) -> bool:
    """Whether the source is a step-time table rather than a calibration CSV."""

    if name_or_path in NAMED_TABLES:
        return True
    path = Path(name_or_path).expanduser()
    if not path.is_file() or path.suffix == ".gz":
        return False
    with path.open(encoding="utf-8-sig", errors="replace") as f:
        header = [h.strip() for h in next(csv.reader(f), [])]
    return all(c in header for c in STEP_COLUMNS)


def _run_table(args: argparse.Namespace) -> int:
    """The three step models on a step-time table."""

    roof = None
    if args.gpu or args.arch or args.tp:
        if args.gpu not in GPUS or args.arch not in MODEL_SHAPES or not args.tp:
            raise ScenarioError(
                "--gpu, --arch and --tp", "the roofline needs all three, by catalog name",
                f"GPUs: {', '.join(GPUS)}; models: {', '.join(MODEL_SHAPES)}",
            )
        roof = Roofline(GPUS[args.gpu], MODEL_SHAPES[args.arch], args.tp, Fraction(2), Fraction(9, 10))
    models = compare(read_step_rows(args.measurements), roof, args.measurements)
    if args.json:
        print(json.dumps({"source": args.measurements, "models": models}, indent=2))
        return 0
    print(f"== {args.measurements}: {models['steps']} steps ==")
    print("\n".join(_models_text(models)))
    if roof is None:
        print("(give --gpu, --arch and --tp for the roofline's column)")
    return 0


def render_text(data: dict[str, Any]) -> str:
    """Each group's points, errors, outliers and TOML; a summary when there are several."""
    fits = data["fits"]
    lines: list[str] = []
    if len(fits) > 1:
        lines.append(
            f"{data['source']} holds {len(fits)} groups (model, hardware, tensor parallelism); "
            "each is fitted on its own. Pick one with --model, --hardware and --tp."
        )
        lines.append("")
    for f in fits:
        lines.extend(_group_text(data["source"], f))
        lines.append("")
    if len(fits) > 1:
        lines.append(f"{'group':<40}{'median':>8}{'max':>8}  outliers")
        for f in fits:
            name = f"{f['model']} {f['hardware']} tp {f['tensor_parallel']}"
            out = sum(p["outlier"] for p in f["points"])
            lines.append(f"{name:<40}{f['median_error']:>8.1%}{f['max_error']:>8.1%}  {out}")
        lines.append("")
    lines.append(data["note"])
    return "\n".join(lines)


def _group_text(source: str, f: dict[str, Any]) -> list[str]:
    points = f["points"]
    rows = sum(p["repeats"] for p in points if p["kind"] == "token")
    lines = [
        f"== {f['model']} on {f['hardware']} tp {f['tensor_parallel']} ({source}: {rows} rows, "
        f"{len(points)} points; non-negative least squares on relative error) ==",
        f"{'point':<28}{'rows':>5}{'measured_ms':>13}{'fitted_ms':>12}{'error':>9}",
    ]
    for p in points:
        mark = "  outlier, not fitted" if p["outlier"] else ""
        lines.append(
            f"{_label(p):<28}{p['repeats']:>5}{p['measured_s'] * 1e3:>13.2f}"
            f"{p['fitted_s'] * 1e3:>12.2f}{p['error']:>+9.1%}{mark}"
        )
    fitted = sum(not p["outlier"] for p in points)
    lines.append(
        f"median error {f['median_error']:.1%}, max {f['max_error']:.1%} "
        f"(absolute, over the {fitted} fitted points)"
    )
    outliers = [p for p in points if p["outlier"]]
    if outliers:
        lines.append(
            f"outliers ({len(outliers)}): {', '.join(_label(p) for p in outliers)}; a fit made "
            "without the point misses it by more than 2x, so it is left out (see --keep-outliers)"
        )
    gap = f.get("roofline")
    if gap is not None:
        lines.append(
            f"pure roofline ({gap['gpu']} x {f['tensor_parallel']}, mbu = mfu = 1): the measured "
            f"steps take a median {gap['median_ratio']:.2f}x its floor (prefill "
            f"{gap['prompt_median_ratio']:.2f}x, decode {gap['token_median_ratio']:.2f}x); "
            "points under 1x cannot be steps of this model on this hardware"
        )
    lines.extend(_models_text(f["models"]))
    lines.append("")
    lines.extend(f["worker_toml"].splitlines())
    return lines


def _models_text(models: dict[str, Any]) -> list[str]:
    """The three step models side by side: their errors and what each was fitted to."""
    lines = [f"the three step models on these {models['steps']} steps:",
             f"  {'model':<10}{'median':>8}{'max':>8}  fitted"]
    linear = models["linear"]
    lines.append(f"  {'linear':<10}{linear['median_error']:>8.1%}{linear['max_error']:>8.1%}  "
                 "non-negative least squares, attention included")
    roof = models["roofline"]
    if roof is None:
        lines.append(f"  {'roofline':<10}{'—':>8}{'—':>8}  no catalog GPU and model for these steps")
    else:
        comm = (f"with {roof['collectives_ms']:.1f} ms of collectives a step" if roof["communication"]
                else "no communication")
        lines.append(f"  {'roofline':<10}{roof['median_error']:>8.1%}{roof['max_error']:>8.1%}  "
                     f"{roof['model']} on {roof['units']} x {roof['gpu']}, mbu {roof['mbu']:g}, mfu {roof['mfu']:g}, {comm}")
    table = models["table"]
    lines.append(f"  {'table':<10}{table['median_error']:>8.1%}{table['max_error']:>8.1%}  "
                 f"piecewise over decoders and prefill tokens, {table['knots']} knots "
                 '(step_model = "table")')
    return lines


def _with_roofline(f: Fit) -> dict[str, Any]:
    """The fit's dict, with each point's pure-roofline floor and the medians of
    measured / floor when the catalog knows the model and the hardware."""
    # numpy is heavy; only the roofline-gap fit needs it
    import numpy as np


    out = f.to_dict()
    models = compare(group_rows(f.group), roofline_for(f.group, communication=True), f.group.name())
    for point, predicted in zip(out["points"], models.pop("points"), strict=True):
        point.update(predicted)
    out["models"] = models
    group_floors = floors(f.group)
    if group_floors is None:
        out["roofline"] = None
        return out
    ratios: dict[str, list[float]] = {"prompt": [], "token": []}
    for point, floor in zip(out["points"], group_floors, strict=True):
        point["roofline_s"] = floor
        ratios[point["kind"]].append(point["measured_s"] / floor)
    both = ratios["prompt"] + ratios["token"]
    roofline = roofline_for(f.group)
    assert roofline is not None
    out["roofline"] = {
        "gpu": roofline.gpu.name,
        "median_ratio": float(np.median(both)),
        "prompt_median_ratio": float(np.median(ratios["prompt"])) if ratios["prompt"] else None,
        "token_median_ratio": float(np.median(ratios["token"])) if ratios["token"] else None,
    }
    return out


def _label(p: dict[str, Any]) -> str:
    base = f"{p['kind']:<6} P={p['prompt_size']} B={p['batch_size']}"
    return base if p["token_size"] is None else f"{base} T={p['token_size']}"
