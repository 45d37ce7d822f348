"""The seed's system keeps its exact results: every recorded golden run is replayed and
compared field by field (``tests/emulator/golden/record.py`` says what was recorded)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

GOLDEN = Path(__file__).resolve().parent / "golden"
sys.path.insert(0, str(GOLDEN))

import record  # noqa: E402

SUMMARIES = sorted(GOLDEN.glob("summary-*.json"))


def _load(path: Path) -> Any:
    return json.loads(path.read_text())


def assert_keeps(got: Any, recorded: Any, where: str = "") -> None:
    """Every recorded field is present in ``got`` and equal to the letter; fields added
    since the recording (new metrics) are allowed."""
    if isinstance(recorded, dict):
        assert isinstance(got, dict), where
        for key, value in recorded.items():
            assert key in got, f"{where}.{key} is missing"
            assert_keeps(got[key], value, f"{where}.{key}")
    else:
        assert got == recorded, f"{where}: {got!r} != recorded {recorded!r}"


def _preset_and_seed(path: Path) -> tuple[str, int]:
    stem = path.stem.removeprefix("summary-")
    name, _, seed = stem.rpartition("-seed")
    return name, int(seed)


def test_it_has_goldens_for_every_seed_preset_and_both_seeds() -> None:
    names = {_preset_and_seed(p)[0] for p in SUMMARIES}
    assert len(SUMMARIES) == 2 * len(names) >= 14
    assert {"doc-as-written", "peak-sized", "round-robin-vs-pull", "retry-storm"} <= names


@pytest.mark.parametrize("path", SUMMARIES, ids=lambda p: p.stem)
def test_it_gives_each_preset_its_recorded_summary(path: Path) -> None:
    name, seed = _preset_and_seed(path)
    summary, frames = record.run_variant(name, (), (), seed)
    assert_keeps(record.summary_dict(summary), _load(path), "summary")
    recorded = GOLDEN / f"frames-{name}-seed{seed}.json"
    if recorded.exists():
        expected = _load(recorded)
        assert len(frames) == len(expected)
        for frame, theirs in zip(frames, expected, strict=True):
            assert_keeps(frame.to_dict(), theirs, f"frame {theirs['i']}")


@pytest.mark.parametrize("variant", record.VARIANTS, ids=lambda v: v[0])
def test_it_gives_each_variant_its_recorded_summary_and_frames(variant: Any) -> None:
    name, preset, overrides, commands = variant
    summary, frames = record.run_variant(preset, overrides, commands, 1)
    expected = _load(GOLDEN / f"variant-{name}.json")
    assert_keeps(record.summary_dict(summary), expected["summary"], "summary")
    assert len(frames) == len(expected["frames"])
    for frame, theirs in zip(frames, expected["frames"], strict=True):
        assert_keeps(frame.to_dict(), theirs, f"frame {theirs['i']}")


def test_it_notices_a_changed_figure() -> None:
    recorded = {"m": {"ok": [1, 2]}, "latency_s": {"p50": 1.5}}
    assert_keeps({"m": {"ok": [1, 2], "new": [0]}, "latency_s": {"p50": 1.5}}, recorded)
    with pytest.raises(AssertionError):
        assert_keeps({"m": {"ok": [1, 3]}, "latency_s": {"p50": 1.5}}, recorded)
    with pytest.raises(AssertionError):
        assert_keeps({"m": {"ok": [1, 2]}}, recorded)
