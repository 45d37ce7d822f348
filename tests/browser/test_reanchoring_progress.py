"""The session page says how far moving the findings onto a new revision got,
from the session socket's doc.reanchoring events (static/reviewer/session/reanchoring.js)."""

from __future__ import annotations

from typing import Any

import pytest
from browser_helpers import ExampleReview, LiveServer, screenshot
from test_review_document_page import in_thread

pytestmark = pytest.mark.browser


def test_the_doc_pane_shows_how_many_findings_are_placed_while_they_move(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from playwright.sync_api import expect

    from reviewer.models import ReviewSession
    from reviewer.realtime import groups as realtime

    session = ReviewSession.objects.get(pk=example_review.session_id)
    latest = session.doc.latest_revision()
    number = (latest.number if latest else 0) + 1
    bob = signed_in("bob")
    bob.goto(dashboard.url + example_review.path)
    bob.wait_for_selector("#doc-body")
    bob.wait_for_selector("#presence .viewer")  # the socket is open
    assert bob.locator("#reanchoring").is_hidden()  # nothing moving: no line

    def progress(done: int, status: str) -> None:
        in_thread(lambda: realtime.session_event(session.pk, "doc.reanchoring", {
            "doc": session.doc_id, "revision": number, "status": status, "done": done, "total": 1900}))

    progress(200, "pending")
    line = bob.locator("#reanchoring")
    expect(line).to_have_text("re-anchoring: 200 of 1900 findings placed")
    expect(line).to_be_visible()
    progress(1400, "pending")
    expect(line).to_have_text("re-anchoring: 1400 of 1900 findings placed")
    screenshot(bob, "reanchoring-progress-1280")
    progress(1900, "done")
    expect(line).to_have_text(f"re-anchoring done: 1900 of 1900 findings placed on revision {number}")
