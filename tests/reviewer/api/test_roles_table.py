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
ROWS.update({
    "api-schema": ("get", "/api/schema/", None, _all(200)),
    "api-schema-docs": ("get", "/api/schema/docs/", None, _all(200)),
    "api-schema-redoc": ("get", "/api/schema/redoc/", None, _all(200)),
    "api-context": ("get", "/api/context.jsonld", None, _all(200)),
    "api-session-export-json": ("get", "/api/sessions/{session}/export.json", None, READ),
    "api-session-export-csv": ("get", "/api/sessions/{session}/export.csv", None, READ),
    "api-session-export-md": ("get", "/api/sessions/{session}/export.md", None, READ),
    "api-session-export-jsonld": ("get", "/api/sessions/{session}/export.jsonld", None, READ),
    "api-session-document": ("get", "/api/sessions/{session}/document/", None, READ),
    "api-session-document PATCH": ("patch", "/api/sessions/{session}/document/", {"opening": "Hi", "version": 1},
                                   _all(200, author=403, removed=404, outsider=404, anonymous=401)),
    "api-session-diff": ("get", "/api/sessions/{session}/diff/?from=1&to=1", None, READ),
    "api-session-findings-duplicates": ("get", "/api/sessions/{session}/findings/duplicates/", None, READ),
    "api-session-findings POST": ("post", "/api/sessions/{session}/findings/",
                                  {"pass": "trace", "title": "New", "anchor_exact": "hot standby"},
                                  _all(201, author=403, removed=404, outsider=404, anonymous=401)),
    # The reviewer wrote the finding, the owner wrote the one it is merged into.
    "api-finding-merge": ("post", "/api/findings/{finding}/merge/", {"into": "owner_finding", "version": 1},
                          _all(200, reviewer=403, author=403, removed=404, outsider=404, anonymous=401)),
    "api-finding": ("get", "/api/findings/{finding}/", None, READ),
    "api-finding PATCH": ("patch", "/api/findings/{finding}/", {"title": "Renamed", "version": 1},
                          _all(403, reviewer=200, staff=200, removed=404, outsider=404, anonymous=401)),
    "api-finding DELETE": ("delete", "/api/findings/{finding}/?version=1", None,
                           _all(403, reviewer=204, staff=204, removed=404, outsider=404, anonymous=401)),
    "api-finding-replies": ("get", "/api/findings/{finding}/replies/", None, READ),
    "api-finding-replies POST": ("post", "/api/findings/{finding}/replies/", {"body": "Agreed"},
                                 _all(201, removed=404, outsider=404, anonymous=401)),
    "api-session-reviews": ("get", "/api/sessions/{session}/reviews/", None, READ),
    "api-session-reviews POST": ("post", "/api/sessions/{session}/reviews/", {"verdict": "needs_changes"},
                                 _all(201, author=403, removed=404, outsider=404, anonymous=401)),
    "run-list": ("get", "/api/runs/", None, _all(200, anonymous=401)),
    "run-list POST": ("post", "/api/runs/", {"session": "session", "scenario": TINY_SCENARIO},
                      _all(202, author=400, removed=400, outsider=400, anonymous=401)),
    "sweep-create": ("post", "/api/sweeps/", {"session": "session", "scenario": TINY_SCENARIO,
                                              "key": "hosts[0].count", "values": [1, 2]},
                     _all(202, author=400, removed=400, outsider=400, anonymous=401)),
    "sweep-detail": ("get", "/api/sweeps/{sweep}/", None, READ),
    "sweep-cancel": ("post", "/api/sweeps/{sweep}/cancel/", None,
                     _all(202, author=403, removed=404, outsider=404, anonymous=401)),
    "api-notifications": ("get", "/api/notifications/", None, _all(200, anonymous=401)),
    "api-notifications-unread": ("get", "/api/notifications/unread/", None, _all(200, anonymous=401)),
    "api-notifications-read-all": ("post", "/api/notifications/read-all/", None, _all(200, anonymous=401)),
    "api-notification-settings": ("get", "/api/notifications/settings/", None, _all(200, anonymous=401)),
    "api-notification-settings PUT": ("put", "/api/notifications/settings/", {"email": "off"},
                                      _all(200, anonymous=401)),
    # The owner's notification: anyone else's id answers 404.
    "api-notification-read": ("post", "/api/notifications/{notification}/read/", None,
                              _all(404, owner=200, anonymous=401)),
    "api-doc-list": ("get", "/api/docs/", None, _all(200, anonymous=401)),
    "api-doc-list POST": ("post", "/api/docs/", {"title": "Mine", "body": "Text."}, _all(201, anonymous=401)),
    "api-doc-detail": ("get", "/api/docs/{doc}/", None, READ),
    "api-doc-detail PATCH": ("patch", "/api/docs/{doc}/", {"title": "Retitled"},
                             _all(403, owner=200, staff=200, removed=404, outsider=404, anonymous=401)),
    "api-doc-revisions": ("get", "/api/docs/{doc}/revisions/", None, READ),
    "api-doc-revision": ("get", "/api/docs/{doc}/revisions/1/", None, READ),
    "api-fleet-list": ("get", "/api/fleets/", None, _all(200, anonymous=401)),
    "api-fleet-list POST": ("post", "/api/fleets/", {"name": "mine", "toml": TINY_SCENARIO},
                            _all(201, anonymous=401)),
    "api-fleet-check": ("post", "/api/fleets/check/", {"toml": TINY_SCENARIO}, _all(200, anonymous=401)),
    "api-fleet-detail": ("get", "/api/fleets/{fleet}/", None, READ),
    "api-fleet-detail PATCH": ("patch", "/api/fleets/{fleet}/", {"name": "renamed"},
                               _all(403, owner=200, staff=200, removed=404, outsider=404, anonymous=401)),
    "api-fleet-versions": ("get", "/api/fleets/{fleet}/versions/", None, READ),
    "api-fleet-accept-figure": ("post", "/api/fleets/{fleet}/accept-figure/",
                                {"key": "traffic.peak_qps", "value": 10000, "quote": "Serve 10k QPS at peak."},
                                _all(403, owner=200, staff=200, removed=404, outsider=404, anonymous=401)),
    # A body that is no trace: those who may upload get 400, the others are stopped first.
    "api-fleet-trace": ("post", "/api/fleets/{fleet}/trace/", {"file": "not a file"},
                        _all(403, owner=400, staff=400, removed=404, outsider=404, anonymous=401)),
    # Where a big trace's check by the docs worker stands: for those who read the config.
    "api-fleet-trace-status": ("get", "/api/fleets/{fleet}/trace/{upload}/", None, READ),
    "api-session-list": ("get", "/api/sessions/", None, _all(200, anonymous=401)),
    "api-session-list POST": ("post", "/api/sessions/", {"doc": "doc", "title": "Another review"},
                              _all(403, owner=201, staff=201, removed=400, outsider=400, anonymous=401)),
})
WITHOUT_ROW_YET: frozenset[str] = frozenset()


