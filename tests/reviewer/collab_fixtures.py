"""A review team for the drafts, authors and notifications tests.

``team``: the owner, two reviewers, the doc's author and an outsider, each
with an e-mail address; ``drafting_review``: a session on ``review_doc`` that
keeps drafts (it does not file directly), with ``author`` as the doc's author.
"""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def team(people: dict[str, Any], django_user_model: Any) -> dict[str, Any]:
    """``people`` plus ``reviewer2`` and ``author``; everyone has an e-mail address."""
    make = django_user_model.objects.create_user
    members = {**people, "reviewer2": make("reviewer2", password="reviewer2"),
               "author": make("author", password="author")}
    for name, user in members.items():
        user.email = f"{name}@example.test"
        user.save(update_fields=["email"])
    return members


@pytest.fixture
def drafting_review(team: dict[str, Any], review_doc: Any) -> Any:
    """A session that keeps drafts: owner, reviewers ``reviewer`` and ``reviewer2``, author ``author``."""
    from reviewer.review import services

    return services.session_create(
        owner=team["owner"], doc=review_doc, title="Chat serving review",
        reviewers=[team["reviewer"], team["reviewer2"]], authors=[team["author"]],
    )


@pytest.fixture
def team_api(team: dict[str, Any]) -> Any:
    """``team_api("author")``: an APIClient authenticated as that member of ``team``."""
    from rest_framework.test import APIClient

    def make(name: str) -> APIClient:
        client = APIClient()
        client.force_authenticate(team[name])
        return client

    return make


QUOTE = "One active dispatcher per model with a hot standby holds an in-memory queue."


def file_finding(client: Any, session: Any, title: str, **extra: Any) -> dict[str, Any]:
    """POST a finding; its answer (201 asserted)."""
    payload = {"pass": "trace", "title": title, "severity": "fix_now", "anchor_exact": QUOTE, **extra}
    response = client.post(f"/api/sessions/{session.pk}/findings/", payload, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def listed_titles(client: Any, session: Any) -> list[str]:
    """Titles of the findings ``client`` sees in the session's list."""
    response = client.get(f"/api/sessions/{session.pk}/findings/")
    assert response.status_code == 200, response.content
    return sorted(f["title"] for f in response.json()["results"])
