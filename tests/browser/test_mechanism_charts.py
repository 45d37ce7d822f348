"""The run view's mechanism charts in the browser: a fleet config using prefix
caching, disaggregated pools or an autoscaler is saved through the API from the
page, a shortened run of it plays, and its mechanism's charts fill with data (the
others stay hidden); a run of the doc's plain fleet shows none of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from browser_helpers import ExampleReview, LiveServer, screenshot_path, wait_for_page

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PRESETS = Path(__file__).resolve().parents[2] / "emulator" / "scenario" / "presets"

# Each preset: the overrides that shorten it, and the charts its run must fill.
CASES = {
    "prefix-heavy-chat": ("duration_s=30", ["prefix_hit", "prefill_saved"]),
    "disagg-decode-undersized": ("duration_s=60", ["pool_ttft", "pool_handoff"]),
    "autoscaled-diurnal": ("duration_s=1200; traffic.period_s=2400; sample_s=10; autoscaler.warmup_s=60; "
                           "autoscaler.stabilization_s=120", ["autoscale_workers"]),
    # A split fleet with a pipeline group: the pools' charts and the group's.
    "mooncake-long-context-pipeline": ("duration_s=240", ["pool_ttft", "pool_handoff", "pipeline_ttft",
                                                          "pipeline_count"]),
}
ALL_CHARTS = [chart for _, charts in CASES.values() for chart in charts]

SAVE_FLEET = """async ([id, toml]) => {
  const csrf = document.querySelector('[name=csrfmiddlewaretoken]').value;
  const r = await fetch(`/api/fleets/${id}/`, {method: 'PATCH', credentials: 'same-origin',
    headers: {'Content-Type': 'application/json', 'X-CSRFToken': csrf}, body: JSON.stringify({toml})});
  return [r.status, await r.text()];
}"""

# Per chart: how many traces it has and how many of their points are numbers.
CHART_DATA = """(key) => {
  const d = document.querySelector(`.run-view .mechanisms [data-chart=${key}]`);
  if (!d || d.hidden || !d.data) return null;
  return {traces: d.data.length, values: d.data.reduce((n, t) => n + t.y.filter((v) => typeof v === 'number').length, 0),
          shapes: (d.layout.shapes || []).length, yTitle: d.layout.yaxis.title.text, width: d.getBoundingClientRect().width};
}"""

WIDE = """() => [...document.querySelectorAll('body *')].filter((e) => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
  .slice(0, 8).map((e) => `${e.tagName}.${e.className && e.className.baseVal === undefined ? e.className : ''} ${Math.round(e.getBoundingClientRect().right)}`)"""

NO_OVERFLOW = "document.documentElement.scrollWidth <= document.documentElement.clientWidth"


def _play(page: Any, dashboard: LiveServer, review: ExampleReview, overrides: str, speed: str = "max",
          while_running: str | None = None) -> None:
    """Start a run from the break pass and wait for its end (and for ``while_running``
    to appear in the page before it)."""
    page.goto(dashboard.url + review.path + "#break")
    page.wait_for_selector(".run-view")
    page.select_option(".run-view select[aria-label='Run A speed']", speed)
    page.fill(".run-view input[aria-label='Run A overrides']", overrides)
    page.click(".run-view button:has-text('Start run')")
    if while_running:
        page.wait_for_selector(while_running, timeout=60000)
        assert page.get_attribute(".run-view", "data-status") == "running"
        page.query_selector(".run-view .mechanisms").screenshot(path=str(screenshot_path("mechanisms-live")))
    page.wait_for_selector(".run-view[data-status=done]", timeout=120000)
    page.wait_for_selector(".run-view .summary table")


def _fleet_id(review: ExampleReview) -> int:
    from reviewer.models import ReviewSession

    fleet_id = ReviewSession.objects.get(pk=review.session_id).fleet_config_id
    assert fleet_id is not None
    return fleet_id


@pytest.mark.parametrize("preset", list(CASES))
def test_it_draws_the_mechanisms_a_run_carries(
    preset: str, dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    overrides, charts = CASES[preset]
    page = signed_in("alice")
    page.goto(dashboard.url + example_review.path)
    toml = (PRESETS / f"{preset}.toml").read_text("utf-8")
    status, body = page.evaluate(SAVE_FLEET, [_fleet_id(example_review), toml])
    assert status == 200, body

    if preset == "autoscaled-diurnal":
        # At 100x (about 12 s): while it runs, the events come from the frames, placed in the frame they fell in.
        _play(page, dashboard, example_review, overrides, speed="100",
              while_running=".run-view .scale-events:not([hidden]) caption:has-text('live')")
    else:
        _play(page, dashboard, example_review, overrides)
    wait_for_page(page, "(keys) => keys.every((k) => (document.querySelector('.run-view .mechanisms')"
                        ".dataset.charts || '').split(' ').includes(k))", arg=charts, timeout=20000)
    for chart in charts:
        data = page.evaluate(CHART_DATA, chart)
        assert data is not None and data["traces"] >= 1 and data["values"] > 5, (chart, data)
        assert data["yTitle"], chart  # every y axis names its unit
    # The run's totals for the mechanism, from its summary, with their units.
    totals = page.inner_text(".run-view .mech-section:not([hidden]) .mech-totals")
    assert totals.startswith("Over the run:"), totals
    assert {"prefix-heavy-chat": "tokens", "disagg-decode-undersized": " s,",
            "autoscaled-diurnal": "worker-s", "mooncake-long-context-pipeline": " s,"}[preset] in totals, totals
    for chart in set(ALL_CHARTS) - set(charts):
        assert page.evaluate(CHART_DATA, chart) is None, chart

    if preset == "autoscaled-diurnal":
        rows = page.query_selector_all(".run-view .scale-events tbody tr")
        directions = {r.get_attribute("data-direction") for r in rows}
        assert {"up", "ready", "down", "parked"} <= directions
        # Exact times from the summary, each drawn as a marker on the chart.
        assert "exact times" in page.inner_text(".run-view .scale-events caption")
        assert page.evaluate(CHART_DATA, "autoscale_workers")["shapes"] == len(rows)
        first = rows[0].inner_text()
        assert "30" in first and "down" in first
        # Hovering an event's mark tells the event.
        page.hover(".run-view [data-chart=autoscale_workers] .xy2 .point >> nth=0", force=True)
        # (Two events share t = 30 s, the down and the parking; the unified hover shows one.)
        wait_for_page(page, "document.querySelector('.run-view [data-chart=autoscale_workers] .hoverlayer')"
                            ".textContent.includes(' worker 0: ')", timeout=5000)

    if preset == "prefix-heavy-chat":
        # A mechanism's metric is offered as evidence, with the window of its chart.
        page.select_option(".run-view select[aria-label=Metric]", "prefix_hit_rate")
        page.click(".run-view button:has-text('Attach as evidence')")
        page.wait_for_selector("#ff-evidence:not([hidden])")
        page.fill("#ff-title", "Round-robin routing halves the prefix hit rate")
        page.click("#ff-submit")
        page.wait_for_selector("#panel-break .finding-item:has-text('halves the prefix hit rate')")
        from reviewer.models import Finding

        finding = Finding.objects.get(title="Round-robin routing halves the prefix hit rate")
        assert finding.evidence_metric == "prefix_hit_rate"
        assert finding.evidence_t_to_s > finding.evidence_t_from_s >= 0

    # Legible at 1280 and 800 px, without horizontal overflow.
    mechanisms = page.query_selector(".run-view .mechanisms")
    for width in (1280, 800):
        page.set_viewport_size({"width": width, "height": 900})
        # The charts follow the new width once plotly has resized them.
        try:
            wait_for_page(page, NO_OVERFLOW, timeout=5000)
        except AssertionError:
            raise AssertionError(f"overflow at {width} px: {page.evaluate(WIDE)}") from None
        page.wait_for_timeout(300)
        for chart in charts:
            assert page.evaluate(CHART_DATA, chart)["width"] <= width
        mechanisms.scroll_into_view_if_needed()
        mechanisms.screenshot(path=str(screenshot_path(f"mechanisms-{preset}-{width}")))


def test_a_run_without_the_mechanisms_shows_none_of_their_charts(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    page = signed_in("bob")
    _play(page, dashboard, example_review, "")
    assert int(page.get_attribute(".run-view", "data-frames") or 0) > 0
    assert page.is_hidden(".run-view .mechanisms")
    assert all(page.evaluate(CHART_DATA, chart) is None for chart in ALL_CHARTS)
    assert page.evaluate(NO_OVERFLOW)
    page.set_viewport_size({"width": 800, "height": 900})
    wait_for_page(page, NO_OVERFLOW, timeout=5000)
    page.query_selector(".run-view .heatmap").scroll_into_view_if_needed()
    page.screenshot(path=str(screenshot_path("mechanisms-none-800")))
