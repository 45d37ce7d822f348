"""The whole-run line of a finding's evidence accounts for every offered request."""

from __future__ import annotations

from reviewer.review.evidence import _summary_text


def test_the_whole_run_line_counts_the_requests_still_in_the_system() -> None:
    summary = {"offered": 130_626, "ok": 8_020, "timed_out": 62_508, "shed": 0, "lost": 4,
               "orphaned": 0, "in_system_end": 60_094, "latency_s": {"p99": 59.5}}
    text = _summary_text(summary)
    assert text == ("130,626 offered, 8,020 ok, 62,508 timed out, 4 lost, 60,094 in the system at the end, "
                    "p99 latency 59.5 s")
    outcomes = 8_020 + 62_508 + 4 + 60_094
    assert outcomes == summary["offered"]  # the line adds up


def test_a_run_that_ended_empty_says_nothing_of_the_system() -> None:
    text = _summary_text({"offered": 10, "ok": 10, "in_system_end": 0})
    assert text == "10 offered, 10 ok"
