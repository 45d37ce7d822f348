"""A review in the browser: findings filed from a selection reach the other
reviewer live, are ranked, and come out in the Markdown export."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import ExampleReview, LiveServer, screenshot, select_text, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SENTENCE = "The dispatcher reads requests from the queue and closes a batch."
SECOND_SENTENCE = "The gateway authenticates the caller."


def test_it_files_a_finding_from_a_selection_ranks_it_and_exports_it(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any, tmp_path: Path
) -> None:
    from reviewer.models import Finding, ReviewSession

    alice = signed_in("alice")
    bob = signed_in("bob")
    # Sign-in lands on the home page, which lists the example session.
    assert "Example review" in alice.inner_text("main")
    alice.click("text=Example review: chat inference serving")
    alice.wait_for_selector("#doc-body mark.finding")
    bob.goto(dashboard.url + example_review.path)
    bob.wait_for_selector("#doc-body mark.finding")
    bob.wait_for_selector(".presence .viewer:has-text('alice')")
    # The owner files directly here, so each finding reaches bob as it is filed
    # (drafts and publishing are tested in test_publish.py).
    alice.check("#file-directly")
    wait_for(lambda: ReviewSession.objects.get(pk=example_review.session_id).file_directly,
             what="filing directly to be saved")

    # Alice selects a sentence: the form opens with the quote and her pass.
    select_text(alice, SENTENCE)
    alice.wait_for_selector("#finding-form:not([hidden])")
    assert alice.input_value("#ff-quote") == SENTENCE
    assert alice.input_value("#ff-pass") == "restate"
    alice.fill("#ff-title", "Who closes a batch, and when?")
    alice.fill("#ff-body", "The doc gives no rule for closing a partial batch.")
    alice.select_option("#ff-severity", "clarify")
    alice.click("#ff-submit")
    alice.wait_for_selector("#doc-body mark.finding[title='Who closes a batch, and when?']")
    filed_at = time.monotonic()

    # Bob sees it within two seconds, highlighted on the same words.
    mark = bob.wait_for_selector("#doc-body mark.finding[title='Who closes a batch, and when?']", timeout=2000)
    assert time.monotonic() - filed_at < 2.0
    assert mark.inner_text().strip() == SENTENCE
    assert bob.is_visible("#panel-restate .finding-item:has-text('Who closes a batch')")
    finding = Finding.objects.get(title="Who closes a batch, and when?")
    assert finding.anchor_exact == SENTENCE and finding.anchor_start is not None

    # While bob is selecting text, alice's next finding waits as "1 new".
    select_text(bob, SECOND_SENTENCE)
    bob.wait_for_selector("#finding-form:not([hidden])")
    assert bob.input_value("#ff-quote") == SECOND_SENTENCE
    select_text(alice, SECOND_SENTENCE)
    alice.fill("#ff-title", "Authentication before rate limiting")
    alice.click("#ff-submit")
    bob.wait_for_selector("#new-banner:not([hidden])", timeout=2000)
    assert bob.inner_text("#new-count") == "1 new"
    assert bob.query_selector("mark.finding[title='Authentication before rate limiting']") is None
    assert bob.input_value("#ff-quote") == SECOND_SENTENCE  # his selection in progress is intact
    bob.click("#apply-new")
    bob.wait_for_selector("mark.finding[title='Authentication before rate limiting']")
    bob.click("#ff-cancel")

    # Alice (the owner) moves the new finding to "fix now" with the keyboard.
    alice.click("#tab-rank")
    card = alice.locator(".rank-col[data-severity=clarify] .rank-card:has-text('Who closes a batch')")
    card.focus()
    alice.keyboard.press("Space")
    alice.keyboard.press("ArrowLeft")
    alice.keyboard.press("ArrowUp")
    alice.keyboard.press("Space")
    alice.wait_for_selector(".rank-col[data-severity=fix_now] .rank-card:has-text('Who closes a batch')")
    wait_for(lambda: Finding.objects.get(pk=finding.pk).severity == "fix_now", what="the move to be saved")
    bob.click("#tab-rank")
    bob.wait_for_selector(".rank-col[data-severity=fix_now] .rank-card:has-text('Who closes a batch')", timeout=3000)

    # ... and another one to "mention" by drag and drop.
    # With the review bar above it the board sits low in the window, and a drag
    # started near the bottom edge never starts in headless Chromium (no
    # dragstart); the board is scrolled up first, as a reader would.
    alice.evaluate("() => document.querySelector('.rank-board').scrollIntoView({block: 'start'})")
    alice.drag_and_drop(
        ".rank-card:has-text('Authentication before rate limiting')", ".rank-col[data-severity=mention]"
    )
    wait_for(lambda: Finding.objects.get(title="Authentication before rate limiting").severity == "mention",
             what="the drop to be saved")
    screenshot(alice, "session-rank")

    # The Markdown export carries the finding with its quote.
    with alice.expect_download() as download_info:
        alice.click(".exports a[data-format=md]")
    report = Path(download_info.value.path()).read_text()
    assert "Who closes a batch, and when?" in report
    assert SENTENCE in report
    assert report.index("Who closes a batch") < report.index("Authentication before rate limiting")

    # The owner brings everyone to a pass; bob, who followed the session, moves with it.
    bob.click("#tab-restate")
    alice.click("#tab-trace")
    alice.click("#share-pass")
    bob.wait_for_selector("#tab-trace[aria-selected=true]", timeout=2000)
    assert bob.inner_text("[data-shared-for=trace]") == "session is here"


REPEATED = "to the queue"


def test_it_files_a_finding_on_the_second_of_two_identical_quotes_placed_by_the_server(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any, console_errors: list[str]
) -> None:
    from reviewer.models import DesignDoc, Finding
    from reviewer.text.markdown import rendered_text

    alice = signed_in("alice")
    alice.goto(dashboard.url + example_review.path)
    alice.wait_for_selector("#doc-body mark.finding")
    source = DesignDoc.objects.get().body
    # The server's map is made on the text the page shows: they are the same text.
    shown = alice.evaluate("""() => {
        const walker = document.createTreeWalker(document.getElementById('doc-body'), NodeFilter.SHOW_TEXT);
        let text = '';
        for (let n = walker.nextNode(); n; n = walker.nextNode()) text += n.nodeValue;
        return text;
    }""")
    assert shown == rendered_text(source)
    assert shown.count(REPEATED) == 2 and source.count(REPEATED) == 2

    select_text(alice, REPEATED, occurrence=1)
    alice.wait_for_selector("#finding-form:not([hidden])")
    assert alice.input_value("#ff-quote") == REPEATED
    alice.fill("#ff-title", "Which queue?")
    alice.click("#ff-submit")
    mark = alice.wait_for_selector("#doc-body mark.finding[title='Which queue?']")
    assert mark.inner_text().strip() == REPEATED
    finding = Finding.objects.get(title="Which queue?")
    second = source.index(REPEATED, source.index(REPEATED) + 1)
    assert (finding.anchor_start, finding.anchor_end) == (second, second + len(REPEATED))
    # The mark sits on the second occurrence: the text before it holds the first.
    before = alice.evaluate("""(id) => {
        const mark = document.querySelector(`#doc-body mark.finding[data-finding-id="${id}"]`);
        const range = document.createRange();
        range.setStart(document.getElementById('doc-body'), 0);
        range.setEndBefore(mark);
        return range.toString();
    }""", finding.pk)
    assert before.count(REPEATED) == 1

    # A quote typed into the form that is not in the doc: the server's error names the field and the fix.
    alice.click("button.new-finding[data-pass=restate]")
    alice.fill("#ff-quote", "a sentence this doc never had")
    alice.fill("#ff-title", "Nowhere")
    alice.click("#ff-submit")
    alice.wait_for_selector("#ff-error:has-text('selection:')")
    assert "select the passage again" in alice.inner_text("#ff-error")
    assert not Finding.objects.filter(title="Nowhere").exists()
    # The refused POST is logged by the browser; that one was meant.
    console_errors[:] = [e for e in console_errors if "status of 400" not in e]
    screenshot(alice, "session-selection-second-occurrence")
