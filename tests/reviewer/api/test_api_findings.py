"""/api/sessions/<id>/findings/ and /api/findings/<id>/: CRUD, filters, permissions, 409."""

from __future__ import annotations

from typing import Any

import pytest
from review_data_fixtures import *  # noqa: F403

from reviewer.models import Finding
from reviewer.review import services

pytestmark = pytest.mark.django_db

QUOTE = "One active dispatcher per model with a hot standby holds an in-memory queue."


def _url(session: Any) -> str:
    return f"/api/sessions/{session.pk}/findings/"


def _new(api_as: Any, session: Any, who: str = "reviewer", **extra: Any) -> Any:
    payload = {"pass": "trace", "title": "Only copy of the queue", "body": "Lost on failover.",
               "severity": "fix_now", "anchor_exact": QUOTE, **extra}
    return api_as(who).post(_url(session), payload, format="json")


def test_it_creates_a_finding_anchored_on_the_latest_revision(api_as, open_review):
    response = _new(api_as, open_review)
    assert response.status_code == 201, response.content
    data = response.json()
    body = open_review.doc.body
    assert data["pass"] == "trace"
    assert data["author"] == "reviewer"
    assert data["revision"] == 1
    assert body[data["anchor_start"] : data["anchor_end"]] == QUOTE
    assert body.endswith(data["anchor_suffix"]) or data["anchor_suffix"] in body
    assert len(data["anchor_prefix"]) == 32
    assert data["version"] == 1 and data["orphaned"] is False
    assert data["body_html"] == "<p>Lost on failover.</p>"


def test_it_anchors_by_offsets_alone(api_as, open_review):
    start = open_review.doc.body.index("round-robin")
    response = _new(api_as, open_review, anchor_exact="", anchor_start=start, anchor_end=start + 11)
    assert response.status_code == 201, response.content
    assert response.json()["anchor_exact"] == "round-robin"


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"anchor_exact": "this sentence is not in the doc"}, "anchor_exact"),
        ({"anchor_exact": "", "anchor_start": 5, "anchor_end": 99999}, "anchor_end"),
        ({"severity": "urgent"}, "severity"),
        ({"pass": "lunch"}, "pass"),
        ({"title": ""}, "title"),
        ({"trace_hop": "teleporter"}, "trace_hop"),
        ({"evidence_t_from_s": 50, "evidence_t_to_s": 10}, "evidence_t_to_s"),
    ],
)
def test_it_answers_bad_input_with_a_message_on_the_field(api_as, open_review, extra, field):
    response = _new(api_as, open_review, **extra)
    assert response.status_code == 400
    assert field in response.json(), response.json()


def test_it_refuses_findings_on_a_closed_session(api_as, open_review):
    services.session_update(session=open_review, status="closed")
    response = _new(api_as, open_review)
    assert response.status_code == 400
    assert "closed" in response.json()["session"][0]


@pytest.mark.parametrize(("who", "status"), [("owner", 201), ("reviewer", 201), ("staff", 201),
                                             ("outsider", 404), (None, 401)])
def test_who_may_add_findings(api_as, open_review, who, status):
    assert _new(api_as, open_review, who=who).status_code == status


@pytest.mark.parametrize(("who", "status"), [("owner", 200), ("reviewer", 200), ("staff", 200),
                                             ("outsider", 404), (None, 401)])
def test_who_may_list_and_read_findings(api_as, open_review, who, status):
    finding_id = _new(api_as, open_review).json()["id"]
    assert api_as(who).get(_url(open_review)).status_code == status
    assert api_as(who).get(f"/api/findings/{finding_id}/").status_code == status


def test_it_lists_findings_in_report_order_and_paginates(api_as, open_review):
    for severity in ["mention", "fix_now", "clarify", "fix_now"]:
        _new(api_as, open_review, severity=severity, title=f"a {severity}")
    data = api_as("owner").get(_url(open_review)).json()
    assert data["count"] == 4
    assert [f["severity"] for f in data["results"]] == ["fix_now", "fix_now", "clarify", "mention"]
    assert [f["position"] for f in data["results"][:2]] == [0, 1]
    assert {"next", "previous"} <= set(data)


def test_the_list_costs_the_same_queries_however_many_findings_it_shows(api_as, open_review):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            data = api_as("owner").get(_url(open_review)).json()
        assert all(f["reply_count"] == 0 for f in data["results"])
        return len(ctx.captured_queries)

    _new(api_as, open_review)
    one = queries()
    for _ in range(4):
        _new(api_as, open_review)
    assert queries() == one


