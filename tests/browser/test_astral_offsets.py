"""Highlights after an emoji or an astral letter cover exactly the text selected.

The server counts code points and the DOM counts UTF-16 units, so "😀" and
"𝔘" are one character on one side and two on the other; the page converts
(static/reviewer/lib/offsets.js).
"""

from __future__ import annotations

from typing import Any

import pytest
from browser_helpers import ExampleReview, LiveServer, screenshot, select_text
from test_review_document_page import in_thread

pytestmark = pytest.mark.browser

EMOJI_QUOTE = "the gateway answers from its cache"
ASTRAL_QUOTE = "the standby takes over within a second"
PARAGRAPH = (f"\n\nAstral check 😀😀 {EMOJI_QUOTE} when it can. "
             f"The 𝔘nit 𝔘 says {ASTRAL_QUOTE} of a failure.\n")


def test_a_selection_after_astral_characters_is_highlighted_exactly(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from reviewer.models import Finding, ReviewSession
    from reviewer.review import services

    session = ReviewSession.objects.get(pk=example_review.session_id)

    def revise() -> None:
        from django.test import override_settings

        with override_settings(REANCHOR_IN_BACKGROUND=False):
            services.doc_revise(doc=session.doc, author=example_review.alice, body=session.doc.body + PARAGRAPH)

    in_thread(revise)
    alice = signed_in("alice")
    alice.goto(dashboard.url + example_review.path)
    alice.wait_for_selector("#doc-body")
    for title, quote in (("After the emoji", EMOJI_QUOTE), ("After the astral letter", ASTRAL_QUOTE)):
        select_text(alice, quote)
        alice.wait_for_selector("#finding-form:not([hidden])")
        assert alice.input_value("#ff-quote") == quote
        alice.fill("#ff-title", title)
        alice.click("#ff-submit")
        mark = alice.wait_for_selector(f"#doc-body mark.finding[title='{title}']")
        finding = Finding.objects.get(title=title)
        # The server's offsets are code points of the source.
        body = finding.revision.body
        assert body[finding.anchor_start:finding.anchor_end] == quote
        marks = alice.locator(f"#doc-body mark.finding[data-finding-id='{finding.pk}']").all_inner_texts()
        assert "".join(marks) == quote, marks
        assert mark is not None
    screenshot(alice, "astral-highlights-1280")
