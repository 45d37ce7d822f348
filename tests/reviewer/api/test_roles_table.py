"""Roles by endpoint, from one table: what each role gets from each call.

``ROWS`` is the table: route name -> (method, path, body, {role: status}).
Every route of ``reviewer.api.urls`` must have a row or be listed in
``WITHOUT_ROW_YET``, so a new endpoint without a row fails
``test_every_api_route_has_a_row``. To change who may do something, change its row.
"""

from __future__ import annotations

from typing import Any

import pytest
from collab_fixtures import *  # noqa: F403
from django.utils import timezone
from rest_framework.test import APIClient
from review_data_fixtures import *  # noqa: F403
from support import TINY_SCENARIO

from reviewer.review import services

pytestmark = pytest.mark.django_db

ROLES = ("owner", "reviewer", "author", "removed", "outsider", "anonymous", "staff")


def _all(status: int, **overrides: int) -> dict[str, int]:
    return {role: overrides.get(role, status) for role in ROLES}


READ = _all(200, removed=404, outsider=404, anonymous=401)
ROWS: dict[str, tuple[str, str, Any, dict[str, int]]] = {
    "api-session-detail": ("get", "/api/sessions/{session}/", None, READ),
    "api-session-findings": ("get", "/api/sessions/{session}/findings/", None, READ),
    "api-session-turn": ("get", "/api/sessions/{session}/turn/", None, READ),
    "run-detail": ("get", "/api/runs/{run}/", None, READ),
    "run-frames": ("get", "/api/runs/{run}/frames/", None, READ),
    "api-session-findings-reorder": (
        "post", "/api/sessions/{session}/findings/reorder/", {"severity": "fix_now", "ids": ["finding"]},
        _all(403, owner=200, staff=200, removed=404, outsider=404, anonymous=401)),
    "run-faults": ("post", "/api/runs/{run}/faults/", {"kill": "host:1"},
                   _all(202, author=403, removed=404, outsider=404, anonymous=401)),
    "api-session-detail PATCH": ("patch", "/api/sessions/{session}/", {"current_pass": "break"},
                                 _all(200, author=403, removed=404, outsider=404, anonymous=401)),
    # A run of the session is running: deleting it answers 409 to those who may delete it.
    "api-session-detail DELETE": ("delete", "/api/sessions/{session}/", None,
                                  _all(403, owner=409, staff=409, removed=404, outsider=404, anonymous=401)),
    # Resolving a thread, as on a code review: the session's reviewers and the doc's authors.
    "api-finding-state": ("post", "/api/findings/{finding}/state/", {"state": "fixed"},
                          _all(200, removed=404, outsider=404, anonymous=401)),
    "run-cancel": ("post", "/api/runs/{run}/cancel/", None,
                   _all(202, author=403, removed=404, outsider=404, anonymous=401)),
}
# Routes whose rows are still to be written; none may be added here.
WITHOUT_ROW_YET = frozenset({
    "api-schema", "api-schema-docs", "api-schema-redoc", "api-context", "api-session-export-json",
    "api-session-export-csv", "api-session-export-md", "api-session-export-jsonld", "api-session-document",
    "api-session-diff", "api-session-findings-duplicates", "api-finding-merge", "api-finding",
    "api-finding-replies", "run-list", "sweep-create", "sweep-detail", "sweep-cancel", "api-session-reviews",
    "api-notifications", "api-notifications-unread", "api-notifications-read-all",
    "api-notification-settings", "api-notification-read", "api-doc-list", "api-doc-detail",
    "api-doc-revision", "api-doc-revisions", "api-fleet-list", "api-fleet-check", "api-fleet-detail",
    "api-fleet-accept-figure", "api-fleet-trace", "api-fleet-versions", "api-session-list",
})


def test_every_api_route_has_a_row() -> None:
    from reviewer.api.urls import urlpatterns

    names = {pattern.name for pattern in urlpatterns}
    assert names - {row.split(" ")[0] for row in ROWS} - WITHOUT_ROW_YET == set()


@pytest.fixture
def ids(team: dict[str, Any], drafting_review: Any, monkeypatch: Any) -> dict[str, int]:
    from reviewer.models import EmulatorRun
    from reviewer.runs import services as run_services

    monkeypatch.setattr("reviewer.runs.services.enqueue_run", lambda run: None)
    run = run_services.run_start(user=team["reviewer"], session=drafting_review, scenario=TINY_SCENARIO,
                                 speed=10)
    EmulatorRun.objects.filter(pk=run.pk).update(status="running")
    finding = services.finding_create(session=drafting_review, author=team["reviewer"], review_pass="break",
                                      title="Failover loses the queue", anchor_exact="hot standby")
    type(finding).objects.filter(pk=finding.pk).update(published_at=timezone.now())
    services.session_update(session=drafting_review, reviewers=[team["reviewer"]])  # reviewer2 removed
    return {"session": drafting_review.pk, "run": run.pk, "finding": finding.pk}


@pytest.mark.parametrize("route", sorted(ROWS))
@pytest.mark.parametrize("role", ROLES)
def test_each_role_gets_what_the_table_says(team, ids, route, role):
    method, path, body, expected = ROWS[route]
    client = APIClient()
    user = {"removed": "reviewer2", "anonymous": None}.get(role, role)
    if user is not None:
        client.force_authenticate(team[user])
    if body is not None and "ids" in body:  # ids named by their fixture key
        body = {**body, "ids": [ids[key] for key in body["ids"]]}
    response = getattr(client, method)(path.format(**ids), body, format="json")
    assert response.status_code == expected[role], response.content
