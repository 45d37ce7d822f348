"""The three step models side by side on one set of step times: how well the linear
model, the roofline and a table each reproduce them.

* **linear**: the continuous worker's coefficients (step_base_s, prefill_token_s,
  decode_seq_s, kv_token_s, prefill_attn_s) by non-negative least squares on the
  relative error, as ``calibrate`` fits them;
* **roofline**: the catalog's physics of the model on its GPUs (with the collectives of
  tensor parallelism), at the bandwidth and compute efficiencies (mbu, mfu) that fit
  best, searched on a grid of 0.025;
* **table**: the piecewise fit of ``emulator.scenario.step_table``.

Each is judged by the median and the largest absolute relative error over the steps.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import Any

import numpy as np

from emulator.analysis.nnls import nnls
from emulator.scenario.hardware import Roofline
from emulator.scenario.step_table import StepRow, fit_table

__all__ = ["EFFICIENCY_GRID", "compare", "linear_fit", "roofline_fit"]

#: The efficiencies the roofline fit tries: 0.1 to 1 in steps of 0.025.
EFFICIENCY_GRID = np.round(np.arange(0.1, 1.0001, 0.025), 3)
LINEAR = ("step_base_s", "prefill_token_s", "decode_seq_s", "kv_token_s", "prefill_attn_s")


def _columns(rows: list[StepRow]) -> dict[str, np.ndarray]:
    return {
        "n": np.array([r.n_dec for r in rows], dtype=float),
        "ctx": np.array([r.sum_ctx for r in rows]),
        "p": np.array([r.prefill_tokens for r in rows], dtype=float),
        "attn": np.array([r.sum_chunk_attn for r in rows]),
        "read": np.array([r.kv_read_tokens for r in rows]),
        "t": np.array([r.t_s for r in rows]),
    }


def _errors(predicted: np.ndarray, measured: np.ndarray) -> dict[str, float]:
    e = np.abs(predicted / measured - 1)
    return {"median_error": float(np.median(e)), "max_error": float(e.max())}


def linear_fit(rows: list[StepRow]) -> tuple[dict[str, float], np.ndarray]:
    """The linear coefficients and each step's fitted time."""
    c = _columns(rows)
    a = np.column_stack([np.ones_like(c["t"]), c["p"], c["n"], c["ctx"], c["attn"]])
    scale = np.maximum(np.abs(a).max(axis=0), 1e-300)
    x = nnls(a / scale / c["t"][:, None], np.ones(len(rows))) / scale
    return dict(zip(LINEAR, (float(v) for v in x), strict=True)), a @ x


def roofline_fit(rows: list[StepRow], roof: Roofline) -> tuple[dict[str, Any], np.ndarray]:
    """The (mbu, mfu) of the grid whose roofline misses the steps least (median error),
    and each step's time under it."""
    c = _columns(rows)
    tokens = c["n"] + c["p"]
    memory = float(roof.weight_bytes) + float(roof.kv_bytes_per_token) * c["read"]
    flops = 2 * float(roof.shape.active_params_b) * 1e9 * tokens
    extra = float(roof.fixed_step_s) + float(roof.comm_token_s) * tokens
    bandwidth = roof.units * float(roof.gpu.bytes_per_s)
    compute = roof.units * float(roof.gpu.flops)
    best: tuple[float, float, float] | None = None
    for mbu in EFFICIENCY_GRID:
        mem_t = memory / (bandwidth * mbu)
        for mfu in EFFICIENCY_GRID:
            predicted = np.maximum(mem_t, flops / (compute * mfu)) + extra
            median = float(np.median(np.abs(predicted / c["t"] - 1)))
            if best is None or median < best[0]:
                best = (median, float(mbu), float(mfu))
    assert best is not None
    _, mbu, mfu = best
    fitted = replace(roof, mbu=Fraction(str(mbu)), mfu=Fraction(str(mfu)))
    predicted = np.maximum(memory / (bandwidth * mbu), flops / (compute * mfu)) + extra
    return {
        "gpu": roof.gpu.name, "model": roof.shape.name, "units": roof.units, "mbu": mbu, "mfu": mfu,
        "communication": fitted.communicates,
        "collectives_ms": float(fitted.fixed_step_s) * 1e3,
    }, predicted


def compare(rows: list[StepRow], roof: Roofline | None, source: str) -> dict[str, Any]:
    """The three fits of ``rows`` (the roofline only when ``roof`` is given): their
    errors, their parameters and each step's time under each."""
    measured = _columns(rows)["t"]
    coefficients, linear = linear_fit(rows)
    table = fit_table(rows, source)
    table_s = np.array([table.step_s(r.n_dec, r.sum_ctx, r.prefill_tokens, r.sum_chunk_attn) for r in rows])
    out: dict[str, Any] = {
        "steps": len(rows),
        "linear": {**_errors(linear, measured), "coefficients": coefficients},
        "table": {**_errors(table_s, measured), "knots": len(table.n_knots) + len(table.p_knots)},
        "roofline": None,
        "points": [{"linear_s": float(a), "table_s": float(b)} for a, b in zip(linear, table_s, strict=True)],
    }
    if roof is not None:
        params, roof_s = roofline_fit(rows, roof)
        out["roofline"] = {**_errors(roof_s, measured), **params}
        for point, value in zip(out["points"], roof_s, strict=True):
            point["roofline_s"] = float(value)
    return out
