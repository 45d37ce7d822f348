"""The pure roofline against measured step times: ``calibrate`` says how far above the
physical floor real steps are."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from emulator.analysis.calibration import read_groups, select
from emulator.analysis.roofline_gap import floor_s, floors, roofline_for


def _group(hardware: str, tp: int):
    return select(read_groups("splitwise-llama2-70b"), hardware=hardware, tp=tp)[0]


def test_it_computes_the_floor_of_a_decode_step_from_the_catalog() -> None:
    group = _group("h100-80gb", 4)
    roofline = roofline_for(group)
    assert roofline is not None and roofline.units == 4
    point = next(p for p in group.points if p.kind == "token" and p.batch_size == 1)
    # One sequence: memory-bound, weights plus its context's KV read at full bandwidth.
    context = point.prompt_size + point.token_size / 2
    expected = (roofline.weight_bytes + roofline.kv_bytes_per_token * context) / (4 * roofline.gpu.bytes_per_s)
    assert floor_s(roofline, point) == pytest.approx(float(expected))


def test_real_steps_sit_above_the_floor_except_the_reported_outliers() -> None:
    for hardware, tp in (("h100-80gb", 4), ("a100-80gb", 8)):
        group = _group(hardware, tp)
        ratios = [p.measured_s / f for p, f in zip(group.points, floors(group) or [], strict=True)]
        assert min(ratios) > 1.0, (hardware, tp)
    # The batch-64 prefill of tensor parallelism 2 is "faster than physics": another
    # configuration, the point calibrate reports as an outlier.
    group = _group("h100-80gb", 2)
    below = [p for p, f in zip(group.points, floors(group) or [], strict=True) if p.measured_s < f]
    assert [(p.kind, p.batch_size) for p in below] == [("prompt", 64)]


def test_an_unknown_hardware_has_no_floor() -> None:
    group = _group("h100-80gb", 4)
    assert roofline_for(type(group)(group.model, "tpu-v9", group.tp, group.points)) is None


def test_calibrate_reports_how_far_the_roofline_is() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "emulator", "calibrate", "splitwise-llama2-70b",
         "--hardware", "h100-80gb", "--tp", "4", "--json"],
        capture_output=True, text=True, check=True,
    )
    gap = json.loads(out.stdout)["fits"][0]["roofline"]
    assert gap["gpu"] == "H100-SXM-80GB" and 2.0 < gap["median_ratio"] < 4.0
