"""The session page with the mouse alone: every keyboard shortcut has a control
(edit a finding, select one by clicking it, resolve a thread), publishing asks
first and says how many drafts it sends, and a reviewer resolves a thread
filed by someone else, as on a code review."""

from __future__ import annotations

from typing import Any

import pytest
from browser_helpers import ExampleReview, LiveServer, screenshot, select_text, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SENTENCE = "The dispatcher reads requests from the queue and closes a batch."
SECOND_SENTENCE = "The gateway authenticates the caller."


def _file(page: Any, sentence: str, title: str) -> None:
    select_text(page, sentence)
    page.wait_for_selector("#finding-form:not([hidden])")
    page.fill("#ff-title", title)
    page.fill("#ff-body", "")
    page.click("#ff-submit")
    page.wait_for_selector(f"#panel-restate .finding-item:has-text({title!r})")


def _open(page: Any, dashboard: LiveServer, example_review: ExampleReview) -> None:
    page.goto(dashboard.url + example_review.path + "#restate")
    page.wait_for_selector("#doc-body mark.finding")


def test_a_reviewer_edits_their_finding_and_selects_one_with_the_mouse(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from reviewer.models import Finding

    bob = signed_in("bob")
    _open(bob, dashboard, example_review)
    _file(bob, SENTENCE, "Who closes a batch?")
    item = bob.locator("#panel-restate .finding-item:has-text('Who closes a batch?')")
    # Only the writer's own findings offer Edit; the example's (alice's) do not.
    assert bob.locator("#panel-restate .finding-item:has-text('by alice') button.edit").count() == 0
    item.locator("button:has-text('Edit')").click()
    bob.wait_for_selector("#finding-form:not([hidden])")
    assert bob.input_value("#ff-title") == "Who closes a batch?"
    bob.fill("#ff-title", "Who closes a batch, and when?")
    bob.click("#ff-submit")
    bob.wait_for_selector("#panel-restate .finding-item:has-text('Who closes a batch, and when?')")
    wait_for(lambda: Finding.objects.filter(title="Who closes a batch, and when?").exists(),
             what="the edited title to be saved")

    # A click on a finding selects it, as j and k do; e then edits that one.
    edited = bob.locator("#panel-restate .finding-item:has-text('Who closes a batch, and when?')")
    edited.locator(".title").click()
    bob.wait_for_selector("#panel-restate .finding-item.kbd-selected:has-text('Who closes a batch, and when?')")
    screenshot(bob, "mouse-edit-selected-1280")
    bob.keyboard.press("e")
    bob.wait_for_selector("#finding-form:not([hidden])")
    assert bob.input_value("#ff-title") == "Who closes a batch, and when?"


def test_publishing_asks_first_with_the_count_of_drafts(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from reviewer.models import Finding

    bob = signed_in("bob")
    _open(bob, dashboard, example_review)
    _file(bob, SENTENCE, "Who closes a batch?")
    _file(bob, SECOND_SENTENCE, "Authentication before rate limiting")
    wait_for(lambda: Finding.objects.filter(author__username="bob", published_at=None).count() == 2,
             what="both drafts to be saved")
    asked: list[str] = []

    def dismiss(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.dismiss()

    bob.once("dialog", dismiss)
    bob.click("#publish-review")
    wait_for(lambda: bool(asked), what="the question before publishing")
    assert "2 draft findings" in asked[0] and "Comment" in asked[0], asked
    # Declined: nothing was published.
    bob.wait_for_timeout(500)
    assert Finding.objects.filter(author__username="bob", published_at=None).count() == 2
    assert bob.inner_text("#draft-count") == "2 draft findings"

    def accept(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept()

    bob.once("dialog", accept)
    bob.click("#publish-review")
    bob.wait_for_selector("#draft-count:has-text('No draft findings')")
    assert not Finding.objects.filter(author__username="bob", published_at=None).exists()
    screenshot(bob, "publish-confirmed-1280")


def test_a_reviewer_resolves_and_reopens_a_thread_someone_else_filed(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from reviewer.models import Finding

    alice = signed_in("alice")
    bob = signed_in("bob")
    for page in (alice, bob):
        _open(page, dashboard, example_review)
    finding = Finding.objects.filter(session_id=example_review.session_id, author__username="alice",
                                     review_pass="restate").exclude(published_at=None).first()
    assert finding is not None
    item = f"#panel-restate .finding-item[data-finding-id='{finding.pk}']"
    # One control says where the thread stands: no second status select, no second button.
    assert bob.locator(f"{item} select").count() == 1
    assert bob.locator(f"{item} .state-box button").all_inner_texts() == ["Apply"]
    assert bob.is_disabled(f"{item} button.apply-state")  # nothing changed yet
    bob.locator(f"{item} select[aria-label^='State of']").select_option("fixed")
    bob.locator(f"{item} button.apply-state").click()
    bob.wait_for_selector(f"{item} .badge.state-fixed")
    wait_for(lambda: Finding.objects.get(pk=finding.pk).state == "fixed", what="the finding to be resolved")
    # alice, who filed it, sees it resolved live, and reopens it.
    alice.wait_for_selector(f"{item} .badge.state-fixed", timeout=5000)
    bob.locator(item).scroll_into_view_if_needed()
    screenshot(bob, "resolve-by-reviewer-1280")
    # alice reopens it from the keyboard: the select, then Enter on "Apply".
    alice.locator(f"{item} select[aria-label^='State of']").focus()
    alice.locator(f"{item} select[aria-label^='State of']").select_option("open")
    assert "dropped" in alice.locator(f"{item} select[aria-label^='State of'] option").evaluate_all(
        "os => os.map(o => o.value)")  # she filed it, so she may also withdraw it
    alice.keyboard.press("Tab")
    alice.keyboard.press("Enter")
    bob.wait_for_selector(f"{item} .badge.state-reopened", timeout=5000)
    wait_for(lambda: Finding.objects.get(pk=finding.pk).state == "reopened", what="the finding to be reopened")


def test_bringing_everyone_to_a_pass_moves_every_open_tab(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any, django_user_model: Any
) -> None:
    from browser_helpers import PASSWORD

    from reviewer.models import ReviewSession

    carol = django_user_model.objects.create_user("carol", password=PASSWORD)
    ReviewSession.objects.get(pk=example_review.session_id).authors.add(carol)
    alice = signed_in("alice")
    bob = signed_in("bob")
    author = signed_in("carol", width=800)
    for page in (alice, bob, author):
        _open(page, dashboard, example_review)
    # Neither bob nor the author is on the session's pass: both went their own way.
    bob.click("#tab-numbers")
    author.click("#tab-break")
    for page in (alice, bob, author):
        page.wait_for_selector("#presence .viewer:has-text('carol')", timeout=5000)
    alice.click("#tab-trace")
    alice.click("#share-pass")
    for page in (bob, author):
        page.wait_for_selector("#tab-trace[aria-selected=true]", timeout=5000)
        page.wait_for_selector("#panel-trace:not([hidden])")
        assert page.inner_text("[data-shared-for=trace]") == "session is here"
    wait_for(lambda: ReviewSession.objects.get(pk=example_review.session_id).current_pass == "trace",
             what="the session's pass to be saved")
    screenshot(bob, "brought-to-trace-1280")


def test_whose_turn_follows_another_reviewers_drafts_without_a_reload(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    alice = signed_in("alice")
    bob = signed_in("bob")
    for page in (alice, bob):
        _open(page, dashboard, example_review)
    alice.wait_for_selector("#turn:has-text('Whose turn')")
    assert "bob" not in alice.inner_text("#turn")
    _file(bob, SENTENCE, "Who closes a batch?")
    # bob's draft reaches nobody, but alice's "whose turn" names him at once.
    alice.wait_for_selector("#turn:has-text('reviewers with unpublished drafts: bob')", timeout=5000)
    screenshot(alice, "turn-live-1280")
    bob.once("dialog", lambda dialog: dialog.accept())
    bob.locator("#panel-restate .finding-item:has-text('Who closes a batch?') button:has-text('Delete')").click()
    alice.wait_for_function("() => !document.getElementById('turn').textContent.includes('bob')", timeout=5000)
