"""/api/sessions/: review sessions, participants, permissions."""

from __future__ import annotations

import pytest
from review_data_fixtures import *  # noqa: F403

from reviewer.errors import Forbidden
from reviewer.models import ReviewSession
from reviewer.review import services

pytestmark = pytest.mark.django_db


def test_it_opens_a_session_with_reviewers(api_as, review_doc, review_fleet):
    response = api_as("owner").post(
        "/api/sessions/",
        {"doc": review_doc.pk, "fleet_config": review_fleet.pk, "title": "R", "reviewers": ["reviewer"]},
        format="json",
    )
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["owner"] == "owner" and data["reviewers"] == ["reviewer"]
    assert data["current_pass"] == "restate" and data["status"] == "open"
    assert data["finding_counts"] == {"fix_now": 0, "clarify": 0, "mention": 0, "orphaned": 0}


def test_it_refuses_a_doc_the_user_cannot_see(api_as, review_doc):
    response = api_as("outsider").post("/api/sessions/", {"doc": review_doc.pk}, format="json")
    assert response.status_code == 400 and "doc" in response.json()


def test_it_refuses_an_unknown_reviewer(api_as, review_doc):
    response = api_as("owner").post("/api/sessions/", {"doc": review_doc.pk, "reviewers": ["nobody"]}, format="json")
    assert response.status_code == 400 and "reviewers" in response.json()


@pytest.mark.parametrize(("who", "status"), [("owner", 200), ("reviewer", 200), ("staff", 200),
                                             ("outsider", 404), (None, 401)])
def test_who_may_see_a_session(api_as, open_review, who, status):
    assert api_as(who).get(f"/api/sessions/{open_review.pk}/").status_code == status


def test_lists_hold_only_the_users_sessions(api_as, open_review, people):
    theirs = services.doc_create(owner=people["outsider"], title="Theirs")
    other = services.session_create(owner=people["outsider"], doc=theirs)
    assert [s["id"] for s in api_as("reviewer").get("/api/sessions/").json()["results"]] == [open_review.pk]
    assert [s["id"] for s in api_as("outsider").get("/api/sessions/").json()["results"]] == [other.pk]
    assert {s["id"] for s in api_as("staff").get("/api/sessions/").json()["results"]} == {open_review.pk, other.pk}
    assert api_as(None).get("/api/sessions/").status_code == 401


@pytest.mark.parametrize(("who", "status"), [("owner", 200), ("staff", 200), ("reviewer", 403),
                                             ("outsider", 404), (None, 401)])
def test_only_the_owner_manages_participants(api_as, open_review, who, status):
    response = api_as(who).patch(
        f"/api/sessions/{open_review.pk}/", {"reviewers": ["reviewer", "outsider"]}, format="json"
    )
    assert response.status_code == status
    expected = {"reviewer", "outsider"} if status == 200 else {"reviewer"}
    assert {u.username for u in ReviewSession.objects.get(pk=open_review.pk).reviewers.all()} == expected


def test_the_owner_moves_the_session_to_another_pass_and_closes_it(api_as, open_review):
    url = f"/api/sessions/{open_review.pk}/"
    data = api_as("owner").patch(url, {"current_pass": "trace", "status": "closed"}, format="json").json()
    assert (data["current_pass"], data["status"]) == ("trace", "closed")
    assert api_as("owner").patch(url, {"current_pass": "nap"}, format="json").status_code == 400


@pytest.mark.parametrize(("who", "status"), [("reviewer", 200), ("owner", 200), ("outsider", 404)])
def test_participants_move_the_session_between_passes(api_as, open_review, who, status):
    response = api_as(who).patch(f"/api/sessions/{open_review.pk}/", {"current_pass": "break"}, format="json")
    assert response.status_code == status
    assert ReviewSession.objects.get(pk=open_review.pk).current_pass == ("break" if status == 200 else "restate")


def test_a_reviewer_may_put_the_session_back_unchanged_except_for_the_pass(api_as, open_review):
    client = api_as("reviewer")
    url = f"/api/sessions/{open_review.pk}/"
    current = client.get(url).json()
    assert client.put(url, dict(current, current_pass="numbers"), format="json").status_code == 200
    assert client.put(url, dict(current, title="Mine now"), format="json").status_code == 403


def test_a_sessions_doc_cannot_be_swapped(api_as, open_review, people):
    other = services.doc_create(owner=people["owner"], title="Other", body="")
    response = api_as("owner").patch(f"/api/sessions/{open_review.pk}/", {"doc": other.pk}, format="json")
    assert response.status_code == 400 and "doc" in response.json()


@pytest.mark.parametrize(("who", "status"), [("reviewer", 403), ("outsider", 404), (None, 401), ("owner", 204)])
def test_only_the_owner_deletes_a_session(api_as, open_review, who, status):
    assert api_as(who).delete(f"/api/sessions/{open_review.pk}/").status_code == status


def test_a_token_authenticates_scripts_and_no_credentials_get_401(open_review, people):
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    token = Token.objects.create(user=people["reviewer"])
    client = APIClient()
    anonymous = client.get("/api/sessions/")
    assert anonymous.status_code == 401 and anonymous["WWW-Authenticate"] == "Token"
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    assert [s["id"] for s in client.get("/api/sessions/").json()["results"]] == [open_review.pk]
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-key")
    assert client.get("/api/sessions/").status_code == 401


def test_the_browser_session_authenticates_too(client, open_review, people):
    client.force_login(people["owner"])
    assert client.get(f"/api/sessions/{open_review.pk}/").status_code == 200


