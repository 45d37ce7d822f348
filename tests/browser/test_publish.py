"""Publishing in the browser: a reviewer's drafts stay on their own page until they
publish, then reach the other reviewer together with the verdict, and the mention
in one of them raises the other reviewer's unread count in the top bar."""

from __future__ import annotations

from typing import Any

import pytest
from browser_helpers import ExampleReview, LiveServer, screenshot, select_text, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SENTENCE = "The dispatcher reads requests from the queue and closes a batch."
SECOND_SENTENCE = "The gateway authenticates the caller."
FIRST_TITLE = "Who closes a batch, and when?"
SECOND_TITLE = "Authentication before rate limiting"


def _file(page: Any, sentence: str, title: str, body: str = "") -> None:
    select_text(page, sentence)
    page.wait_for_selector("#finding-form:not([hidden])")
    page.fill("#ff-title", title)
    page.fill("#ff-body", body)
    page.click("#ff-submit")
    page.wait_for_selector(f"#doc-body mark.finding[title={title!r}]")


def _overflows(page: Any) -> int:
    return page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")


def test_a_reviewers_drafts_arrive_together_with_the_verdict_when_published(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from reviewer.models import Finding

    alice = signed_in("alice")
    bob = signed_in("bob")
    for page in (alice, bob):
        page.goto(dashboard.url + example_review.path + "#restate")
        page.wait_for_selector("#doc-body mark.finding")
    # The example's own findings are published, with their verdict.
    alice.wait_for_selector("#reviews-list li:has-text('Needs changes')")
    assert alice.is_hidden("#inbox-unread")

    _file(bob, SENTENCE, FIRST_TITLE, "@alice is this the rule you meant?")
    _file(bob, SECOND_SENTENCE, SECOND_TITLE)
    assert bob.locator("#panel-restate .finding-item.draft").count() == 2
    assert bob.inner_text("#draft-count") == "2 draft findings"
    bob.wait_for_selector("#turn:has-text('bob')")
    wait_for(lambda: Finding.objects.filter(title__in=[FIRST_TITLE, SECOND_TITLE], published_at=None).count() == 2,
             what="both drafts to be saved")
    screenshot(bob, "publish-drafts-1280")
    bob.locator("#panel-restate .finding-item.draft").first.scroll_into_view_if_needed()
    screenshot(bob, "publish-draft-items-1280")

    # Alice, the other reviewer, sees neither draft, not even after a reload.
    alice.wait_for_timeout(1000)
    alice.reload()
    alice.wait_for_selector("#doc-body mark.finding")
    for title in (FIRST_TITLE, SECOND_TITLE):
        assert alice.query_selector(f"mark.finding[title={title!r}]") is None
        assert alice.query_selector(f".finding-item:has-text({title!r})") is None

    bob.select_option("#publish-verdict", "needs_changes")
    bob.fill("#publish-summary", "Two gaps in how a batch is formed and admitted.")
    bob.once("dialog", lambda dialog: dialog.accept())
    bob.click("#publish-review")
    bob.wait_for_selector("#draft-count:has-text('No draft findings')")

    # Both arrive on alice's page at once, each with bob's verdict.
    for title in (FIRST_TITLE, SECOND_TITLE):
        alice.wait_for_selector(f"#doc-body mark.finding[title={title!r}]", timeout=3000)
        item = alice.locator(f"#panel-restate .finding-item:has-text({title!r})")
        assert item.locator(".verdict-needs_changes").inner_text() == "Needs changes"
        assert item.locator(".badge.draft").count() == 0
    alice.wait_for_selector("#reviews-list li:has-text('bob: Needs changes')")
    assert "Two gaps in how a batch" in alice.inner_text("#reviews-list")
    # The mention raised alice's unread count in the top bar, live.
    alice.wait_for_selector("#inbox-unread:not([hidden])", timeout=3000)
    assert alice.inner_text("#inbox-unread") == "1"
    assert not Finding.objects.filter(published_at=None).exists()
    screenshot(alice, "publish-arrived-1280")
    assert _overflows(alice) <= 0

    alice.set_viewport_size({"width": 800, "height": 900})
    alice.locator("#review-bar").scroll_into_view_if_needed()
    screenshot(alice, "publish-arrived-800")
    assert _overflows(alice) <= 0
    bob.set_viewport_size({"width": 800, "height": 900})
    screenshot(bob, "publish-review-bar-800")

    # The inbox lists the mention; marking it read clears the count.
    alice.click("#inbox-link")
    alice.wait_for_selector(".inbox-item.unread-item:has-text('bob mentioned you')")
    screenshot(alice, "inbox-800")
    alice.click(".inbox-item button[data-read]")
    alice.wait_for_selector("#inbox-unread[hidden]", state="attached")
    bob.goto(dashboard.url + "/inbox/")
    bob.wait_for_selector("text=Nothing here yet")
    screenshot(bob, "inbox-empty-800")


def _in_thread(fn: Any) -> None:
    """Run ``fn`` beside Playwright's event loop (the services publish events through async_to_sync)."""
    import threading

    from django.db import connection

    def run() -> None:
        try:
            fn()
        finally:
            connection.close()

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(timeout=60)


def test_an_author_marks_a_finding_fixed_in_revision_2_and_its_reviewer_sees_the_count_rise(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any, django_user_model: Any
) -> None:
    from browser_helpers import PASSWORD, wait_for_page

    from reviewer.models import DesignDoc, Finding, ReviewSession
    from reviewer.review import services

    carol = django_user_model.objects.create_user("carol", password=PASSWORD)
    ReviewSession.objects.get(pk=example_review.session_id).authors.add(carol)
    doc = DesignDoc.objects.get()
    def revise() -> None:
        from django.test import override_settings

        # The findings move onto revision 2 before this returns, not later in a docs worker.
        with override_settings(REANCHOR_IN_BACKGROUND=False):
            services.doc_revise(doc=doc, author=carol, body=doc.body + "\nA second revision.\n")

    _in_thread(revise)
    finding = Finding.objects.filter(severity="fix_now").order_by("id").first()
    assert finding is not None

    alice = signed_in("alice")
    alice.goto(dashboard.url + example_review.path)
    alice.wait_for_selector("#doc-body mark.finding")
    assert alice.is_hidden("#inbox-unread")

    author = signed_in("carol", width=800)
    author.goto(dashboard.url + example_review.path + f"#finding-{finding.pk}")
    item = author.locator(f".pass-panel:not([hidden]) .finding-item[data-finding-id='{finding.pk}']")
    item.wait_for()
    assert author.query_selector("button.new-finding") is None  # authors answer findings, they do not file them
    assert item.locator("button:has-text('Delete')").count() == 0
    item.locator("select[aria-label^='State of']").select_option("fixed")
    item.locator("input[type=number]").fill("2")
    item.locator("button.apply-state").click()
    author.wait_for_selector(f".finding-item[data-finding-id='{finding.pk}'] .badge.state-fixed:has-text('Fixed in r2')")
    wait_for(lambda: Finding.objects.get(pk=finding.pk).fixed_revision == 2, what="the state to be saved")
    item.scroll_into_view_if_needed()
    screenshot(author, "author-state-800")

    # Alice filed the finding: her top bar counts the notification, live.
    alice.wait_for_selector("#inbox-unread:not([hidden])", timeout=3000)
    assert alice.inner_text("#inbox-unread") == "1"
    wait_for_page(alice, "() => document.querySelector('.badge.state-fixed') !== null")
    # One of the example's two fix-now findings is answered now.
    alice.wait_for_selector("#turn:has-text('1 open fix-now finding')")
    screenshot(alice, "reviewer-sees-fixed-1280")
