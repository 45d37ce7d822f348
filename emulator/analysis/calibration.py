"""Calibration: the continuous worker's linear step-time coefficients fitted to
measured step times.

The continuous worker's step lasts (``WorkerSpec``)

    step_base_s + prefill_token_s * prefill tokens + prefill_attn_s * sum chunk^2
    + decode_seq_s * decoding sequences + kv_token_s * their context tokens

Measurements come as CSV in SplitwiseSim's ``perf_model.csv`` format (``model,
hardware, prompt_size, batch_size, token_size, prompt_time, token_time,
tensor_parallel``; times in ms). Each row gives two points:

* a *prompt* point: one prefill step of ``batch_size`` prompts of ``prompt_size``
  tokens (``prompt_time``): ``B P`` prefill tokens and ``B P^2`` of attention;
* a *token* point: one decode step of ``batch_size`` sequences at the mean context
  ``prompt_size + token_size / 2`` (``token_time``).

Rows of the same configuration (repeats, and the prompt step measured again with each
output length) are averaged into one point. The fit is non-negative least squares on
the *relative* error (each point weighted by 1 / measured), so a 30 ms decode step
counts as much as a 3 s prefill. A point that a fit made without it misses by more
than a factor ``OUTLIER_RATIO`` (and by more than ``OUTLIER_FACTOR`` times the median
error of the rest) is reported as an outlier and left out of the fit (worst first, one
at a time, at most one point in ``MAX_OUTLIER_SHARE``), so a mislabelled measurement
does not bend the coefficients; ``keep_outliers`` fits every point instead.

A linear step model is a fit to these measurements, not a physical model of the GPU:
it holds near the sizes it was fitted on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from emulator.analysis.nnls import nnls
from emulator.scenario.measurements import (  # re-exported: the reading half of calibration
    DATA,
    GROUPING,
    MAX_BYTES,
    NAMED_MEASUREMENTS,
    REQUIRED,
    CalibrationError,
    Group,
    Point,
    read_groups,
    resolve_measurements,
    select,
)

__all__ = [
    "DATA", "GROUPING", "MAX_BYTES", "NAMED_MEASUREMENTS", "REQUIRED", "CalibrationError", "Fit", "Group",
    "Point", "fit", "read_groups", "resolve_measurements", "select",
]

COEFFICIENTS = ("step_base_s", "prefill_token_s", "decode_seq_s", "kv_token_s")
ATTENTION = "prefill_attn_s"
OUTLIER_FACTOR = 5.0
#: An outlier is missed by more than this factor (either way) by a fit made without it.
OUTLIER_RATIO = 2.0
#: At most one point in this many is set aside; beyond that the model misfits.
MAX_OUTLIER_SHARE = 10


@dataclass
class Fit:
    """The fitted coefficients of one group and every point's error."""

    group: Group
    coefficients: dict[str, float]
    fitted_s: list[float]
    outliers: list[int] = field(default_factory=list)  # indexes of points left out

    def errors(self) -> list[float]:
        """Relative error of each point: fitted / measured - 1."""
        return [f / p.measured_s - 1.0 for f, p in zip(self.fitted_s, self.group.points, strict=True)]

    def fitted_errors(self) -> np.ndarray:
        """Absolute relative errors of the points the fit used (not the outliers)."""
        errs = np.abs(np.array(self.errors()))
        keep = np.ones(errs.size, dtype=bool)
        keep[self.outliers] = False
        return errs[keep]

    def median_error(self) -> float:
        """Median absolute relative error over the fitted points."""
        return float(np.median(self.fitted_errors()))

    def max_error(self) -> float:
        """Largest absolute relative error over the fitted points."""
        return float(self.fitted_errors().max())

    def worker_toml(self) -> str:
        """The ``[worker]`` block to paste into a scenario (4 significant digits)."""
        lines = ["[worker]", 'batching = "continuous"']
        for name, value in self.coefficients.items():
            lines.append(f"{name} = {_float(value)}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict of the fit, its points and the TOML."""
        g = self.group
        return {
            "model": g.model,
            "hardware": g.hardware,
            "tensor_parallel": g.tp,
            "coefficients": self.coefficients,
            "median_error": self.median_error(),
            "max_error": self.max_error(),
            "points": [
                {
                    "kind": p.kind, "prompt_size": p.prompt_size, "batch_size": p.batch_size,
                    "token_size": p.token_size, "repeats": p.repeats, "spread": p.spread,
                    "measured_s": p.measured_s, "fitted_s": f, "error": e,
                    "outlier": i in self.outliers,
                }
                for i, (p, f, e) in enumerate(
                    zip(g.points, self.fitted_s, self.errors(), strict=True)
                )
            ],
            "worker_toml": self.worker_toml(),
        }


def _float(value: float) -> str:
    """A TOML float with 4 significant digits (``2.512e-05``, ``0.0``)."""
    if value == 0:
        return "0.0"
    text = f"{value:.4g}"
    return text if any(c in text for c in ".e") else text + ".0"


# -- fitting ---------------------------------------------------------------------------


def fit(group: Group, *, attention: bool = False, keep_outliers: bool = False) -> Fit:
    """Fit the step coefficients to ``group``'s points (see the module docstring)."""
    names = (*COEFFICIENTS, ATTENTION) if attention else COEFFICIENTS
    a = np.array([p.features() for p in group.points])[:, : len(names)]
    y = np.array([p.measured_s for p in group.points])
    keep = np.ones(y.size, dtype=bool)
    x = _relative_nnls(a, y, keep)
    # A point is judged by a fit made without it (its leave-one-out miss): a relative
    # fit bends so far towards one mislabelled point that, judged by the fit it bent,
    # the points it pushed away look worse than it does. Worst first, one at a time.
    for _ in range(0 if keep_outliers else y.size // MAX_OUTLIER_SHARE):
        current = np.abs(np.log(np.maximum(a @ x, 1e-300) / y))
        limit = max(math.log(OUTLIER_RATIO), OUTLIER_FACTOR * float(np.median(current[keep])))
        worst, worst_miss = -1, 0.0
        for i in np.flatnonzero(keep):
            without = keep.copy()
            without[i] = False
            predicted = float(a[i] @ _relative_nnls(a, y, without))
            miss = abs(math.log(max(predicted, 1e-300) / y[i]))
            if miss > worst_miss:
                worst, worst_miss = int(i), miss
        if worst_miss <= limit:
            break
        keep[worst] = False
        x = _relative_nnls(a, y, keep)
    outliers = [int(i) for i in np.flatnonzero(~keep)]
    coefficients = {n: float(v) for n, v in zip(names, x, strict=True)}
    return Fit(group, coefficients, [float(v) for v in a @ x], outliers)


def _relative_nnls(a: np.ndarray, y: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Coefficients minimising the squared relative error over the kept points."""
    return nnls(a[keep] / y[keep, None], np.ones(int(keep.sum())))
