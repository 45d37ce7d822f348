"""Every page in the browser: the passes at 1280 px with screenshots, the
session page at 800 px, keyboard reach, and starting a review from home."""

from __future__ import annotations

from typing import Any

import pytest
from browser_helpers import PASSES, ExampleReview, LiveServer, open_pass, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.slow]



def test_it_shows_every_pass_and_saves_a_screenshot_of_each(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    page = signed_in("alice")
    page.goto(dashboard.url + example_review.path)
    page.wait_for_selector("#doc-body mark.finding")
    for key in PASSES:
        open_pass(page, key)
        if key == "trace":
            page.wait_for_selector(".trace-svg .hop[data-hop=response_path]")
        elif key == "rank":
            page.wait_for_selector(".rank-col[data-severity=fix_now] .rank-card")
        screenshot(page, f"session-{key}")
    # The home page too.
    page.goto(dashboard.url + "/")
    screenshot(page, "home")


def test_it_adopts_a_suggested_number_finding_with_one_click(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from reviewer.models import Finding

    page = signed_in("bob")
    page.goto(dashboard.url + example_review.path + "#numbers")
    page.wait_for_selector("#doc-body mark.finding")  # the findings are loaded
    suggestion = page.locator(".suggestion:has(button:has-text('Adopt'))").first
    title = suggestion.locator("strong").inner_text()
    suggestion.locator("button:has-text('Adopt')").click()
    page.wait_for_selector(f"#panel-numbers .finding-item:has-text({title!r})")
    assert Finding.objects.filter(title=title, review_pass="numbers", author__username="bob").exists()
    assert page.is_disabled(".suggestion button:has-text('Adopted')")


def test_it_files_a_trace_finding_on_a_hop_by_keyboard(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from reviewer.models import Finding

    page = signed_in("bob")
    page.goto(dashboard.url + example_review.path)
    page.wait_for_selector("#doc-body mark.finding")
    # The steps are tabs: arrow keys move between passes.
    page.focus("#tab-restate")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert page.get_attribute("#tab-trace", "aria-selected") == "true"
    page.focus(".trace-svg .hop[data-hop=response_path]")
    page.keyboard.press("Enter")
    page.wait_for_selector("#trace-panel h3:has-text('response path')")
    page.click("#trace-panel button:has-text('New finding on this hop')")
    assert page.input_value("#ff-hop") == "response_path"
    page.keyboard.type("No path back to the waiting connection")
    page.focus("#ff-quote")  # a quote can be typed instead of selected
    page.keyboard.type("The answers go back to the gateway")
    page.focus("#ff-title")
    page.keyboard.press("Enter")
    page.wait_for_selector("#trace-panel .finding-item:has-text('No path back')")
    finding = Finding.objects.get(title="No path back to the waiting connection")
    assert (finding.trace_hop, finding.review_pass) == ("response_path", "trace")
    assert finding.anchor_exact == "The answers go back to the gateway"
    page.wait_for_selector("#doc-body mark.finding[title='No path back to the waiting connection']")


def test_it_stays_usable_at_800_pixels(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    page = signed_in("alice", width=800, height=900)
    for key in PASSES:
        page.goto(dashboard.url + example_review.path + f"#{key}")
        page.wait_for_selector(f"#panel-{key}:not([hidden])")
        page.wait_for_timeout(300)
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, f"the {key} pass scrolls sideways by {overflow} px at 800 px"
        assert page.is_visible("#doc-body") and page.is_visible(f"#panel-{key} h2")
    screenshot(page, "session-800px-rank")


def test_it_starts_a_review_from_the_home_page(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    page = signed_in("alice")
    page.fill("#new-title", "Second look at the serving doc")
    page.select_option("#new-fleet", index=1)
    page.click("button:has-text('Start review')")
    page.wait_for_selector("h1:has-text('Second look at the serving doc')")
    assert "/sessions/" in page.url
    page.wait_for_selector(".presence .viewer.me")


def test_it_keeps_a_reply_thread_on_a_finding(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from reviewer.models import FindingReply

    page = signed_in("bob")
    page.goto(dashboard.url + example_review.path + "#restate")
    page.wait_for_selector("#doc-body mark.finding")  # the findings are loaded
    page.locator("#panel-restate .finding-item button:has-text('Replies (0)')").first.click()
    page.fill("#panel-restate .thread textarea", "Ask for a **p99** target in seconds.")
    page.click("#panel-restate .thread button:has-text('Reply')")
    page.wait_for_selector("#panel-restate .thread li strong:has-text('p99')")
    # The thread stays open when the finding's reply count comes back live.
    page.wait_for_selector("#panel-restate button:has-text('Replies (1)')")
    assert page.is_visible("#panel-restate .thread li:has-text('target in seconds')")
    assert FindingReply.objects.get().author.username == "bob"


def test_it_makes_a_fleet_config_from_a_ranked_layout(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from reviewer.models import ReviewSession

    page = signed_in("alice")
    page.goto(dashboard.url + example_review.path + "#break")
    best = page.locator(".layout-card").first
    assert "survives the loss of any one host" in best.locator(".verdict").inner_text()
    best.locator("button:has-text('Use this layout')").click()
    page.click("#placement-panel button:has-text('Review with it in this session')")
    page.wait_for_selector(".session-head:has-text('1 big + 2 small / 1 big + 2 small / 1 big + 2 small')")
    fleet = ReviewSession.objects.get(pk=example_review.session_id).fleet_config
    assert [h["workers"] for h in fleet.scenario["hosts"]] == [["big@0", "small@5", "small@7"]]
    assert fleet.scenario["hosts"][0]["count"] == 3


def test_it_draws_measured_against_fitted_step_times_on_the_calibration_page(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    page = signed_in("alice")
    page.click("a:has-text('Calibrate step times')")
    page.wait_for_url("**/calibration/")
    page.select_option("#cal-group", label="llama2-70b on a100-80gb tp 2")
    page.click("form[method=get] button:has-text('Fit')")
    page.wait_for_selector("#calibration-chart[data-points='32']")
    # One marker per configuration: 32 points, across the step kinds and the outliers.
    assert page.locator("#calibration-chart .scatterlayer .point").count() == 32
    titles = page.locator("#calibration-chart .g-xtitle, #calibration-chart .g-ytitle").all_text_contents()
    assert titles == ["Measured step time (ms, log scale)", "Fitted step time (ms, log scale)"]
    legend = page.locator("#calibration-chart .legendtext").all_text_contents()
    assert legend[:2] == ["prompt (prefill) steps", "token (decode) steps"]
    assert "outliers (left out of the fit)" in legend and "y = x (a perfect fit)" in legend
    assert page.locator(".calibration-table tbody tr").count() == 32
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    page.wait_for_timeout(150)
    screenshot(page, "calibration", full_page=True)
