"""Django admin for review data: staff only; saves make revisions and versions; key-path errors."""

from __future__ import annotations

import pytest
from review_data_fixtures import *  # noqa: F403
from review_data_fixtures import SMALL_SCENARIO

from reviewer.models import DesignDoc, FleetConfig

pytestmark = pytest.mark.django_db

PAGES = ["designdoc", "fleetconfig", "reviewsession", "finding"]


@pytest.fixture
def staff_client(client, people):
    people["staff"].is_superuser = True
    people["staff"].save()
    client.force_login(people["staff"])
    return client


@pytest.mark.parametrize("model", PAGES)
def test_non_staff_users_are_sent_to_the_admin_login(client, people, open_review, model):
    client.force_login(people["owner"])
    response = client.get(f"/admin/reviewer/{model}/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


@pytest.mark.parametrize("model", PAGES)
def test_staff_see_the_lists_and_change_pages(staff_client, open_review, model):
    from reviewer.review import services

    finding = services.finding_create(session=open_review, author=open_review.owner, review_pass="trace",
                                      title="Push to busy workers", anchor_exact="round-robin")
    objects = {"designdoc": open_review.doc, "fleetconfig": open_review.fleet_config,
               "reviewsession": open_review, "finding": finding}
    assert staff_client.get(f"/admin/reviewer/{model}/").status_code == 200
    assert staff_client.get(f"/admin/reviewer/{model}/{objects[model].pk}/change/").status_code == 200


def test_editing_a_doc_in_admin_makes_a_revision(staff_client, review_doc, people):
    response = staff_client.post(
        f"/admin/reviewer/designdoc/{review_doc.pk}/change/",
        {"title": "Edited in admin", "body": "New body.", "owner": people["owner"].pk,
         "revisions-TOTAL_FORMS": "1", "revisions-INITIAL_FORMS": "1",
         "revisions-MIN_NUM_FORMS": "0", "revisions-MAX_NUM_FORMS": "1000",
         "revisions-0-id": review_doc.revisions.get().pk, "revisions-0-doc": review_doc.pk},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    doc = DesignDoc.objects.get(pk=review_doc.pk)
    assert doc.title == "Edited in admin"
    assert list(doc.revisions.values_list("number", "body")) == [(1, review_doc.body), (2, "New body.")]


def _fleet_form(people, toml: str) -> dict[str, str]:
    return {"name": "admin fleet", "owner": str(people["owner"].pk), "doc": "", "toml": toml,
            "versions-TOTAL_FORMS": "0", "versions-INITIAL_FORMS": "0",
            "versions-MIN_NUM_FORMS": "0", "versions-MAX_NUM_FORMS": "1000"}


def test_a_bad_scenario_shows_the_emulators_key_path_error_on_the_field(staff_client, people):
    bad = SMALL_SCENARIO.replace('workers = ["small@0", "small@2"]', 'workers = ["small@9"]')
    response = staff_client.post("/admin/reviewer/fleetconfig/add/", _fleet_form(people, bad))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "hosts[0].workers[0]" in errors["toml"][0]
    assert not FleetConfig.objects.exists()


@pytest.mark.parametrize(("toml", "expected"), [
    ("[traffic\nqps = 1", "scenario: not valid TOML"),
    ('hosts = "nope"', "traffic: missing"),
    ("", "scenario: empty"),
])
def test_an_invalid_scenario_shows_its_one_error_on_the_field(staff_client, people, toml, expected):
    response = staff_client.post("/admin/reviewer/fleetconfig/add/", _fleet_form(people, toml))
    assert response.status_code == 200
    form = response.context["adminform"].form
    messages = [m for field in form.errors.values() for m in field]
    assert messages == form.errors["toml"]
    assert len(messages) == 1 and expected in messages[0], messages


def test_a_good_scenario_saves_with_a_version_and_shows_the_numbers(staff_client, people):
    response = staff_client.post("/admin/reviewer/fleetconfig/add/", _fleet_form(people, SMALL_SCENARIO))
    assert response.status_code == 302
    config = FleetConfig.objects.get()
    assert config.versions.count() == 1 and config.scenario["traffic"]["qps"] == 40
    page = staff_client.get(f"/admin/reviewer/fleetconfig/{config.pk}/change/").content.decode()
    assert "Numbers pass" in page
    assert "<table><thead><tr><th>Model</th>" in page
    changed = SMALL_SCENARIO.replace("qps = 40\n", "qps = 30\n", 1)
    form = _fleet_form(people, changed)
    form.update({"versions-TOTAL_FORMS": "1", "versions-INITIAL_FORMS": "1",
                 "versions-0-id": str(config.versions.get().pk), "versions-0-config": str(config.pk)})
    assert staff_client.post(f"/admin/reviewer/fleetconfig/{config.pk}/change/", form).status_code == 302
    assert list(config.versions.values_list("number", flat=True)) == [1, 2]


def test_tokens_are_managed_in_admin(staff_client, people):
    from rest_framework.authtoken.models import Token

    Token.objects.create(user=people["reviewer"])
    page = staff_client.get("/admin/authtoken/tokenproxy/")
    assert page.status_code == 200 and "reviewer" in page.content.decode()


def test_a_finding_changed_in_admin_gets_a_new_version_and_is_announced(staff_client, open_review, monkeypatch):
    from reviewer.models import Finding
    from reviewer.review import services

    finding = services.finding_create(session=open_review, author=open_review.owner, review_pass="trace",
                                      title="Push to busy workers", anchor_exact="round-robin")
    sent = []
    monkeypatch.setattr("reviewer.realtime.groups.session_event", lambda sid, event, data: sent.append((event, data)))
    response = staff_client.post(
        f"/admin/reviewer/finding/{finding.pk}/change/",
        {"session": open_review.pk, "author": open_review.owner.pk, "review_pass": "trace",
         "title": "Pull, not push", "body": "", "severity": "fix_now", "position": 0, "status": "open",
         "trace_hop": "", "evidence_run_id": "", "evidence_t_from_s": "", "evidence_t_to_s": "",
         "evidence_metric": "",
         "replies-TOTAL_FORMS": "0", "replies-INITIAL_FORMS": "0",
         "replies-MIN_NUM_FORMS": "0", "replies-MAX_NUM_FORMS": "1000"},
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    changed = Finding.objects.get(pk=finding.pk)
    assert (changed.title, changed.version) == ("Pull, not push", 2)
    assert [(event, data["finding"]["title"]) for event, data in sent] == [("finding.updated", "Pull, not push")]


def test_a_new_owner_set_in_admin_is_kept_for_docs_and_fleet_configs(staff_client, review_doc, review_fleet, people):
    doc_form = {"title": review_doc.title, "body": review_doc.body, "owner": people["reviewer"].pk,
                "revisions-TOTAL_FORMS": "1", "revisions-INITIAL_FORMS": "1",
                "revisions-MIN_NUM_FORMS": "0", "revisions-MAX_NUM_FORMS": "1000",
                "revisions-0-id": review_doc.revisions.get().pk, "revisions-0-doc": review_doc.pk}
    response = staff_client.post(f"/admin/reviewer/designdoc/{review_doc.pk}/change/", doc_form)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert DesignDoc.objects.get(pk=review_doc.pk).owner == people["reviewer"]

    fleet_form = _fleet_form(people, review_fleet.toml)
    fleet_form.update({"name": review_fleet.name, "owner": str(people["reviewer"].pk),
                       "doc": str(review_fleet.doc_id or ""),
                       "versions-TOTAL_FORMS": "1", "versions-INITIAL_FORMS": "1",
                       "versions-0-id": str(review_fleet.versions.get().pk),
                       "versions-0-config": str(review_fleet.pk)})
    response = staff_client.post(f"/admin/reviewer/fleetconfig/{review_fleet.pk}/change/", fleet_form)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert FleetConfig.objects.get(pk=review_fleet.pk).owner == people["reviewer"]


def test_a_reviewer_removed_in_admin_loses_the_live_feed(staff_client, open_review, people, monkeypatch):
    cut = []
    monkeypatch.setattr("reviewer.realtime.groups.access_withdrawn",
                        lambda session_id, user_ids, run_ids: cut.append((session_id, set(user_ids))))
    response = staff_client.post(
        f"/admin/reviewer/reviewsession/{open_review.pk}/change/",
        {"title": open_review.title, "doc": open_review.doc_id, "fleet_config": open_review.fleet_config_id,
         "owner": open_review.owner_id, "current_pass": "restate", "status": "open"},
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    assert cut == [(open_review.pk, {people["reviewer"].pk})]