def test_it_filters_by_pass_severity_status_and_author(api_as, open_review):
    _new(api_as, open_review, who="reviewer", **{"pass": "numbers", "severity": "clarify"})
    _new(api_as, open_review, who="owner", **{"pass": "trace", "severity": "fix_now"})
    _new(api_as, open_review, who="owner", **{"pass": "break", "severity": "mention", "status": "resolved"})
    client = api_as("owner")

    def titles(query: str) -> list[tuple[str, str]]:
        return [(f["pass"], f["author"]) for f in client.get(_url(open_review) + query).json()["results"]]

    assert titles("?pass=numbers") == [("numbers", "reviewer")]
    assert titles("?severity=fix_now") == [("trace", "owner")]
    assert titles("?status=resolved") == [("break", "owner")]
    assert sorted(titles("?author=owner")) == [("break", "owner"), ("trace", "owner")]
    assert titles("?author=owner&pass=trace&severity=fix_now&status=open") == [("trace", "owner")]
    assert client.get(_url(open_review) + "?severity=urgent").status_code == 400


def test_only_the_author_or_staff_changes_a_finding(api_as, open_review):
    data = _new(api_as, open_review, who="reviewer").json()
    url = f"/api/findings/{data['id']}/"
    assert api_as("owner").patch(url, {"title": "x", "version": 1}, format="json").status_code == 403
    assert api_as("outsider").patch(url, {"title": "x", "version": 1}, format="json").status_code == 404
    assert api_as(None).patch(url, {"title": "x", "version": 1}, format="json").status_code == 401
    ok = api_as("reviewer").patch(url, {"title": "Mine", "version": 1}, format="json")
    assert ok.status_code == 200 and ok.json()["version"] == 2
    assert api_as("staff").patch(url, {"status": "resolved", "version": 2}, format="json").status_code == 200
    assert Finding.objects.get(pk=data["id"]).status == "resolved"


def test_a_stale_version_gets_409_with_the_current_version(api_as, open_review):
    data = _new(api_as, open_review).json()
    url = f"/api/findings/{data['id']}/"
    client = api_as("reviewer")
    assert client.patch(url, {"title": "first", "version": 1}, format="json").status_code == 200
    stale = client.patch(url, {"title": "second", "version": 1}, format="json")
    assert stale.status_code == 409
    assert stale.json()["current_version"] == 2
    assert Finding.objects.get(pk=data["id"]).title == "first"
    put = dict(client.get(url).json(), title="third")
    put["version"] = 1
    assert client.put(url, put, format="json").status_code == 409


def test_an_update_without_a_version_is_refused(api_as, open_review):
    data = _new(api_as, open_review).json()
    response = api_as("reviewer").patch(f"/api/findings/{data['id']}/", {"title": "x"}, format="json")
    assert response.status_code == 400 and "version" in response.json()


def test_moving_a_finding_to_another_bucket_puts_it_last_there(api_as, open_review):
    first = _new(api_as, open_review, severity="clarify").json()
    second = _new(api_as, open_review, severity="fix_now").json()
    moved = api_as("reviewer").patch(
        f"/api/findings/{second['id']}/", {"severity": "clarify", "version": 1}, format="json"
    ).json()
    assert first["position"] == 0 and moved["position"] == 1


def test_changing_the_quote_re_anchors_it(api_as, open_review):
    data = _new(api_as, open_review).json()
    changed = api_as("reviewer").patch(
        f"/api/findings/{data['id']}/", {"anchor_exact": "Keep latency low.", "version": 1}, format="json"
    ).json()
    body = open_review.doc.body
    assert body[changed["anchor_start"] : changed["anchor_end"]] == "Keep latency low."


def test_delete_by_author_and_version_check(api_as, open_review):
    data = _new(api_as, open_review).json()
    url = f"/api/findings/{data['id']}/"
    assert api_as("owner").delete(url).status_code == 403
    assert api_as("reviewer").delete(url + "?version=7").status_code == 409
    assert api_as("reviewer").delete(url + "?version=1").status_code == 204
    assert not Finding.objects.filter(pk=data["id"]).exists()


