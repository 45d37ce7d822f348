"""Near-duplicate findings: flagged in the list and the API, merged keeping both threads."""

from __future__ import annotations

import json
from typing import Any

import pytest
from review_data_fixtures import *  # noqa: F403

from reviewer.models import EmulatorRun, Finding, FindingReply
from reviewer.review import services
from reviewer.review.duplicates import duplicate_map

pytestmark = pytest.mark.django_db

QUOTE = "The queue sends each batch to the next worker in round-robin order."


@pytest.fixture
def twins(open_review: Any, people: dict[str, Any]) -> dict[str, Any]:
    """Two reviewers quote the same sentence in the same pass, each with a thread; one has evidence."""
    run = EmulatorRun.objects.create(session=open_review, started_by=people["owner"],
                                     scenario=open_review.fleet_config.scenario, seed=1)
    first = services.finding_create(session=open_review, author=people["owner"], review_pass="trace",
                                    severity="fix_now", title="Round-robin to busy workers", anchor_exact=QUOTE)
    second = services.finding_create(session=open_review, author=people["reviewer"], review_pass="trace",
                                     severity="clarify", title="Busy workers get batches", anchor_exact=QUOTE,
                                     evidence_run_id=run.pk, evidence_t_from_s=10.0, evidence_t_to_s=20.0,
                                     evidence_metric="backlog")
    other = services.finding_create(session=open_review, author=people["reviewer"], review_pass="break",
                                    title="Same quote, other pass", anchor_exact=QUOTE)
    services.reply_create(finding=first, author=people["reviewer"], body="Pull instead?")
    services.reply_create(finding=second, author=people["owner"], body="See the backlog chart.")
    services.reply_create(finding=second, author=people["reviewer"], body="Yes, worker 3 idles.")
    return {"session": open_review, "first": first, "second": second, "other": other, "run": run}


def test_the_same_quote_in_the_same_pass_is_flagged_in_the_list(api_as, twins):
    listed = api_as("reviewer").get(f"/api/sessions/{twins['session'].pk}/findings/").json()["results"]
    by_id = {f["id"]: f for f in listed}
    first, second, other = twins["first"].pk, twins["second"].pk, twins["other"].pk
    assert by_id[first]["duplicates"] == [second] and by_id[second]["duplicates"] == [first]
    assert by_id[other]["duplicates"] == []
    one = api_as("reviewer").get(f"/api/findings/{first}/").json()
    assert one["duplicates"] == [second] and one["merged_into"] is None
    groups = api_as("owner").get(f"/api/sessions/{twins['session'].pk}/findings/duplicates/").json()
    assert groups == {"groups": [[first, second]]}


def test_a_suggestion_adopted_twice_is_a_duplicate():
    rows = [(1, "numbers", "", "About 50x too small", "One worker serves 13 QPS."),
            (2, "numbers", "", "About  50x too SMALL", "One worker serves 13 QPS.\n"),
            (3, "numbers", "", "About 50x too small", "Another text."),
            (4, "trace", "", "About 50x too small", "One worker serves 13 QPS.")]
    assert duplicate_map(rows) == {1: [2], 2: [1]}


def test_merging_keeps_both_threads_under_the_surviving_finding(api_as, twins):
    first, second = twins["first"], twins["second"]
    answer = api_as("owner").post(f"/api/findings/{second.pk}/merge/", {"into": first.pk, "version": second.version},
                                  format="json")
    assert answer.status_code == 200, answer.content
    survivor = answer.json()
    assert survivor["id"] == first.pk and survivor["reply_count"] == 3 and survivor["duplicates"] == []
    # The survivor had no evidence: it takes the merged finding's.
    assert (survivor["evidence_run_id"], survivor["evidence_metric"]) == (twins["run"].pk, "backlog")
    thread = api_as("reviewer").get(f"/api/findings/{first.pk}/replies/").json()["results"]
    assert [r["body"] for r in thread] == ["Pull instead?", "See the backlog chart.", "Yes, worker 3 idles."]
    assert set(FindingReply.objects.filter(finding=first).exclude(merged_from=None).values_list(
        "merged_from", flat=True)) == {second.pk}
    merged = Finding.objects.get(pk=second.pk)
    assert merged.merged_into_id == first.pk and merged.evidence_run_id == twins["run"].pk
    assert api_as("reviewer").get(f"/api/findings/{second.pk}/").json()["merged_into"] == first.pk
    # The export lists the merged finding under the survivor, with its evidence, and ranks it not.
    report = api_as("owner").get(f"/api/sessions/{twins['session'].pk}/export.md").content.decode()
    assert '- Also raised as "Busy workers get batches" by reviewer (merged).' in report
    assert "### 2. Busy workers get batches" not in report
    data = json.loads(api_as("owner").get(f"/api/sessions/{twins['session'].pk}/export.json").content)
    exported = {f["id"]: f for f in data["findings"]}
    assert exported[second.pk]["merged_into"] == first.pk and exported[second.pk]["rank"] is None
    assert [r["body"] for r in exported[first.pk]["replies"]] == [r["body"] for r in thread]


