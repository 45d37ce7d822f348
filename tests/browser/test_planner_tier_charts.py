"""The run view's SLO planner and KV tier charts in the browser: a fleet config with
each is saved from the page, a shortened run plays, and the chart fills with the
run's figures, legible and within the page at 1280 and 800 px."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from browser_helpers import ExampleReview, LiveServer, screenshot_path, wait_for_page
from test_mechanism_charts import CHART_DATA, NO_OVERFLOW, SAVE_FLEET, WIDE, _fleet_id, _play

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PRESETS = Path(__file__).resolve().parents[2] / "emulator" / "scenario" / "presets"

# Each preset: the overrides that shorten it, the charts its run must fill, and what
# its totals line names.
CASES = {
    "planner-seasonal-diurnal": ("duration_s=900", ["autoscale_workers", "planner_looks"], "worker-s"),
    "mooncake-dram-tier": ("duration_s=90", ["tier_hit", "tier_load"], "cpu load time"),
}

PLANNER_POINTS = "() => Number(document.querySelector('.run-view [data-chart=planner_looks]').dataset.points || 0)"


@pytest.mark.parametrize("preset", list(CASES))
def test_it_draws_the_planner_and_tier_charts(
    preset: str, dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    overrides, charts, named = CASES[preset]
    page = signed_in("alice")
    page.goto(dashboard.url + example_review.path)
    toml = (PRESETS / f"{preset}.toml").read_text("utf-8")
    status, body = page.evaluate(SAVE_FLEET, [_fleet_id(example_review), toml])
    assert status == 200, body
    _play(page, dashboard, example_review, overrides)
    if "planner_looks" in charts:
        # Drawn from the summary once the run is done: one point per look per series
        # of both pools (900 s at a look every 15 s).
        wait_for_page(page, f"() => ({PLANNER_POINTS})() >= 2 * 60", timeout=20000)
        data = page.evaluate(CHART_DATA, "planner_looks")
        assert data is not None and data["traces"] >= 4 and data["values"] >= 4 * 60, data
        assert data["yTitle"] == "requests/s"
        shown = [c for c in charts if c != "planner_looks"]
    else:
        shown = charts
    wait_for_page(page, "(keys) => keys.every((k) => (document.querySelector('.run-view .mechanisms')"
                        ".dataset.charts || '').split(' ').includes(k))", arg=shown, timeout=20000)
    for chart in shown:
        data = page.evaluate(CHART_DATA, chart)
        assert data is not None and data["traces"] >= 1 and data["values"] > 5, (chart, data)
        assert data["yTitle"], chart
    if preset == "planner-seasonal-diurnal":
        # Both pools' decisions, at their exact times from the summary, one mark each.
        caption = page.inner_text(".run-view .scale-events caption")
        assert "exact times" in caption, caption
        rows = page.query_selector_all(".run-view .scale-events tbody tr")
        reasons = [r.inner_text() for r in rows]
        assert any("pool prefill:" in r for r in reasons) and any("pool decode:" in r for r in reasons)
        assert page.evaluate(CHART_DATA, "autoscale_workers")["shapes"] == len(rows)
        # The pools observe the same arrivals and, with one predictor and lead, predict
        # the same: those series are drawn once, naming both; capacities differ.
        names = page.evaluate("() => document.querySelector('.run-view [data-chart=planner_looks]').data.map((t) => t.name)")
        assert names[:2] == ["observed (pool prefill, pool decode)", "predicted (pool prefill, pool decode)"], names
        assert len(names) == 4, names
    if preset == "mooncake-dram-tier":
        # Refusals come in bursts: their predicted TTFT is not joined across frames without any.
        refused = page.evaluate("() => document.querySelector('.run-view [data-chart=admission_ttft]').data"
                                ".map((t) => [t.name, t.mode, t.connectgaps])")
        assert ["refused, predicted", "lines+markers", False] in refused, refused
    totals = " ".join(t.inner_text() for t in page.query_selector_all(".run-view .mech-section:not([hidden]) .mech-totals"))
    assert named in totals, totals

    mechanisms = page.query_selector(".run-view .mechanisms")
    for width in (1280, 800):
        page.set_viewport_size({"width": width, "height": 900})
        try:
            wait_for_page(page, NO_OVERFLOW, timeout=5000)
        except AssertionError:
            raise AssertionError(f"overflow at {width} px: {page.evaluate(WIDE)}") from None
        page.wait_for_timeout(300)
        for chart in charts:
            assert page.evaluate(CHART_DATA, chart)["width"] <= width
        mechanisms.scroll_into_view_if_needed()
        mechanisms.screenshot(path=str(screenshot_path(f"mechanisms-{preset}-{width}")))
