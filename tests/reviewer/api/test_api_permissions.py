"""Who reads what: every review endpoint, for the owner, a reviewer, an outsider, anonymous and staff.

Writes per role are covered next to each endpoint's own tests; this is the
read matrix in one place.
"""

from __future__ import annotations

from typing import Any

import pytest
from review_data_fixtures import *  # noqa: F403

from reviewer.review import services

pytestmark = pytest.mark.django_db

ROLES = {"owner": 200, "reviewer": 200, "staff": 200, "outsider": 404, None: 401}

ENDPOINTS = [
    "/api/docs/{doc}/",
    "/api/docs/{doc}/revisions/",
    "/api/docs/{doc}/revisions/1/",
    "/api/fleets/{fleet}/",
    "/api/fleets/{fleet}/versions/",
    "/api/sessions/{session}/",
    "/api/sessions/{session}/findings/",
    "/api/findings/{finding}/",
    "/api/findings/{finding}/replies/",
    "/api/sessions/{session}/export.json",
    "/api/sessions/{session}/export.csv",
    "/api/sessions/{session}/export.md",
    "/api/sessions/{session}/export.jsonld",
]

LISTS = ["/api/docs/", "/api/fleets/", "/api/sessions/"]


@pytest.fixture
def ids(open_review: Any, people: dict[str, Any]) -> dict[str, int]:
    finding = services.finding_create(session=open_review, author=people["reviewer"], review_pass="break",
                                      title="Failover loses the queue", anchor_exact="hot standby")
    return {"doc": open_review.doc_id, "fleet": open_review.fleet_config_id, "session": open_review.pk,
            "finding": finding.pk}


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("who", list(ROLES))
def test_reading_each_endpoint(api_as, ids, endpoint, who):
    assert api_as(who).get(endpoint.format(**ids)).status_code == ROLES[who]


@pytest.mark.parametrize("endpoint", LISTS)
@pytest.mark.parametrize("who", list(ROLES))
def test_lists_hold_what_each_role_may_see(api_as, ids, endpoint, who):
    response = api_as(who).get(endpoint)
    if who is None:
        assert response.status_code == 401
        return
    assert response.status_code == 200
    listed = [item["id"] for item in response.json()["results"]]
    key = {"/api/docs/": "doc", "/api/fleets/": "fleet", "/api/sessions/": "session"}[endpoint]
    assert listed == ([] if who == "outsider" else [ids[key]])
