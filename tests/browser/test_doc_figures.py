"""The numbers pass lists the figures the doc states; accepting one writes its key into
the fleet config, marked as from the doc with its sentence."""

from __future__ import annotations

from typing import Any

import pytest
from browser_helpers import ExampleReview, LiveServer, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_accepting_a_proposed_figure_writes_it_with_its_provenance(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from reviewer.models import ReviewSession

    fleet = ReviewSession.objects.get(pk=example_review.session_id).fleet_config
    before = fleet.versions.count()
    assert "traffic.peak_qps" not in fleet.provenance
    page = signed_in("alice")
    page.goto(dashboard.url + example_review.path + "#numbers")
    row = page.locator(".doc-figures-table tr[data-key='traffic.peak_qps']").first
    row.wait_for()
    assert "10,000" in row.inner_text() or "10000" in row.inner_text()
    row.locator("button.accept-figure").click()
    page.wait_for_selector(".doc-figures-table tr[data-key='traffic.peak_qps'] .source.doc")
    assert fleet.versions.count() == before + 1
    mark = fleet.provenance["traffic.peak_qps"]
    assert mark["source"] == "doc" and "10,000" in mark["quote"]
    assert "peak_qps = 10000" in fleet.versions.order_by("-number").first().toml
    # The numbers pass, drawn again, lists it among the inputs from the doc.
    assert "traffic.peak_qps" in page.inner_text(".provenance ul.from-doc")
    screenshot(page, "numbers-doc-figure-accepted")
