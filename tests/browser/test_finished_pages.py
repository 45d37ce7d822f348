"""The reviewer's pages carried to the end: the doc page and its diffs, evidence that
survives selecting a quote, the break pass's default sweep, mouse controls for what
the keyboard does, the placement pass's answer beside its button, and the export."""

from __future__ import annotations

from typing import Any

import pytest
from browser_helpers import ExampleReview, LiveServer, assert_fits, screenshot

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


def test_a_doc_has_a_page_to_read_revise_and_diff_it(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from reviewer.models import ReviewSession

    doc = ReviewSession.objects.get(pk=example_review.session_id).doc
    page = signed_in("alice")
    # The docs list links each doc to its page.
    page.click(f"#docs-h + ul a:has-text({doc.title!r})")
    page.wait_for_url(f"{dashboard.url}/docs/{doc.pk}/")
    assert page.inner_text("#doc-reading-h") == "Revision 1 (the latest)"
    assert "##" not in page.inner_text("#doc-body")
    # A new revision, pasted: a heading renamed and a paragraph re-wrapped and changed.
    body = doc.latest_revision().body
    first_heading = next(line for line in body.splitlines() if line.startswith("## "))
    revised = body.replace(first_heading, first_heading + " (revised)", 1)
    revised += "\n\nA paragraph the authors added\nover two source lines. It has two sentences.\n"
    page.fill("#rev-body", revised)
    page.click("#doc-revise-form button[type=submit]")
    page.wait_for_selector(".messages li:has-text('Saved revision 2.')")
    assert page.inner_text("#doc-reading-h") == "Revision 2 (the latest)"
    assert "A paragraph the authors added over two source lines." in " ".join(page.inner_text("#doc-body").split())
    for width in (1280, 800):
        page.set_viewport_size({"width": width, "height": 900})
        assert_fits(page, f"the doc page at {width} px")
        screenshot(page, f"doc-page-{width}")
    page.click("a:has-text('diff with 1')")
    page.wait_for_selector("table.diff.side")
    # Markdown rendered, compared by sentence: the heading shown as one, no raw ##, and
    # the new paragraph's two sentences each a row, whatever its source lines.
    assert "##" not in page.inner_text("table.diff") and "*Status" not in page.inner_text("table.diff")
    assert page.locator("table.diff td.new .md-h2:has-text('(revised)')").count() == 1
    added = page.locator("table.diff tr.insert td.new .text").all_inner_texts()
    assert [" ".join(t.split()) for t in added] == [
        "A paragraph the authors added over two source lines.", "It has two sentences."]
    for width in (1280, 800):
        page.set_viewport_size({"width": width, "height": 900})
        assert_fits(page, f"the diff at {width} px")
        screenshot(page, f"doc-diff-{width}", full_page=True)
    # The session's page links its doc too.
    page.goto(dashboard.url + example_review.path)
    page.click("#doc-link")
    page.wait_for_url(f"{dashboard.url}/docs/{doc.pk}/")


def test_use_this_layout_answers_beside_its_button_and_names_the_config_after_it(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from reviewer.models import FleetConfig

    page = signed_in("alice", width=800)
    page.goto(dashboard.url + example_review.path + "#break")
    card = page.locator(".layout-card").first
    button = card.locator("button:has-text('Use this layout')")
    button.click()
    answer = card.locator(".layout-result:has-text('Made fleet config')")
    answer.wait_for()
    below = answer.bounding_box()["y"] - (button.bounding_box()["y"] + button.bounding_box()["height"])
    assert 0 <= below < 60, f"the answer is {below:.0f} px below the button"
    made = FleetConfig.objects.order_by("-pk").first()
    assert made is not None and "1 big + 2 small" in made.name and "2 big / 2 big / 5 small" not in made.name
    screenshot(page, "use-this-layout-800")