def test_every_api_route_has_a_row() -> None:
    from reviewer.api.urls import urlpatterns

    names = {pattern.name for pattern in urlpatterns}
    assert names - {row.split(" ")[0] for row in ROWS} - WITHOUT_ROW_YET == set()


@pytest.fixture
def ids(team: dict[str, Any], drafting_review: Any, monkeypatch: Any) -> dict[str, int]:
    from reviewer.models import EmulatorRun, TraceUpload
    from reviewer.review import notifications
    from reviewer.runs import services as run_services
    from reviewer.runs import sweeps

    monkeypatch.setattr("reviewer.runs.services.enqueue_run", lambda run: None)
    run = run_services.run_start(user=team["reviewer"], session=drafting_review, scenario=TINY_SCENARIO,
                                 speed=10)
    EmulatorRun.objects.filter(pk=run.pk).update(status="running")
    finding = services.finding_create(session=drafting_review, author=team["reviewer"], review_pass="break",
                                      title="Failover loses the queue", anchor_exact="hot standby")
    type(finding).objects.filter(pk=finding.pk).update(published_at=timezone.now())
    services.session_update(session=drafting_review, reviewers=[team["reviewer"]])  # reviewer2 removed
    fleet = services.fleet_config_create(owner=team["owner"], name="small fleet", toml=TINY_SCENARIO,
                                         doc=drafting_review.doc)
    services.session_update(session=drafting_review, fleet_config=fleet)
    owner_finding = services.finding_create(session=drafting_review, author=team["owner"], review_pass="trace",
                                            title="Queue is lost", anchor_exact="in-memory queue")
    type(finding).objects.filter(pk=owner_finding.pk).update(published_at=timezone.now())
    sweep = sweeps.sweep_start(user=team["reviewer"], key="hosts[0].count", values=[1, 2],
                               scenario=TINY_SCENARIO, session=drafting_review)
    note = notifications.notify(recipient=team["owner"], kind="reply", session=drafting_review, text="Hello")
    assert note is not None
    upload = TraceUpload.objects.create(config=fleet, author=team["owner"], name="t.jsonl", path="/nonexistent",
                                        size=10)
    return {"session": drafting_review.pk, "run": run.pk, "finding": finding.pk, "owner_finding": owner_finding.pk,
            "doc": drafting_review.doc.pk, "fleet": fleet.pk, "sweep": sweep.pk, "notification": note.pk,
            "upload": upload.pk}


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
    if body is not None:  # other ids named by their fixture key
        body = {k: ids[v] if k in ("into", "session", "doc") else v for k, v in body.items()}
    kind = "multipart" if route == "api-fleet-trace" else "json"
    response = getattr(client, method)(path.format(**ids), body, format=kind)
    assert response.status_code == expected[role], response.content
