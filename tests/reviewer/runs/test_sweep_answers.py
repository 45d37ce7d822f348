"""A sweep that finds no value says why: the target under the latency floor, p99
still falling at the end of the range, growing with the value, or levelling off."""

from __future__ import annotations

from typing import Any

from reviewer.models import RunStatus, Sweep
from reviewer.runs.sweeps import sweep_answer

STATIC = {"worker": {"batch_s": 1.5}, "models": {"small": {"share": 1.0}}}
CONTINUOUS = {"worker": {"batching": "continuous"}, "models": {"chat": {"share": 1.0}}}


def _curve(points: list[tuple[float, float | None]]) -> list[dict[str, Any]]:
    return [{"value": v, "run_id": i, "status": RunStatus.DONE, "p99_s": p, "ok_rate": 1.0, "served_qps": 1.0}
            for i, (v, p) in enumerate(points)]


def _answer(points: list[tuple[float, float | None]], target: float, scenario: dict[str, Any] = STATIC,
            key: str = "hosts[1].count") -> str:
    sweep = Sweep(key=key, values=[v for v, _ in points], target_p99_s=target, scenario=scenario)
    answer = sweep_answer(sweep, _curve(points))
    assert answer is not None
    return answer["text"]


def test_it_names_the_smallest_value_that_meets_the_target() -> None:
    assert _answer([(1, 9.0), (2, 3.0), (3, 2.0)], 3.5) == "hosts[1].count=2 is the smallest value with p99 <= 3.5 s"


def test_a_target_under_the_batch_time_can_never_be_met() -> None:
    text = _answer([(1, 9.0), (2, 3.0), (4, 1.6)], 1.0)
    assert text.startswith("no swept value of hosts[1].count meets p99 <= 1 s")
    assert "below the latency floor of 1.5 s" in text


def test_p99_still_falling_at_the_largest_value_asks_for_larger_values() -> None:
    assert "still falls at the largest value (4.00 s at 4): sweep larger values" in _answer(
        [(1, 30.0), (2, 12.0), (4, 4.0)], 2.0)


def test_p99_levelling_off_above_the_target_says_the_limit_is_elsewhere() -> None:
    text = _answer([(1, 30.0), (2, 3.1), (4, 3.05), (8, 3.04)], 0.5, scenario=CONTINUOUS)
    assert "levels off at about 3.04 s" in text and "the limit is elsewhere" in text


def test_p99_growing_with_the_value_asks_for_smaller_values() -> None:
    text = _answer([(100, 2.5), (200, 5.0), (400, 40.0)], 2.0, key="traffic.qps")
    assert "grows with traffic.qps" in text and "sweep smaller values" in text


def test_no_finished_point_has_no_p99() -> None:
    assert "no point finished" in _answer([(1, None), (2, None)], 2.0)
