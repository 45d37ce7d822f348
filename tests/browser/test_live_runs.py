"""The break pass in the browser: a live run's charts and heatmap follow its
frames, and a host killed from the page shows up dead on the heatmap."""

from __future__ import annotations

from typing import Any

import pytest
from browser_helpers import ExampleReview, LiveServer, screenshot, screenshot_path, wait_for_page

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def chart_points(page: Any, chart: str) -> int:
    return page.evaluate(
        "(c) => { const d = document.querySelector(`.run-view [data-chart=${c}]`);"
        " return d && d.data ? d.data.reduce((n, t) => n + t.x.length, 0) : 0; }",
        chart,
    )


def host_cells(page: Any, host: int) -> list[Any]:
    """The heatmap's z values of one host's units (None: free unit)."""
    return page.evaluate("(h) => document.querySelector('.run-view .heatmap').data[0].z[h]", host)


def test_it_streams_a_run_to_charts_and_heatmap_and_shows_a_killed_host(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from reviewer.models import EmulatorRun, Finding

    page = signed_in("alice")
    page.goto(dashboard.url + example_review.path + "#break")
    view = page.wait_for_selector(".run-view")
    # Real time: the run outlasts the test however busy the machine is; it is cancelled at the end.
    page.select_option(".run-view select[aria-label='Run A speed']", "1")
    page.click(".run-view button:has-text('Start run')")
    page.wait_for_selector(".run-view[data-status=running]", timeout=40000)

    # Frames arrive: every chart grows and the heatmap is redrawn per frame.
    wait_for_page(page, "Number(document.querySelector('.run-view .heatmap').dataset.frame) >= 3",
                           timeout=40000)
    first = {chart: chart_points(page, chart) for chart in ("queue", "latency", "outcomes")}
    assert all(points > 0 for points in first.values()), first
    wait_for_page(page, "Number(document.querySelector('.run-view .heatmap').dataset.frame) >= 6")
    assert all(chart_points(page, chart) > first[chart] for chart in first)
    assert all(value is not None and value >= 1 for value in host_cells(page, 2))  # alive
    assert "simulated" in view.inner_text()  # progress: simulated time against duration
    page.evaluate("document.querySelector('.run-view .progress').scrollIntoView({block: 'start'})")
    page.wait_for_timeout(200)
    screenshot(page, "session-break-live")

    # Kill host 2 from the page: its units turn dead on the heatmap.
    page.click(".run-view button[data-command='kill host:2']")
    wait_for_page(page, "document.querySelector('.run-view .heatmap').dataset.deadHosts === '1'",
                           timeout=40000)
    assert all(value == 0 for value in host_cells(page, 2) if value is not None)
    assert all(value >= 1 for value in host_cells(page, 0) if value is not None)
    view.screenshot(path=str(screenshot_path("session-break-host-killed")))
    page.wait_for_selector(".run-events:has-text('kill host:2')")
    run = EmulatorRun.objects.get()
    assert run.commands.filter(command="kill host:2").exists()

    # The visible window of a chart becomes a new finding's evidence.
    page.select_option(".run-view select[aria-label=Metric]", "backlog")
    page.click(".run-view button:has-text('Attach as evidence')")
    page.wait_for_selector("#ff-evidence:not([hidden])")
    assert page.input_value("#ff-pass") == "break"
    page.fill("#ff-title", "Round-robin backlog builds behind busy workers")
    page.click("#ff-submit")
    page.wait_for_selector("#panel-break .finding-item:has-text('Round-robin backlog builds')")
    evidence = Finding.objects.get(title="Round-robin backlog builds behind busy workers")
    assert evidence.evidence_run_id == run.pk and evidence.evidence_metric == "backlog"
    assert evidence.evidence_t_to_s > evidence.evidence_t_from_s >= 0

    # "show" on the finding replays the run zoomed to the window it holds.
    page.click("#panel-break .finding-item:has-text('Round-robin backlog builds') .evidence button")
    wait_for_page(
        page,
        "(w) => { const d = document.querySelector('.run-view [data-chart=queue]');"
        " const r = d && d.layout && d.layout.xaxis.range; return r && r[0] === w[0] && r[1] === w[1]; }",
        arg=[evidence.evidence_t_from_s, evidence.evidence_t_to_s], timeout=20000)

    # Stop the run so the worker is free for the next test.
    page.click(".run-view button:has-text('Cancel')")
    page.wait_for_selector(".run-view[data-status=cancelled]", timeout=40000)


def test_it_compares_two_runs_side_by_side_and_sweeps_the_fleet_size(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    page = signed_in("bob")
    page.goto(dashboard.url + example_review.path + "#break")
    # The suggestion is checked by running the scenario: on the doc's system round
    # robin and pull are alike until the first fault and part after it.
    page.wait_for_selector(".break-advice[data-measured=true]", timeout=60000)
    assert "until the first scheduled fault" in page.inner_text(".break-advice")
    page.click("#runs-panel button:has-text('Compare with policy pull')")
    left, right = page.query_selector_all(".run-view")
    assert right.query_selector("input[aria-label='Run B overrides']").input_value() == ""
    assert right.query_selector("button.chip[data-key='dispatcher.policy'][aria-pressed=true]").inner_text() == "pull"
    assert right.query_selector("input[aria-label='Run B seed']").input_value() == "1"
    for view in (left, right):
        view.query_selector("select").select_option("max")
        view.query_selector("button:has-text('Start run')").click()
    page.wait_for_selector(".run-view[data-status=done] >> nth=1", timeout=120000)
    summaries = [view.query_selector(".summary").inner_text() for view in page.query_selector_all(".run-view")]
    assert all("offered" in s for s in summaries)
    assert summaries[0] != summaries[1]  # round robin and pull differ on the same seed
    assert page.evaluate("document.querySelectorAll('.run-view .heatmap .main-svg').length") >= 2

    # A sweep shows its points done, then its curve and answer.
    page.fill("#sweep-panel input[aria-label='Values']", "2, 4, 6")
    page.click("#sweep-panel button:has-text('Run sweep')")
    page.wait_for_selector("#sweep-panel .status-line:has-text('3 of 3 points done')", timeout=120000)
    page.wait_for_selector("#sweep-panel [data-chart=sweep] .main-svg")
    assert page.get_attribute("#sweep-panel progress", "value") == "3"
