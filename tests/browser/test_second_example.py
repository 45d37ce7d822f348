"""Both example reviews in the browser: every pass renders for each, the second
example's passes are saved as screenshots, and no page of a review (compare mode
included) is wider than the viewport at 800 or 1280 px."""

from __future__ import annotations

from typing import Any

import pytest
from browser_helpers import (
    PASSES,
    ExampleReview,
    LiveServer,
    assert_fits,
    charts_spilling,
    open_pass,
    screenshot,
    wait_for_page,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

def test_it_renders_every_pass_of_the_second_example_and_saves_each(
    dashboard: LiveServer, second_example: ExampleReview, signed_in: Any
) -> None:
    page = signed_in("alice")
    page.goto(dashboard.url + second_example.path)
    page.wait_for_selector("#doc-body mark.finding")
    assert "70B chat model" in page.inner_text("h1")
    for key in PASSES:
        open_pass(page, key)
        if key == "numbers":
            table = page.inner_text(".numbers-table:not(.doc-figures-table)")
            assert "Decode step floor" in table and "KV capacity per worker" in table
            assert "TPOT goal is under" in page.inner_text("#numbers-panel")
            # Headline first: the TPOT floor over the 8 ms goal, and what one host's loss leaves.
            headline = page.inner_text(".headline-figures")
            # 27.4 ms: the weights at 60 % bandwidth and the 160 all-reduces of tensor
            # parallelism 4; six of eight replicas at 4.72 QPS after a host loss.
            assert "27.4 ms" in headline and "28.3 QPS" in headline
            assert "worker.mbu = 0.6" in page.inner_text(".provenance ul.assumed")
            assert "slo.tpot_s" in page.inner_text(".provenance ul.from-doc")
            assert page.locator(".suggestion[data-assumed=yes]").count() > 0
            screenshot(page, "second-example-numbers-top")
        elif key == "trace":
            # The path is the fleet's own: no gateway (its config has none), no dispatcher
            # queue (the seed's hop), the router, and the replicas as one pool of workers
            # with their KV.
            hops = page.evaluate("[...document.querySelectorAll('.trace-svg .hop')].map((g) => g.dataset.hop)")
            assert hops == ["client", "routing", "worker", "response_path"]
            assert "dispatcher" not in hops
            workers = page.text_content(".trace-svg .hop[data-hop=worker]") or ""
            assert "chat: 8 × 4 units" in workers and "tokens a worker" in workers, workers
            assert "dispatcher" not in (page.text_content(".trace-svg") or "")
            # Its trace finding is on the fleet's own routing hop, and the guide asks of routing.
            assert page.locator("#trace-panel h3:has-text('hops this fleet does not have')").count() == 0
            assert "router" in page.inner_text("#panel-trace .guide")
        elif key == "break":
            # Every replica is one model; a host carries two of them.
            assert page.locator(".layout-card").count() >= 1
        elif key == "rank":
            assert page.locator(".rank-card").count() == 5
        screenshot(page, f"second-example-{key}", full_page=True)


@pytest.mark.parametrize("width", [800, 1280])
def test_no_page_of_either_review_is_wider_than_the_viewport(
    dashboard: LiveServer, second_example: ExampleReview, example_review: ExampleReview,
    signed_in: Any, width: int,
) -> None:
    from reviewer.models import EmulatorRun

    page = signed_in("alice", width=width, height=900)
    assert_fits(page, f"the home page at {width} px")
    for review in (example_review, second_example):
        page.goto(dashboard.url + review.path)
        page.wait_for_selector("#doc-body mark.finding")
        for key in PASSES:
            open_pass(page, key)
            assert_fits(page, f"the {key} pass of session {review.session_id} at {width} px")
        # Compare mode: two runs side by side (for the second example, two finished runs
        # with their charts, heatmaps and summaries).
        open_pass(page, "break")
        earlier = "#runs-panel select[aria-label='Open an earlier run']"
        runs = list(EmulatorRun.objects.filter(session_id=review.session_id).order_by("pk"))
        if runs:
            page.locator(earlier).focus()
            page.wait_for_selector(f"#runs-panel option[value='{runs[0].pk}']", state="attached")
            page.select_option(earlier, str(runs[0].pk))
            page.wait_for_selector(".run-view .summary table", timeout=30000)
        page.click("#runs-panel button:has-text('Compare with')")
        page.wait_for_selector(".runs-side.two .run-view >> nth=1")
        if runs:
            page.select_option(earlier, str(runs[1].pk))
            page.wait_for_selector(".runs-side.two .run-view >> nth=1 >> .summary table", timeout=30000)
        page.wait_for_timeout(300)
        assert_fits(page, f"compare mode of session {review.session_id} at {width} px")
        # Run A's charts, drawn full width, narrow to their column when B opens.
        wait_for_page(page, "() => document.querySelectorAll('.run-view .js-plotly-plot').length !== 1")
        assert charts_spilling(page) == [], f"charts wider than their run at {width} px"
        if review is second_example:
            screenshot(page, f"second-example-compare-{width}px", full_page=True)
    for path in ("/calibration/", "/account/tokens/"):
        page.goto(dashboard.url + path)
        page.wait_for_load_state("networkidle")
        assert_fits(page, f"{path} at {width} px")


def test_a_layout_without_a_model_is_not_said_to_survive_any_host_loss(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    page = signed_in("alice")
    page.goto(dashboard.url + example_review.path + "#break")
    page.wait_for_selector(".layout-card .verdict")
    card = page.locator(".layout-card:has(h4:text-matches(' 5 small / 5 small / 5 small$'))")
    assert card.count() == 1
    verdict = card.locator(".verdict")
    assert "big has no worker at all" in verdict.inner_text()
    assert "survives" not in verdict.inner_text()
    assert verdict.get_attribute("class") == "verdict bad"
    best = page.locator(".layout-card").first.locator(".verdict")
    assert best.inner_text() == "✓ every model survives the loss of any one host"


def test_every_page_of_both_examples_loads_without_a_console_error_or_a_failed_request(
    dashboard: LiveServer, second_example: ExampleReview, example_review: ExampleReview,
    signed_in: Any, console_errors: list[str],
) -> None:
    """Home, each session with every pass, a run, compare mode, the doc page, both diffs,
    the fleet editor, calibration, the inbox, API tokens and every export: no console
    error (the fixture fails the test on any) and no request refused or failed, the
    favicon included."""
    from reviewer.models import EmulatorRun, ReviewSession

    page = signed_in("alice")
    failed: list[str] = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    # A navigation cancels what the page left loading (an aborted fetch is no failure).
    page.on("requestfailed", lambda r: failed.append(f"{r.failure} {r.url}")
            if "ERR_ABORTED" not in (r.failure or "") else None)
    visited: list[str] = []
    # The watch sees a refused request: one made on purpose, then forgotten.
    page.evaluate("fetch('/no-such-page-here/')")
    page.wait_for_timeout(300)
    assert any("/no-such-page-here/" in f for f in failed), failed
    failed.clear()
    console_errors.clear()

    def visit(path: str, ready: str = "body") -> None:
        page.goto(dashboard.url + path)
        page.wait_for_selector(ready)
        page.wait_for_load_state("networkidle")
        visited.append(path)

    visit("/", "#docs-h")
    icon = page.get_attribute("link[rel=icon]", "href")
    assert icon and page.request.get(dashboard.url + icon).status == 200
    assert page.request.get(dashboard.url + "/favicon.ico").status == 200  # followed to the icon
    for review in (example_review, second_example):
        session = ReviewSession.objects.get(pk=review.session_id)
        visit(review.path, "#doc-body mark.finding")
        for key in PASSES:
            open_pass(page, key)
        # A run of the review (the second example's evidence), then two compared.
        open_pass(page, "break")
        runs = list(EmulatorRun.objects.filter(session_id=review.session_id).order_by("pk"))
        earlier = "#runs-panel select[aria-label='Open an earlier run']"
        if runs:
            page.locator(earlier).focus()
            page.wait_for_selector(f"#runs-panel option[value='{runs[0].pk}']", state="attached")
            page.select_option(earlier, str(runs[0].pk))
            page.wait_for_selector(".run-view .summary table", timeout=30000)
        page.click("#runs-panel button:has-text('Compare with')")
        page.wait_for_selector(".runs-side.two .run-view >> nth=1")
        if len(runs) > 1:
            page.select_option(earlier, str(runs[1].pk))
            page.wait_for_selector(".runs-side.two .run-view >> nth=1 >> .summary table", timeout=30000)
        page.wait_for_load_state("networkidle")
        revision = session.doc.latest_revision()
        number = revision.number if revision else 1
        visit(f"/docs/{session.doc_id}/", "#doc-body")
        visit(f"/docs/{session.doc_id}/diff/?from={max(1, number - 1)}&to={number}")
        visit(f"{review.path}diff/")
        visit(f"/fleets/{session.fleet_config_id}/edit?session={session.pk}", "#fe-status:has-text('No changes')")
        for fmt in ("md", "json", "csv", "jsonld"):
            response = page.request.get(f"{dashboard.url}/api/sessions/{session.pk}/export.{fmt}")
            assert response.status == 200 and response.body(), (fmt, response.status)
        # The Markdown export as the browser opens it.
        visit(f"/api/sessions/{session.pk}/export.md")
    for path in ("/calibration/", "/inbox/", "/account/tokens/", "/fleets/new"):
        visit(path)
    assert failed == [], f"requests that failed: {failed}"
    assert console_errors == [], console_errors
    assert len(visited) == 1 + 2 * 6 + 4
