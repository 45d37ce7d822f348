"""A reviewer removed from a session loses sight of its doc everywhere, their own
fleet configs that name the doc included: the home page, the config's API answer
and the provenance check of its quotes say nothing more about the doc."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from review_data_fixtures import *  # noqa: F403
from review_data_fixtures import SMALL_SCENARIO

from reviewer.review import services

pytestmark = pytest.mark.django_db

IN_THE_DOC = "One active dispatcher per model with a hot standby holds an in-memory queue."
NOT_IN_THE_DOC = "Every worker keeps a copy of the whole queue."


@pytest.fixture
def removed_reviewers_fleet(api_as: Any, people: dict[str, Any], open_review: Any) -> int:
    """A fleet config of ``reviewer``'s naming the session's doc; then the owner removes them."""
    response = api_as("reviewer").post("/api/fleets/", {"name": "my take", "toml": SMALL_SCENARIO,
                                                        "doc": open_review.doc_id}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["doc"] == open_review.doc_id
    services.session_update(session=open_review, reviewers=[])
    services.doc_revise(doc=open_review.doc, author=people["owner"], title="Chat serving, retitled",
                        body=open_review.doc.body)
    return int(response.json()["id"])


def _marks(quote: str) -> dict[str, Any]:
    return {"provenance": {"traffic.qps": {"source": "doc", "quote": quote}}}


def test_it_shows_no_title_of_the_doc_on_the_home_page(people, removed_reviewers_fleet):
    client = Client()
    client.force_login(people["reviewer"])
    page = client.get("/").content.decode()
    assert "my take" in page
    assert "Chat serving" not in page


def test_it_names_no_doc_in_the_fleet_configs_answer(api_as, removed_reviewers_fleet):
    assert api_as("reviewer").get(f"/api/fleets/{removed_reviewers_fleet}/").json()["doc"] is None


def test_its_quote_check_tells_nothing_about_the_docs_text(api_as, removed_reviewers_fleet):
    url = f"/api/fleets/{removed_reviewers_fleet}/"
    there = api_as("reviewer").patch(url, _marks(IN_THE_DOC), format="json")
    absent = api_as("reviewer").patch(url, _marks(NOT_IN_THE_DOC), format="json")
    assert there.status_code == absent.status_code


def test_it_still_checks_quotes_for_a_reviewer_who_sees_the_doc(api_as, open_review):
    response = api_as("reviewer").post("/api/fleets/", {"name": "my take", "toml": SMALL_SCENARIO,
                                                        "doc": open_review.doc_id}, format="json")
    url = f"/api/fleets/{response.json()['id']}/"
    assert api_as("reviewer").patch(url, _marks(IN_THE_DOC), format="json").status_code == 200
    refused = api_as("reviewer").patch(url, _marks(NOT_IN_THE_DOC), format="json")
    assert refused.status_code == 400 and "provenance.traffic.qps" in refused.content.decode()
