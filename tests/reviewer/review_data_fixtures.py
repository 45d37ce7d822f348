"""Fixtures shared by the review-data tests (docs, fleet configs, sessions, findings).

Test modules import them by name (``from review_data_fixtures import *``); the
users are an owner, a reviewer, an outsider and a staff member.
"""

from __future__ import annotations

from typing import Any

import pytest
from support import TINY_SCENARIO

REVIEW_DOC_BODY = """# Chat serving

## Components
A stateless API gateway authenticates and rate limits each request.
One active dispatcher per model with a hot standby holds an in-memory queue.
The queue sends each batch to the next worker in round-robin order.
Each worker runs one batch at a time, in about 1.5 seconds.

## Goals
Serve 10k QPS at peak. Keep latency low.
"""

# The smallest useful scenario: one model on one host.
SMALL_SCENARIO = TINY_SCENARIO.replace('name = "tiny"', 'name = "small"').replace("count = 2", "count = 1")


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: Any) -> None:
    """Hash test users' passwords cheaply: PBKDF2 costs about half a second per user."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def people(django_user_model: Any) -> dict[str, Any]:
    """An owner, a reviewer, an outsider and a staff member (passwords are their names)."""
    make = django_user_model.objects.create_user
    return {
        "owner": make("owner", password="owner"),
        "reviewer": make("reviewer", password="reviewer"),
        "outsider": make("outsider", password="outsider"),
        "staff": make("staffer", password="staffer", is_staff=True),
    }


@pytest.fixture
def review_doc(people: dict[str, Any]) -> Any:
    """A design doc owned by ``owner``, made through the service (so it has revision 1)."""
    from reviewer.review import services

    return services.doc_create(owner=people["owner"], title="Chat serving", body=REVIEW_DOC_BODY)


@pytest.fixture
def review_fleet(people: dict[str, Any], review_doc: Any) -> Any:
    """A fleet config holding ``SMALL_SCENARIO``, owned by ``owner``."""
    from reviewer.review import services

    return services.fleet_config_create(owner=people["owner"], name="small fleet", toml=SMALL_SCENARIO, doc=review_doc)


@pytest.fixture
def open_review(people: dict[str, Any], review_doc: Any, review_fleet: Any) -> Any:
    """A session on ``review_doc`` owned by ``owner`` with ``reviewer`` taking part.

    It files directly: the tests that use it are about findings as every
    participant receives them; drafts and publishing have their own tests
    (test_drafts.py) on sessions that keep drafts.
    """
    from reviewer.review import services

    return services.session_create(
        owner=people["owner"],
        doc=review_doc,
        fleet_config=review_fleet,
        title="Chat serving review",
        reviewers=[people["reviewer"]],
        file_directly=True,
    )


@pytest.fixture
def api_as(people: dict[str, Any]) -> Any:
    """``api_as("owner")``: a DRF APIClient authenticated as that user (None: anonymous)."""
    from rest_framework.test import APIClient

    def make(name: str | None) -> APIClient:
        client = APIClient()
        if name is not None:
            client.force_authenticate(people[name])
        return client

    return make


__all__ = [
    "REVIEW_DOC_BODY",
    "SMALL_SCENARIO",
    "_fast_password_hashing",
    "api_as",
    "open_review",
    "people",
    "review_doc",
    "review_fleet",
]
