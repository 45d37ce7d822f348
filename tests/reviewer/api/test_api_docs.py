"""/api/docs/: design docs, revisions, re-anchoring on edit, permissions."""

from __future__ import annotations

import pytest
from review_data_fixtures import *  # noqa: F403
from review_data_fixtures import REVIEW_DOC_BODY

from reviewer.review import services

pytestmark = pytest.mark.django_db

GONE = "The queue sends each batch to the next worker in round-robin order."


def test_it_creates_a_doc_with_its_first_revision(api_as):
    response = api_as("owner").post("/api/docs/", {"title": "New doc", "body": "# Hi\n\nText."}, format="json")
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["owner"] == "owner" and data["revision"] == 1
    assert data["body_html"] == "<h1>Hi</h1>\n<p>Text.</p>"
    revisions = api_as("owner").get(f"/api/docs/{data['id']}/revisions/").json()["results"]
    assert [r["number"] for r in revisions] == [1]


def test_it_requires_a_title(api_as):
    response = api_as("owner").post("/api/docs/", {"body": "x"}, format="json")
    assert response.status_code == 400 and "title" in response.json()


@pytest.mark.parametrize(("who", "status"), [("owner", 200), ("reviewer", 200), ("staff", 200),
                                             ("outsider", 404), (None, 401)])
def test_who_may_read_a_doc(api_as, open_review, who, status):
    assert api_as(who).get(f"/api/docs/{open_review.doc_id}/").status_code == status


def test_lists_show_only_visible_docs(api_as, open_review, people):
    services.doc_create(owner=people["outsider"], title="Secret", body="")
    titles = {d["title"] for d in api_as("reviewer").get("/api/docs/").json()["results"]}
    assert titles == {"Chat serving"}
    assert {d["title"] for d in api_as("staff").get("/api/docs/").json()["results"]} == {"Chat serving", "Secret"}


@pytest.mark.parametrize(("who", "status"), [("owner", 200), ("staff", 200), ("reviewer", 403),
                                             ("outsider", 404), (None, 401)])
def test_who_may_edit_a_doc(api_as, open_review, who, status):
    response = api_as(who).patch(f"/api/docs/{open_review.doc_id}/", {"title": "Edited"}, format="json")
    assert response.status_code == status


def test_an_edit_re_anchors_findings_and_lists_orphans(api_as, open_review):
    reviewer = api_as("reviewer")
    url = f"/api/sessions/{open_review.pk}/findings/"
    kept = reviewer.post(url, {"pass": "numbers", "title": "10k", "anchor_exact": "Serve 10k QPS at peak."},
                         format="json").json()
    lost = reviewer.post(url, {"pass": "trace", "title": "push", "anchor_exact": GONE}, format="json").json()
    new_body = "Intro paragraph added.\n\n" + REVIEW_DOC_BODY.replace(GONE + "\n", "")
    response = api_as("owner").patch(
        f"/api/docs/{open_review.doc_id}/", {"body": new_body, "base_revision": 1}, format="json"
    )
    assert response.status_code == 200
    data = response.json()
    assert data["revision"] == 2
    assert [f["id"] for f in data["orphaned_findings"]] == [lost["id"]]
    moved = reviewer.get(f"/api/findings/{kept['id']}/").json()
    assert moved["revision"] == 2 and new_body[moved["anchor_start"] : moved["anchor_end"]] == "Serve 10k QPS at peak."
    orphans = reviewer.get(url + "?orphaned=true").json()["results"]
    assert [(f["id"], f["orphaned"], f["revision"]) for f in orphans] == [(lost["id"], True, 1)]
    assert [r["number"] for r in reviewer.get(f"/api/docs/{open_review.doc_id}/revisions/").json()["results"]] == [1, 2]
    first = reviewer.get(f"/api/docs/{open_review.doc_id}/revisions/1/").json()
    assert first["body"] == REVIEW_DOC_BODY


def test_an_edit_from_a_stale_revision_gets_409(api_as, open_review):
    client = api_as("owner")
    url = f"/api/docs/{open_review.doc_id}/"
    assert client.patch(url, {"body": "one", "base_revision": 1}, format="json").status_code == 200
    stale = client.patch(url, {"body": "two", "base_revision": 1}, format="json")
    assert stale.status_code == 409 and stale.json()["current_version"] == 2


def test_a_doc_under_review_cannot_be_deleted_but_a_free_one_can(api_as, open_review, people):
    assert api_as("owner").delete(f"/api/docs/{open_review.doc_id}/").status_code == 409
    free = services.doc_create(owner=people["owner"], title="Free", body="")
    assert api_as("reviewer").delete(f"/api/docs/{free.pk}/").status_code == 404
    assert api_as("owner").delete(f"/api/docs/{free.pk}/").status_code == 204


def test_the_list_shows_revisions_and_visible_orphans_in_a_fixed_number_of_queries(api_as, open_review, people):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    doc = open_review.doc
    # The owner's other session, which the reviewer does not take part in.
    hidden = services.session_create(owner=people["owner"], doc=doc, reviewers=[people["outsider"]])
    mine = services.finding_create(session=open_review, author=people["reviewer"], review_pass="trace",
                                   title="push", anchor_exact=GONE)
    services.finding_create(session=hidden, author=people["outsider"], review_pass="trace",
                            title="theirs", anchor_exact=GONE)
    services.doc_revise(doc=doc, author=people["owner"], body=REVIEW_DOC_BODY.replace(GONE + "\n", ""))

    def listed() -> tuple[int, tuple]:
        with CaptureQueriesContext(connection) as ctx:
            data = api_as("reviewer").get("/api/docs/").json()["results"]
        entry = next(d for d in data if d["id"] == doc.pk)
        return len(ctx.captured_queries), (entry["revision"], [f["id"] for f in entry["orphaned_findings"]])

    queries, seen = listed()
    assert seen == (2, [mine.pk])
    for i in range(3):
        other = services.doc_create(owner=people["owner"], title=f"other {i}", body="text")
        services.session_create(owner=people["owner"], doc=other, reviewers=[people["reviewer"]])
    assert listed() == (queries, seen)


