"""The reviewer's pages carried to the end: the doc page and its diffs, evidence that
survives selecting a quote, the break pass's default sweep, mouse controls for what
the keyboard does, the placement pass's answer beside its button, and the export."""

from __future__ import annotations

from typing import Any

import pytest
from browser_helpers import ExampleReview, LiveServer

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_break_passs_default_sweep_starts_on_the_example(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from reviewer.models import Sweep
    from reviewer.runs.sweeps import sweep_cancel

    page = signed_in("alice")
    page.goto(dashboard.url + example_review.path + "#break")
    page.wait_for_selector("#sweep-panel select[aria-label='Key to sweep']")
    # The example's faults kill host 2: with them kept, no default leaves fewer hosts.
    assert page.input_value("#sweep-panel select[aria-label='Key to sweep']") == "hosts[0].count"
    assert page.input_value("#sweep-panel input[aria-label='Values']") == "2, 4, 8, 16"
    page.uncheck("#sweep-panel input[aria-label='Keep the scheduled faults']")
    assert page.input_value("#sweep-panel input[aria-label='Values']") == "1, 2, 4, 8, 16"
    page.check("#sweep-panel input[aria-label='Keep the scheduled faults']")
    page.click("#sweep-panel button:has-text('Run sweep')")
    page.wait_for_selector("#sweep-panel .status-line:has-text('points done')", timeout=30000)
    status = page.inner_text("#sweep-panel .status-line")
    assert "Could not start" not in status and "names no host" not in status, status
    sweep = Sweep.objects.get()
    assert sweep.values == [2, 4, 8, 16]
    sweep_cancel(sweep=sweep, user=example_review.alice)  # nothing more to see; free the worker
