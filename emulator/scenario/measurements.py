"""Measured step times as files: the measurement sets a scenario or ``calibrate`` names,
read into points grouped by model, hardware and tensor parallelism.

Measurements come as CSV in SplitwiseSim's ``perf_model.csv`` format (``model,
hardware, prompt_size, batch_size, token_size, prompt_time, token_time,
tensor_parallel``; times in ms). Each row gives two points: a *prompt* point (one
prefill step of ``batch_size`` prompts of ``prompt_size`` tokens, ``prompt_time``) and
a *token* point (one decode step of ``batch_size`` sequences at the mean context
``prompt_size + token_size / 2``, ``token_time``). Rows of the same configuration are
averaged into one point. ``emulator.analysis.calibration`` fits the linear step model
to them; ``emulator.scenario.step_table`` reads them as a step-time table.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from emulator.scenario.errors import ScenarioError

#: Measurement sets shipped with the package (``emulator/analysis/calibration_data/``,
#: attribution beside).
NAMED_MEASUREMENTS: dict[str, str] = {
    "splitwise-llama2-70b": "splitwise-llama2-70b.csv",
}
DATA = Path(__file__).resolve().parents[1] / "analysis" / "calibration_data"
REQUIRED = ("prompt_size", "batch_size", "token_size", "prompt_time", "token_time")
GROUPING = ("model", "hardware", "tensor_parallel")
MAX_BYTES = 64 * 1024 * 1024


class CalibrationError(ScenarioError):
    """A measurement file or a filter a user can fix (one line: where, what, the fix)."""


@dataclass(frozen=True)
class Point:
    """One measured step: its kind, configuration, mean measured time and how many
    rows it averages."""

    kind: str  # "prompt" or "token"
    prompt_size: int
    batch_size: int
    token_size: int | None  # None for a prompt point
    measured_s: float
    repeats: int
    spread: float  # (max - min) / mean of its repeats

    def features(self) -> tuple[float, float, float, float, float]:
        """Its column of the design matrix: 1, prefill tokens, decoding sequences,
        context tokens, and attention (sum of chunk^2)."""
        b, p = float(self.batch_size), float(self.prompt_size)
        if self.kind == "prompt":
            return (1.0, b * p, 0.0, 0.0, b * p * p)
        assert self.token_size is not None
        return (1.0, 0.0, b, b * (p + self.token_size / 2.0), 0.0)

    def label(self) -> str:
        """``prompt P=512 B=8`` or ``token P=512 B=8 T=128``."""
        base = f"{self.kind:<6} P={self.prompt_size} B={self.batch_size}"
        return base if self.token_size is None else f"{base} T={self.token_size}"


@dataclass(frozen=True)
class Group:
    """The measurements of one model on one hardware at one tensor parallelism."""

    model: str
    hardware: str
    tp: int
    points: tuple[Point, ...]

    def name(self) -> str:
        """``llama2-70b on h100-80gb tp 4``."""
        return f"{self.model} on {self.hardware} tp {self.tp}"


# -- reading ---------------------------------------------------------------------------


def resolve_measurements(name_or_path: str) -> Path:
    """The file of a named measurement set or of a path (a shipped name wins)."""
    if name_or_path in NAMED_MEASUREMENTS:
        return DATA / NAMED_MEASUREMENTS[name_or_path]
    path = Path(name_or_path).expanduser()
    if not path.is_file():
        raise CalibrationError(
            name_or_path, "is no such file and no named measurement set",
            f"give a CSV file or one of: {', '.join(NAMED_MEASUREMENTS)}",
        )
    return path


def read_groups(name_or_path: str) -> list[Group]:
    """The measurements of a file, grouped by model, hardware and tensor parallelism
    (in file order), each row turned into its prompt and token points."""
    path = resolve_measurements(name_or_path)
    name = path.name
    if path.stat().st_size > MAX_BYTES:
        raise CalibrationError(name, f"is over {MAX_BYTES:,} bytes", "give a smaller file")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise CalibrationError(name, "is not UTF-8 text", "save it as UTF-8 CSV") from None
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise CalibrationError(name, "has no measurements", "give a CSV with a header and rows")
    header_no, header_text = lines[0]
    header = [h.strip() for h in next(csv.reader([header_text]))]
    for column in REQUIRED:
        if column not in header:
            raise CalibrationError(
                f"{name} line {header_no}",
                f'missing column "{column}"; the header has {", ".join(header)}',
                f"a measurement file needs {', '.join(REQUIRED)}",
            )
    if len(lines) == 1:
        raise CalibrationError(name, "has no measurements", "add rows under the header")
    raw: dict[tuple[str, str, int], dict[tuple[Any, ...], list[float]]] = {}
    for lineno, line in lines[1:]:
        where = f"{name} line {lineno}"
        fields = next(csv.reader([line]))
        if len(fields) != len(header):
            raise CalibrationError(
                where, f"has {len(fields)} fields, the header has {len(header)}",
                "give every row one value per column",
            )
        row = dict(zip(header, (f.strip() for f in fields), strict=True))
        p, b, t = (_size(where, row, c) for c in ("prompt_size", "batch_size", "token_size"))
        prompt_ms, token_ms = (_time(where, row, c) for c in ("prompt_time", "token_time"))
        tp = _size(where, row, "tensor_parallel") if "tensor_parallel" in row else 1
        key = (row.get("model", "model") or "model", row.get("hardware", "hardware") or "hardware", tp)
        points = raw.setdefault(key, {})
        points.setdefault(("prompt", p, b, None), []).append(prompt_ms / 1000.0)
        points.setdefault(("token", p, b, t), []).append(token_ms / 1000.0)
    groups = []
    for (model, hardware, tp), points in raw.items():
        made = []
        for (kind, p, b, t), values in points.items():
            v = np.array(values)
            made.append(Point(kind, p, b, t, float(v.mean()), v.size, float(np.ptp(v) / v.mean())))
        made.sort(key=lambda q: (q.kind != "prompt", q.batch_size, q.prompt_size, q.token_size or 0))
        groups.append(Group(model, hardware, tp, tuple(made)))
    return groups


def _size(where: str, row: dict[str, str], column: str) -> int:
    text = row[column]
    if re.fullmatch(r"[+-]?\d+", text) is None:
        raise CalibrationError(where, f'{column} "{text}" is not a whole number', f"give {column} as a count, like 512")
    value = int(text)
    if value < 1:
        raise CalibrationError(where, f"{column} {value} is below 1", f"{column} counts tokens or sequences: 1 or more")
    return value


def _time(where: str, row: dict[str, str], column: str) -> float:
    text = row[column]
    try:
        value = float(text)
    except ValueError:
        raise CalibrationError(where, f'{column} "{text}" is not a number', "give milliseconds, like 52.4") from None
    if not (math.isfinite(value) and value > 0):
        raise CalibrationError(where, f"{column} {text} is not a positive time", "give milliseconds above 0")
    return value


def select(
    groups: list[Group], *, model: str | None = None, hardware: str | None = None, tp: int | None = None
) -> list[Group]:
    """The groups matching the filters; none matching is an error listing the groups."""
    chosen = [
        g for g in groups
        if (model is None or g.model == model)
        and (hardware is None or g.hardware == hardware)
        and (tp is None or g.tp == tp)
    ]
    if not chosen:
        asked = ", ".join(
            f"{k} {v}" for k, v in (("--model", model), ("--hardware", hardware), ("--tp", tp)) if v is not None
        )
        listing = "; ".join(f"--model {g.model} --hardware {g.hardware} --tp {g.tp}" for g in groups)
        raise CalibrationError(asked or "filters", "match no measurements", f"the file has {listing}")
    return chosen