def test_the_owner_ranks_a_bucket(api_as, open_review):
    ids = [_new(api_as, open_review, severity="fix_now", title=f"f{i}").json()["id"] for i in range(3)]
    url = f"/api/sessions/{open_review.pk}/findings/reorder/"
    body = {"severity": "fix_now", "ids": [ids[2], ids[0]]}
    assert api_as("reviewer").post(url, body, format="json").status_code == 403
    assert api_as("outsider").post(url, body, format="json").status_code == 404
    response = api_as("owner").post(url, body, format="json")
    assert response.status_code == 200
    assert [f["id"] for f in response.json()] == [ids[2], ids[0], ids[1]]
    listed = api_as("owner").get(_url(open_review) + "?severity=fix_now").json()["results"]
    assert [f["id"] for f in listed] == [ids[2], ids[0], ids[1]]
    bad = api_as("owner").post(url, {"severity": "fix_now", "ids": [999999]}, format="json")
    assert bad.status_code == 400 and "ids" in bad.json()
    huge = api_as("owner").post(url, {"severity": "fix_now", "ids": [10**30]}, format="json")
    assert huge.status_code == 400 and "ids" in huge.json()


def test_participants_reply_in_a_thread(api_as, open_review):
    data = _new(api_as, open_review).json()
    url = f"/api/findings/{data['id']}/replies/"
    assert api_as("owner").post(url, {"body": "Agreed, *pull* instead."}, format="json").status_code == 201
    assert api_as("outsider").post(url, {"body": "hi"}, format="json").status_code == 404
    replies = api_as("reviewer").get(url).json()["results"]
    assert [(r["author"], r["body_html"]) for r in replies] == [("owner", "<p>Agreed, <em>pull</em> instead.</p>")]
    assert api_as("owner").get(f"/api/findings/{data['id']}/").json()["reply_count"] == 1
    assert [f["reply_count"] for f in api_as("owner").get(_url(open_review)).json()["results"]] == [1]


def test_a_full_put_of_an_orphan_keeps_its_anchor(api_as, open_review, people):
    gone = "The queue sends each batch to the next worker in round-robin order."
    data = _new(api_as, open_review, anchor_exact=gone).json()
    doc = open_review.doc
    services.doc_revise(doc=doc, author=people["owner"], body=doc.body.replace(gone, "Workers pull batches."))
    url = f"/api/findings/{data['id']}/"
    current = api_as("reviewer").get(url).json()
    assert current["orphaned"] is True
    response = api_as("reviewer").put(url, dict(current, title="Still relevant"), format="json")
    assert response.status_code == 200, response.content
    after = response.json()
    assert (after["orphaned"], after["revision"], after["anchor_exact"]) == (True, 1, gone)


def test_evidence_must_name_a_run_of_this_session(api_as, open_review, people, review_doc):
    from reviewer.models import EmulatorRun

    mine = EmulatorRun.objects.create(session=open_review, started_by=people["owner"], scenario={}, seed=1)
    elsewhere = services.session_create(owner=people["owner"], doc=review_doc, reviewers=[people["outsider"]])
    theirs = EmulatorRun.objects.create(session=elsewhere, started_by=people["outsider"], scenario={}, seed=1)
    window = {"evidence_t_from_s": 10, "evidence_t_to_s": 20, "evidence_metric": "queue_depth"}
    ok = _new(api_as, open_review, evidence_run_id=mine.pk, **window)
    assert ok.status_code == 201 and ok.json()["evidence_run_id"] == mine.pk
    missing = _new(api_as, open_review, evidence_run_id=mine.pk + theirs.pk + 100, **window)
    assert missing.status_code == 400 and "not one of this session's runs" in missing.json()["evidence_run_id"][0]
    other = _new(api_as, open_review, evidence_run_id=theirs.pk, **window)
    assert other.status_code == 400 and "not one of this session's runs" in other.json()["evidence_run_id"][0]
    patched = api_as("reviewer").patch(
        f"/api/findings/{ok.json()['id']}/", {"evidence_run_id": theirs.pk, "version": 1}, format="json"
    )
    assert patched.status_code == 400 and "evidence_run_id" in patched.json()


def test_a_quote_selected_in_the_rendered_doc_is_anchored_on_its_markdown_source(api_as, people):
    doc = services.doc_create(owner=people["owner"], title="Md", body="Intro.\n\nWorkers run **one batch** at a time.\n")
    session = services.session_create(owner=people["owner"], doc=doc, reviewers=[people["reviewer"]])
    response = _new(api_as, session, anchor_exact="Workers run one batch at a time.")
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["anchor_exact"] == "Workers run **one batch** at a time."
    assert doc.body[data["anchor_start"] : data["anchor_end"]] == data["anchor_exact"]