def test_it_answers_a_body_over_the_upload_limit_with_json_naming_the_setting(api_as):
    body = "x" * 5_300_000
    response = api_as("owner").post("/api/docs/", {"title": "Huge", "body": body}, format="json")
    assert response.status_code == 413
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["setting"] == "DATA_UPLOAD_MAX_MEMORY_SIZE"


# --- limits, list sizes and bounded re-anchoring (one user must not stall every writer)


def test_it_lists_docs_without_their_bodies(api_as, review_doc):
    listed = api_as("owner").get("/api/docs/").json()["results"][0]
    assert "body" not in listed and "body_html" not in listed
    assert "body" in api_as("owner").get(f"/api/docs/{review_doc.pk}/").json()


def test_it_lists_revisions_with_their_size_not_their_body(api_as, review_doc, people):
    services.doc_revise(doc=review_doc, author=people["owner"], body=review_doc.body + "More.")
    listed = api_as("owner").get(f"/api/docs/{review_doc.pk}/revisions/").json()["results"]
    assert [(r["number"], "body" in r) for r in listed] == [(1, False), (2, False)]
    assert listed[1]["chars"] == len(review_doc.body) + len("More.")
    assert api_as("owner").get(f"/api/docs/{review_doc.pk}/revisions/2/").json()["body"].endswith("More.")


def test_it_refuses_a_body_over_the_doc_size_limit_naming_the_setting(api_as, review_doc, settings):
    settings.DOC_BODY_MAX_CHARS = 100
    created = api_as("owner").post("/api/docs/", {"title": "Big", "body": "x" * 101}, format="json")
    assert created.status_code == 400 and "DOC_BODY_MAX_CHARS" in created.json()["body"][0]
    revised = api_as("owner").patch(f"/api/docs/{review_doc.pk}/", {"body": "y" * 101}, format="json")
    assert revised.status_code == 400 and "DOC_BODY_MAX_CHARS" in revised.json()["body"][0]


def test_it_keeps_at_most_the_revisions_the_setting_allows(api_as, review_doc, settings):
    settings.DOC_REVISIONS_MAX = 2
    assert api_as("owner").patch(f"/api/docs/{review_doc.pk}/", {"body": "Two."}, format="json").status_code == 200
    refused = api_as("owner").patch(f"/api/docs/{review_doc.pk}/", {"body": "Three."}, format="json")
    assert refused.status_code == 429 and refused.json()["setting"] == "DOC_REVISIONS_MAX"
    assert review_doc.revisions.count() == 2


def test_it_caps_the_findings_on_one_doc(api_as, open_review, settings):
    settings.DOC_FINDINGS_MAX = 2
    url = f"/api/sessions/{open_review.pk}/findings/"
    for _ in range(2):
        assert api_as("reviewer").post(url, {"pass": "trace", "title": "t"}, format="json").status_code == 201
    refused = api_as("reviewer").post(url, {"pass": "trace", "title": "t"}, format="json")
    assert refused.status_code == 429 and refused.json()["setting"] == "DOC_FINDINGS_MAX"


def test_it_reanchors_findings_in_bounded_transactions(open_review, people, monkeypatch):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    monkeypatch.setattr(services, "REANCHOR_BATCH", 10)
    for _ in range(25):
        services.finding_create(session=open_review, author=people["reviewer"], review_pass="trace",
                                title="Round robin", anchor_exact="round-robin")
    doc = open_review.doc
    with CaptureQueriesContext(connection) as ctx:
        result = services.doc_revise(doc=doc, author=people["owner"], body="Intro.\n\n" + doc.body)
    assert len(result.moved) == 25
    # Each transaction (a savepoint inside the test's own) moves at most one batch.
    updates_per_block: list[int] = []
    for query in ctx.captured_queries:
        sql = query["sql"]
        if sql.startswith("SAVEPOINT"):
            updates_per_block.append(0)
        elif sql.startswith('UPDATE "reviewer_finding"') and updates_per_block:
            updates_per_block[-1] += 1
    moving = [n for n in updates_per_block if n]
    assert len(moving) == 3 and max(moving) <= 10, updates_per_block


def test_a_newer_revision_saved_meanwhile_takes_over_the_findings_not_yet_moved(open_review, people,
                                                                               monkeypatch):
    monkeypatch.setattr(services, "REANCHOR_BATCH", 1)
    first = services.finding_create(session=open_review, author=people["reviewer"], review_pass="trace",
                                    title="a", anchor_exact="round-robin")
    second = services.finding_create(session=open_review, author=people["reviewer"], review_pass="trace",
                                     title="b", anchor_exact="hot standby")
    doc = open_review.doc
    real_superseded = services._superseded
    calls = []

    def newer_revision_after_first_batch(revision):
        calls.append(revision.number)
        if len(calls) == 2 and revision.number == 2:
            services.doc_revise(doc=doc, author=people["owner"], body="Even newer.\n\n" + doc.body)
        return real_superseded(revision)

    monkeypatch.setattr(services, "_superseded", newer_revision_after_first_batch)
    services.doc_revise(doc=doc, author=people["owner"], body="Intro.\n\n" + doc.body)
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.revision.number, second.revision.number) == (3, 3)
