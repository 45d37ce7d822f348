"""The review document, the revision diff and the keyboard, in a real browser."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from browser_helpers import ExampleReview, LiveServer, screenshot, wait_for_page

pytestmark = pytest.mark.browser

OLD_SENTENCE = "That queue hands each batch to the next worker, in round-robin order."
NEW_SENTENCE = "That queue hands each batch to the next idle worker, in round-robin order."


def in_thread(work: Callable[[], None]) -> None:
    """Run ORM work that publishes live events beside Playwright's event loop (see conftest)."""
    from django.db import connection

    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # reported in the test's own thread
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=60)
    assert not errors, errors


def test_the_diff_page_shows_the_changed_sentence_and_the_findings_on_each_side(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from reviewer.models import Finding, ReviewSession
    from reviewer.review import services

    session = ReviewSession.objects.get(pk=example_review.session_id)

    def revise() -> None:
        from django.test import override_settings

        doc = session.doc
        # The findings move before this returns, not later in a background worker.
        with override_settings(REANCHOR_IN_BACKGROUND=False):
            services.doc_revise(doc=doc, author=example_review.alice,
                                body=doc.body.replace(OLD_SENTENCE, NEW_SENTENCE))

    in_thread(revise)
    finding = Finding.objects.get(anchor_exact__startswith="That queue hands")
    assert finding.revision.number == 2 and not finding.orphaned

    bob = signed_in("bob")
    bob.goto(f"{dashboard.url}{example_review.path}")
    bob.click("#changes-link")
    # Bob filed nothing: his last review is the revision the session opened on.
    bob.wait_for_selector("table.diff.side")
    assert "from=" not in bob.url
    row = bob.locator("table.diff tr.replace", has_text="round-robin order")
    assert row.count() == 1
    assert OLD_SENTENCE in " ".join(row.locator("td.old .text").inner_text().split())
    assert NEW_SENTENCE in " ".join(row.locator("td.new .text").inner_text().split())
    assert row.locator("td.new .changed").inner_text().strip() == "idle"
    for side, how, sentence in (("old", "re-anchored", OLD_SENTENCE), ("new", "anchored", NEW_SENTENCE)):
        cell = row.locator(f"td.{side}")
        # The quote is highlighted whole (cut where a changed word sits inside it).
        marks = cell.locator(f"mark[data-finding-ids='{finding.pk}']").all_inner_texts()
        assert "".join(marks) == sentence
        chip = cell.locator(f".chip[data-finding-id='{finding.pk}']")
        assert finding.title in chip.inner_text() and chip.locator(".how").inner_text() == how
    screenshot(bob, "diff-side-1280", full_page=True)
    # Nothing spills past the viewport sideways, at 1280 px or at 800 px.
    assert bob.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

    narrow = signed_in("bob", width=800, height=900)
    narrow.goto(f"{dashboard.url}/sessions/{example_review.session_id}/diff/?from=1&to=2&view=inline")
    narrow.wait_for_selector("ol.diff.inline li.new.replace")
    assert narrow.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(narrow, "diff-inline-800", full_page=True)
    narrow.goto(f"{dashboard.url}/sessions/{example_review.session_id}/diff/?from=2&to=2")
    assert "nothing changed" in narrow.inner_text("#diff-summary")
    screenshot(narrow, "diff-empty-800")


def test_j_and_k_move_the_selection_and_question_mark_shows_the_help(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from reviewer.models import ReviewSession
    from reviewer.review import services

    session = ReviewSession.objects.get(pk=example_review.session_id)

    def more() -> None:
        for title in ("Two models, one tier", "The engine is a black box"):
            services.finding_create(session=session, author=example_review.alice, review_pass="restate", title=title)

    in_thread(more)
    alice = signed_in("alice")
    alice.goto(f"{dashboard.url}{example_review.path}#restate")
    alice.wait_for_selector("#panel-restate .finding-item >> nth=2")
    ids = alice.eval_on_selector_all("#panel-restate .finding-item", "items => items.map(i => i.dataset.findingId)")
    selected = "#panel-restate .finding-item.kbd-selected"

    alice.locator("body").press("j")
    assert alice.get_attribute(selected, "data-finding-id") == ids[0]
    alice.keyboard.press("j")
    alice.keyboard.press("j")
    assert alice.get_attribute(selected, "data-finding-id") == ids[2]
    alice.keyboard.press("k")
    assert alice.get_attribute(selected, "data-finding-id") == ids[1]
    assert alice.locator(".finding-item.kbd-selected").count() == 1

    # Typed into a field, j is a letter, not a shortcut.
    wait_for_page(alice, "() => document.querySelector('#rd-restatement').value.length > 0")
    alice.focus("#rd-restatement")
    alice.keyboard.press("Control+End")
    alice.keyboard.type("jj")
    assert alice.get_attribute(selected, "data-finding-id") == ids[1]
    assert alice.input_value("#rd-restatement").endswith("jj")
    alice.locator("#rd-restatement").fill(alice.input_value("#rd-restatement")[:-2])
    alice.locator("#rd-restatement").blur()

    # r opens the selected finding's thread with the cursor in the reply box.
    alice.keyboard.press("r")
    wait_for_page(alice, "() => document.activeElement && document.activeElement.matches("
                         "'.finding-item.kbd-selected .thread textarea')")
    alice.locator(".finding-item.kbd-selected .thread textarea").blur()

    # e opens the selected finding (alice's own) in the form.
    alice.keyboard.press("e")
    alice.wait_for_selector("#finding-form:not([hidden])")
    assert alice.input_value("#ff-title") == "Two models, one tier"
    alice.keyboard.press("Escape")

    alice.keyboard.press("?")
    alice.wait_for_selector("dialog#kbd-help[open]")
    assert "Next finding" in alice.inner_text("#kbd-help")
    screenshot(alice, "keyboard-help-1280")
    alice.keyboard.press("Escape")
    wait_for_page(alice, "() => !document.querySelector('dialog#kbd-help').open")


def test_editing_the_opening_saves_it_and_shows_it_to_the_other_viewer(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from reviewer.models import ReviewSession

    alice = signed_in("alice")
    bob = signed_in("bob", width=800, height=900)
    for page in (alice, bob):
        page.goto(f"{dashboard.url}{example_review.path}#rank")
        wait_for_page(page, "() => document.querySelector('#rd-opening') && document.querySelector('#rd-opening').value.length > 0")
    assert bob.input_value("#rd-opening").startswith("Not ready to build as written")
    bob.wait_for_selector(".presence .viewer:has-text('alice')")

    opening = "Needs changes: size the fleet first, then the three fixes below."
    alice.fill("#rd-opening", opening)
    alice.click("button[data-save-doc='opening strengths']")
    alice.wait_for_selector(".review-doc .doc-status:has-text('Saved.')")
    assert ReviewSession.objects.get(pk=example_review.session_id).opening == opening
    wait_for_page(bob, "(text) => document.querySelector('#rd-opening').value === text", opening, timeout=5000)
    screenshot(alice, "review-document-rank-1280", full_page=True)
    screenshot(bob, "review-document-rank-800", full_page=True)
    assert bob.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_a_near_duplicate_is_flagged_and_merged_from_its_button(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from reviewer.models import Finding, ReviewSession
    from reviewer.review import services
    from reviewer.review.publishing import review_publish

    session = ReviewSession.objects.get(pk=example_review.session_id)
    original = Finding.objects.get(session=session, review_pass="restate")

    def duplicate() -> None:
        copy = services.finding_create(session=session, author=example_review.bob, review_pass="restate",
                                       title="Latency goal against the batch time",
                                       anchor_exact=original.anchor_exact)
        services.reply_create(finding=copy, author=example_review.bob, body="Same point as the first one.")
        # Others see it (and its likeness to the first) once bob publishes his review.
        review_publish(session=session, reviewer=example_review.bob, verdict="comment")

    in_thread(duplicate)
    copy = Finding.objects.get(session=session, author=example_review.bob)
    alice = signed_in("alice", width=800, height=900)
    alice.goto(f"{dashboard.url}{example_review.path}#restate")
    item = alice.locator(f"#panel-restate .finding-item[data-finding-id='{copy.pk}']")
    item.wait_for()
    assert f"possible duplicate of #{original.pk}" in item.inner_text()
    # The earlier finding is flagged too, though it was filed first.
    first = alice.locator(f"#panel-restate .finding-item[data-finding-id='{original.pk}']")
    assert f"possible duplicate of #{copy.pk}" in first.inner_text()
    item.scroll_into_view_if_needed()
    screenshot(alice, "duplicate-flag-800")
    alice.on("dialog", lambda d: d.accept())
    item.locator(f"button:has-text('Merge into #{original.pk}')").click()
    alice.wait_for_selector(f"#panel-restate .finding-item[data-finding-id='{copy.pk}']:has-text('merged into #{original.pk}')")
    assert Finding.objects.get(pk=copy.pk).merged_into_id == original.pk
    assert original.replies.count() == 1
    assert "Replies (1)" in first.inner_text()
