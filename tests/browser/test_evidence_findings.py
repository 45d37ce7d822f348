"""Emulator evidence carried into a finding in the browser: a run's window stays on
the finding form while the reader selects the quote it is about."""

from __future__ import annotations

from typing import Any

import pytest
from browser_helpers import ExampleReview, LiveServer, screenshot, select_text, wait_for_page

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SENTENCE = "The dispatcher reads requests from the queue and closes a batch."
TITLE = "The batch closes late behind a busy worker"


def test_evidence_attached_to_a_new_finding_survives_selecting_its_quote(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from reviewer.models import EmulatorRun, Finding

    page = signed_in("alice")
    page.goto(dashboard.url + example_review.path + "#break")
    page.wait_for_selector(".run-view")
    page.select_option(".run-view select[aria-label='Run A speed']", "max")
    page.click(".run-view button:has-text('Start run')")
    page.wait_for_selector(".run-view[data-status=done]", timeout=120000)
    run = EmulatorRun.objects.get()

    page.select_option(".run-view select[aria-label=Metric]", "backlog")
    page.click(".run-view button:has-text('Attach as evidence')")
    page.wait_for_selector("#ff-evidence:not([hidden])")
    page.fill("#ff-title", TITLE)
    # Then the quote the finding is about, selected in the doc: the form keeps the evidence and the title.
    select_text(page, SENTENCE)
    wait_for_page(page, "document.getElementById('ff-quote').value.length > 0")
    assert page.input_value("#ff-quote") == SENTENCE
    assert page.is_visible("#ff-evidence"), "the evidence left the form when the quote was selected"
    assert f"run {run.pk}" in page.inner_text("#ff-evidence")
    assert page.input_value("#ff-title") == TITLE
    assert page.input_value("#ff-pass") == "break"
    page.locator("#finding-form").scroll_into_view_if_needed()
    screenshot(page, "finding-form-evidence-and-quote")
    page.click("#ff-submit")
    page.wait_for_selector(f"#doc-body mark.finding[title={TITLE!r}]")
    finding = Finding.objects.get(title=TITLE)
    assert finding.anchor_exact == SENTENCE
    assert finding.evidence_run_id == run.pk and finding.evidence_metric == "backlog"
    assert finding.evidence_t_to_s > finding.evidence_t_from_s >= 0


def test_a_comparison_of_two_runs_with_their_changed_keys_is_a_findings_evidence(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from reviewer.models import EmulatorRun, Finding

    page = signed_in("bob")
    page.goto(dashboard.url + example_review.path + "#break")
    page.wait_for_selector(".run-view")
    page.select_option(".run-view select[aria-label='Run A speed']", "max")
    page.click(".run-view button:has-text('Start run')")
    page.wait_for_selector(".run-view[data-status=done]", timeout=120000)
    page.click("#runs-panel button:has-text('Compare with')")
    right = page.query_selector_all(".run-view")[1]
    right.query_selector("input[aria-label='Run B overrides']").fill("dispatcher.policy=pull")
    right.query_selector("select[aria-label='Run B speed']").select_option("max")
    right.query_selector("button:has-text('Start run')").click()
    page.wait_for_selector(".run-view[data-status=done] >> nth=1", timeout=120000)
    run_a, run_b = EmulatorRun.objects.order_by("pk")
    assert "dispatcher.policy=pull" in run_b.overrides

    # Attached from run A's view: the evidence is run A against run B, with what B changed.
    page.click(".run-view >> nth=0 >> button:has-text('Attach as evidence')")
    page.wait_for_selector("#ff-evidence:not([hidden])")
    shown = page.inner_text("#ff-evidence")
    assert f"run {run_a.pk}" in shown and f"against run {run_b.pk}" in shown, shown
    assert "dispatcher.policy=pull" in shown, shown
    page.fill("#ff-title", "Pull keeps the tail short where round robin does not")
    page.locator("#finding-form").scroll_into_view_if_needed()
    screenshot(page, "finding-form-compared-runs")
    page.click("#ff-submit")
    item = page.wait_for_selector("#panel-break .finding-item:has-text('Pull keeps the tail short')")
    assert f"against run {run_b.pk}" in item.inner_text()
    finding = Finding.objects.get(title="Pull keeps the tail short where round robin does not")
    assert finding.evidence_run_id == run_a.pk and finding.evidence_compare_run_id == run_b.pk

    # "show" on it opens both runs again, side by side, after run B was closed.
    page.click("#runs-panel button:has-text('Close the second run')")
    item.query_selector(".evidence button").click()
    page.wait_for_selector(f".run-view .title:has-text('Run B: run {run_b.pk}')", timeout=20000)
    assert page.inner_text(".run-view >> nth=0 >> .title") == f"Run A: run {run_a.pk}"