def _selection(text: str, quote: str, nth: int = 0) -> dict:
    """A selection as the page sends it, of the nth occurrence of ``quote`` in the rendered doc."""
    start = -1
    for _ in range(nth + 1):
        start = text.index(quote, start + 1)
    end = start + len(quote)
    return {"quote": quote, "prefix": text[max(0, start - 32):start], "suffix": text[end:end + 32],
            "position": start / len(text)}


def test_it_places_a_selection_of_the_second_of_two_repeated_words(api_as, open_review):
    from reviewer.text.markdown import rendered_text

    body = open_review.doc.body
    selection = _selection(rendered_text(body), "batch", nth=1)
    response = _new(api_as, open_review, anchor_exact="", selection=selection)
    assert response.status_code == 201, response.content
    data = response.json()
    second = body.index("batch", body.index("batch") + 1)
    assert (data["anchor_exact"], data["anchor_start"], data["anchor_end"]) == ("batch", second, second + 5)
    assert "selection" not in data  # write-only: the answer is the anchor


def test_it_names_the_selection_and_the_fix_when_the_selected_text_is_not_in_the_doc(api_as, open_review):
    response = _new(api_as, open_review, anchor_exact="", selection={"quote": "a passage from another doc"})
    assert response.status_code == 400
    message = response.json()["selection"][0]
    assert "revision 1" in message and "select the passage again" in message
    assert not Finding.objects.exists()


def test_it_refuses_a_selection_together_with_anchor_fields(api_as, open_review):
    response = _new(api_as, open_review, selection={"quote": "batch"})  # _new sends anchor_exact too
    assert response.status_code == 400
    assert "not both" in response.json()["selection"][0]


def test_it_refuses_evidence_from_someone_elses_private_run_like_a_missing_one(api_as, open_review, people):
    from reviewer.models import EmulatorRun

    private = EmulatorRun.objects.create(session=None, started_by=people["outsider"], scenario={}, seed=1)
    own = EmulatorRun.objects.create(session=None, started_by=people["reviewer"], scenario={}, seed=1)
    window = {"evidence_t_from_s": 10, "evidence_t_to_s": 20, "evidence_metric": "queue_depth"}
    refused = _new(api_as, open_review, evidence_run_id=private.pk, **window)
    missing = _new(api_as, open_review, evidence_run_id=private.pk + own.pk + 100, **window)
    assert refused.status_code == missing.status_code == 400
    # The same words for both: the answer does not tell which run ids exist.
    assert refused.json()["evidence_run_id"][0].replace(str(private.pk), "N") == \
        missing.json()["evidence_run_id"][0].replace(str(private.pk + own.pk + 100), "N")
    assert _new(api_as, open_review, evidence_run_id=own.pk, **window).status_code == 201


def test_evidence_compares_two_runs_the_author_may_use(api_as, people, open_review, review_doc):
    from reviewer.models import EmulatorRun

    first = EmulatorRun.objects.create(session=open_review, started_by=people["reviewer"], scenario={}, seed=1)
    second = EmulatorRun.objects.create(session=open_review, started_by=people["reviewer"], scenario={}, seed=1,
                                        overrides=["dispatcher.policy=pull"])
    elsewhere = services.session_create(owner=people["owner"], doc=review_doc, reviewers=[people["outsider"]])
    theirs = EmulatorRun.objects.create(session=elsewhere, started_by=people["outsider"], scenario={}, seed=1)
    window = {"evidence_t_from_s": 10, "evidence_t_to_s": 20, "evidence_metric": "queue_depth"}
    ok = _new(api_as, open_review, evidence_run_id=first.pk, evidence_compare_run_id=second.pk, **window)
    assert ok.status_code == 201, ok.content
    assert ok.json()["evidence_compare_run_id"] == second.pk
    same = _new(api_as, open_review, evidence_run_id=first.pk, evidence_compare_run_id=first.pk, **window)
    assert same.status_code == 400 and "evidence run itself" in same.json()["evidence_compare_run_id"][0]
    alone = _new(api_as, open_review, evidence_compare_run_id=second.pk, **window)
    assert alone.status_code == 400 and "needs evidence_run_id" in alone.json()["evidence_compare_run_id"][0]
    other = _new(api_as, open_review, evidence_run_id=first.pk, evidence_compare_run_id=theirs.pk, **window)
    assert other.status_code == 400 and "not one of this session's runs" in other.json()["evidence_compare_run_id"][0]
    patched = api_as("reviewer").patch(
        f"/api/findings/{ok.json()['id']}/", {"evidence_compare_run_id": theirs.pk, "version": 1}, format="json"
    )
    assert patched.status_code == 400 and "evidence_compare_run_id" in patched.json()