def test_the_list_counts_findings_by_bucket_in_a_fixed_number_of_queries(api_as, open_review, people):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from reviewer.models import Finding

    open_review.reviewers.add(people["staff"])  # a second reviewer: the counts must not double
    for severity, status in [("fix_now", "open"), ("fix_now", "open"), ("clarify", "open"),
                             ("mention", "dropped")]:
        services.finding_create(session=open_review, author=people["reviewer"], review_pass="trace",
                                title="t", severity=severity, status=status)
    Finding.objects.filter(severity="clarify").update(orphaned=True)

    def listed() -> tuple[int, dict]:
        with CaptureQueriesContext(connection) as ctx:
            data = api_as("reviewer").get("/api/sessions/").json()["results"]
        mine = next(s for s in data if s["id"] == open_review.pk)
        return len(ctx.captured_queries), mine["finding_counts"]

    queries, counts = listed()
    assert counts == {"fix_now": 2, "clarify": 1, "mention": 0, "orphaned": 1}
    for _ in range(3):
        services.session_create(owner=people["owner"], doc=open_review.doc, reviewers=[people["reviewer"]])
    assert listed() == (queries, counts)


def test_it_refuses_a_reviewer_who_opens_their_own_session_on_the_owners_doc(api_as, open_review):
    response = api_as("reviewer").post(
        "/api/sessions/", {"doc": open_review.doc.pk, "reviewers": ["outsider"]}, format="json"
    )
    assert response.status_code == 403, response.content
    assert ReviewSession.objects.filter(doc=open_review.doc).count() == 1
    assert api_as("outsider").get(f"/api/docs/{open_review.doc.pk}/").status_code == 404


def test_it_refuses_a_reviewer_who_puts_the_owners_fleet_config_in_their_session(api_as, open_review, people):
    mine = services.doc_create(owner=people["reviewer"], title="Mine")
    response = api_as("reviewer").post(
        "/api/sessions/", {"doc": mine.pk, "fleet_config": open_review.fleet_config.pk}, format="json"
    )
    assert response.status_code == 403, response.content
    assert not ReviewSession.objects.filter(doc=mine).exists()


def test_the_service_itself_refuses_a_session_on_someone_elses_doc_or_fleet_config(open_review, people):
    # Every way in (API, page, commands) goes through the service, which keeps the rule.
    with pytest.raises(Forbidden) as refused:
        services.session_create(owner=people["reviewer"], doc=open_review.doc, reviewers=[people["outsider"]])
    assert refused.value.field == "doc"
    mine = services.doc_create(owner=people["reviewer"], title="Mine")
    with pytest.raises(Forbidden) as refused:
        services.session_create(owner=people["reviewer"], doc=mine, fleet_config=open_review.fleet_config)
    assert refused.value.field == "fleet_config"
    assert ReviewSession.objects.filter(owner=people["reviewer"]).count() == 0


def test_it_takes_the_doc_away_from_a_removed_reviewer(api_as, open_review):
    api_as("reviewer").post("/api/sessions/", {"doc": open_review.doc.pk}, format="json")
    api_as("owner").patch(f"/api/sessions/{open_review.pk}/", {"reviewers": []}, format="json")
    assert api_as("reviewer").get(f"/api/docs/{open_review.doc.pk}/").status_code == 404


def test_it_answers_alike_for_unknown_and_deactivated_reviewers(api_as, review_doc, django_user_model):
    django_user_model.objects.create_user("gone", is_active=False)

    def refusal(names: list) -> list[str]:
        response = api_as("owner").post("/api/sessions/", {"doc": review_doc.pk, "reviewers": names}, format="json")
        assert response.status_code == 400
        return response.json()["reviewers"]

    assert refusal(["gone"]) == refusal(["nobody"]) == refusal(["reviewer", "ghost"]) == refusal([7])
    assert "nobody" not in str(refusal(["nobody"]))


@pytest.mark.parametrize("status", ["queued", "running"])
def test_it_refuses_to_delete_a_session_while_a_run_of_it_is_going(api_as, people, open_review, monkeypatch,
                                                                  status):
    from support import TINY_SCENARIO

    from reviewer.models import EmulatorRun, RunFrame
    from reviewer.runs import services as run_services

    monkeypatch.setattr("reviewer.runs.services.enqueue_run", lambda run: None)
    run = run_services.run_start(user=people["reviewer"], session=open_review, scenario=TINY_SCENARIO, speed=10)
    EmulatorRun.objects.filter(pk=run.pk).update(status=status)
    RunFrame.objects.create(run=run, i=0, t_s=0.5, data={"i": 0})
    finding = services.finding_create(session=open_review, author=people["reviewer"], review_pass="break",
                                      title="Failover loses the queue", anchor_exact="hot standby",
                                      evidence_run_id=run.pk)

    response = api_as("owner").delete(f"/api/sessions/{open_review.pk}/")
    assert response.status_code == 409, response.content
    assert "cancel" in response.json()["detail"]
    assert ReviewSession.objects.filter(pk=open_review.pk).exists()
    assert EmulatorRun.objects.filter(pk=run.pk).exists() and RunFrame.objects.filter(run=run).count() == 1
    assert type(finding).objects.filter(pk=finding.pk).exists()

    EmulatorRun.objects.filter(pk=run.pk).update(status="done")
    assert api_as("owner").delete(f"/api/sessions/{open_review.pk}/").status_code == 204
