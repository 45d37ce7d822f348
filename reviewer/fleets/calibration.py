"""Calibration on the pages: the emulator's step-time fit of a shipped or an
uploaded measurement file, shaped for a chart and a table.

The fit itself is :mod:`emulator.analysis.calibration`; this module picks the
measurements (a group of the shipped ``splitwise-llama2-70b`` set, or a CSV
uploaded under the ``UPLOAD_MAX_BYTES`` limit and removed once read) and turns
the emulator's one-line errors into ``Invalid``.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.core.files.uploadedfile import UploadedFile

from emulator.analysis.calibration import CalibrationError, fit, read_groups
from emulator.analysis.roofline_gap import roofline_for
from emulator.analysis.step_fits import compare
from emulator.scenario.step_table import group_rows
from reviewer.errors import Invalid
from reviewer.ops.uploads import stage_upload

if TYPE_CHECKING:
    from emulator.analysis.calibration import Group

SHIPPED = "splitwise-llama2-70b"
#: The shipped group shown first: the hardware most readers have in mind.
DEFAULT_GROUP = "llama2-70b:h100-80gb:4"


@dataclass(frozen=True)
class CalibrationResult:
    """A fit (the emulator's ``Fit.to_dict``), where its points came from, and the
    other groups an uploaded file holds."""

    source: str
    group: str
    fit: dict[str, Any]
    other_groups: list[str]
    #: The three step models side by side (``emulator.analysis.step_fits.compare``).
    models: dict[str, Any]

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The points for a table: times in ms, the error in percent, and a label."""
        return [
            {**p, **{f"{k[:-2]}_ms": v * 1000 for k, v in model.items() if k.endswith("_s") and v is not None},
             "measured_ms": p["measured_s"] * 1000, "fitted_ms": p["fitted_s"] * 1000,
             "error_pct": p["error"] * 100,
             "label": f"{p['kind']} P={p['prompt_size']} B={p['batch_size']}"
                      + (f" T={p['token_size']}" if p["token_size"] is not None else "")}
            for p, model in zip(self.fit["points"], self.models["points"], strict=True)
        ]

    @property
    def model_rows(self) -> list[dict[str, Any]]:
        """Linear, roofline and table: each one's errors in percent and what it stands on."""
        m = self.models
        roof = m["roofline"]
        rows = [{"name": "linear", "median_pct": m["linear"]["median_error"] * 100,
                 "max_pct": m["linear"]["max_error"] * 100,
                 "how": "non-negative least squares of the [worker] coefficients, attention included"}]
        if roof is not None:
            comm = (f"with {roof['collectives_ms']:.1f} ms of tensor-parallel collectives a step"
                    if roof["communication"] else "no communication")
            rows.append({"name": "roofline", "median_pct": roof["median_error"] * 100,
                         "max_pct": roof["max_error"] * 100,
                         "how": f"{roof['model']} on {roof['units']} x {roof['gpu']} at the best-fitting "
                                f"mbu {roof['mbu']:g} and mfu {roof['mfu']:g}, {comm}"})
        rows.append({"name": "table", "median_pct": m["table"]["median_error"] * 100,
                     "max_pct": m["table"]["max_error"] * 100,
                     "how": f"piecewise over decoders and prefill tokens ({m['table']['knots']} knots): "
                            'step_model = "table"'})
        return rows

    @property
    def outliers(self) -> list[dict[str, Any]]:
        """The points the fit left out."""
        return [row for row in self.rows if row["outlier"]]

    @property
    def median_error_pct(self) -> float:
        """Median absolute error of the fitted points, in percent."""
        return float(self.fit["median_error"]) * 100

    @property
    def max_error_pct(self) -> float:
        """Largest absolute error of the fitted points, in percent."""
        return float(self.fit["max_error"]) * 100


def group_key(group: Group) -> str:
    """``model:hardware:tp``, the value the page's group choice sends."""
    return f"{group.model}:{group.hardware}:{group.tp}"


@functools.cache
def _shipped_groups() -> tuple[Group, ...]:
    return tuple(read_groups(SHIPPED))


def shipped_group_choices() -> list[tuple[str, str]]:
    """``(key, label)`` of each group of the shipped measurements, in file order."""
    return [(group_key(g), g.name()) for g in _shipped_groups()]


def calibration_fit(*, group: str | None = None, upload: UploadedFile | None = None) -> CalibrationResult:
    """Fit the step coefficients to a shipped group (``group``, a ``group_key``) or to
    an uploaded measurement CSV (its group ``group`` if it has it, else its first)."""

    try:
        if upload is None:
            groups = list(_shipped_groups())
            source = SHIPPED
            chosen = next((g for g in groups if group_key(g) == (group or DEFAULT_GROUP)), None)
            if chosen is None:
                raise Invalid("group", f"group: {group!r} is not in {SHIPPED}; choose one of the list")
        else:
            staged = stage_upload(upload, directory=Path(tempfile.gettempdir()), default_name="measurements.csv")
            try:
                groups = read_groups(str(staged))
            finally:
                shutil.rmtree(staged.parent, ignore_errors=True)
            source = staged.name
            chosen = next((g for g in groups if group_key(g) == group), groups[0])
        result = fit(chosen)
        models = compare(group_rows(chosen), roofline_for(chosen, communication=True), chosen.name())
    except CalibrationError as exc:
        raise Invalid("measurements", f"measurements: {exc}") from None
    return CalibrationResult(
        source=source, group=chosen.name(), fit=result.to_dict(),
        # The shipped groups are all in the page's list already.
        other_groups=[g.name() for g in groups if g is not chosen] if upload is not None else [],
        models=models,
    )