def test_a_merge_is_refused_when_it_cannot_be_done(api_as, twins, people, review_doc):
    first, second, other = twins["first"], twins["second"], twins["other"]
    owner = api_as("owner")
    assert owner.post(f"/api/findings/{first.pk}/merge/", {"into": first.pk}, format="json").status_code == 400
    stale = owner.post(f"/api/findings/{second.pk}/merge/", {"into": first.pk, "version": 99}, format="json")
    assert stale.status_code == 409 and stale.json()["current_version"] == second.version
    elsewhere = services.session_create(owner=people["owner"], doc=review_doc, title="Another")
    foreign = services.finding_create(session=elsewhere, author=people["owner"], review_pass="trace", title="x")
    answer = owner.post(f"/api/findings/{second.pk}/merge/", {"into": foreign.pk}, format="json")
    assert answer.status_code == 400 and "into" in answer.json()
    assert owner.post(f"/api/findings/{second.pk}/merge/", {"into": first.pk}, format="json").status_code == 200
    again = owner.post(f"/api/findings/{second.pk}/merge/", {"into": other.pk}, format="json")
    assert again.status_code == 409
    into_merged = owner.post(f"/api/findings/{other.pk}/merge/", {"into": second.pk}, format="json")
    assert into_merged.status_code == 400 and "merged into" in into_merged.json()["into"][0]


def test_who_may_merge(api_as, twins):
    first, second = twins["first"], twins["second"]
    body = {"into": first.pk}
    # An outsider learns nothing; a reviewer who wrote only one of the two may not.
    assert api_as("outsider").post(f"/api/findings/{second.pk}/merge/", body, format="json").status_code == 404
    assert api_as("outsider").get(f"/api/sessions/{twins['session'].pk}/findings/duplicates/").status_code == 404
    assert api_as("reviewer").post(f"/api/findings/{second.pk}/merge/", body, format="json").status_code == 403
    assert Finding.objects.get(pk=second.pk).merged_into_id is None
    assert api_as("staff").post(f"/api/findings/{second.pk}/merge/", body, format="json").status_code == 200


def test_the_author_of_both_findings_merges_them(api_as, twins, people):
    session = twins["session"]
    a = services.finding_create(session=session, author=people["reviewer"], review_pass="rank", title="Same",
                                body="Text.")
    b = services.finding_create(session=session, author=people["reviewer"], review_pass="rank", title="same",
                                body="text.")
    assert api_as("reviewer").get(f"/api/findings/{a.pk}/").json()["duplicates"] == [b.pk]
    assert api_as("reviewer").post(f"/api/findings/{b.pk}/merge/", {"into": a.pk}, format="json").status_code == 200


def test_a_merged_finding_takes_no_new_replies(api_as, twins):
    first, second = twins["first"], twins["second"]
    api_as("owner").post(f"/api/findings/{second.pk}/merge/", {"into": first.pk}, format="json")
    answer = api_as("reviewer").post(f"/api/findings/{second.pk}/replies/", {"body": "Late."}, format="json")
    assert answer.status_code == 400
    assert f"merged into finding {first.pk}" in answer.json()["finding"][0]


def test_a_draft_is_neither_flagged_nor_merged_until_it_is_published(api_as, open_review, people):
    open_review.file_directly = False
    open_review.save(update_fields=["file_directly"])
    published = Finding.objects.create(session=open_review, author=people["owner"], review_pass="trace",
                                       title="Round-robin to busy workers", anchor_exact=QUOTE,
                                       published_at=open_review.created_at)
    draft = services.finding_create(session=open_review, author=people["reviewer"], review_pass="trace",
                                    title="Busy workers get batches", anchor_exact=QUOTE)
    assert draft.published_at is None
    # The owner is told nothing of the reviewer's draft, not even that it repeats a finding.
    listed = api_as("owner").get(f"/api/sessions/{open_review.pk}/findings/").json()["results"]
    assert [f["duplicates"] for f in listed if f["id"] == published.pk] == [[]]
    # Nobody else sees the draft to merge it; the writer may not merge another's finding;
    # and the service refuses a draft whoever asks.
    assert api_as("owner").post(f"/api/findings/{draft.pk}/merge/", {"into": published.pk},
                                format="json").status_code == 404
    from reviewer.errors import Invalid
    from reviewer.review.merge import finding_merge

    with pytest.raises(Invalid, match="publish the draft first"):
        finding_merge(finding=draft, into=published)


def test_one_findings_duplicates_are_those_the_whole_session_gives_it(twins, people):
    from reviewer.review.duplicates import duplicates_in_session, duplicates_of

    session = twins["session"]
    # The same title and text in another case and spacing, and a draft, which is nobody's duplicate.
    services.finding_create(session=session, author=people["owner"], review_pass="break",
                            title="same QUOTE,  other pass", anchor_exact="")
    services.finding_create(session=session, author=people["owner"], review_pass="trace",
                            title="Busy workers get batches", anchor_exact="")
    whole = duplicates_in_session(session.pk)
    assert whole, "the session holds duplicates"
    for finding in Finding.objects.filter(session=session):
        assert duplicates_of(finding) == whole.get(finding.pk, []), finding.title
    # The single-finding answer of the API (a finding's own page and live events) agrees.
    from reviewer.representations import finding_representation

    second = twins["second"]
    assert finding_representation(Finding.objects.get(pk=second.pk))["duplicates"] == whole[second.pk]
