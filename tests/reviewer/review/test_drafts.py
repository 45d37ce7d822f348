"""Drafts and publishing: a reviewer's findings and replies are theirs alone until
they publish their review, which delivers them all at once with a verdict."""

from __future__ import annotations

import json
from typing import Any

import pytest
from collab_fixtures import *  # noqa: F403
from collab_fixtures import file_finding, listed_titles
from review_data_fixtures import *  # noqa: F403

from reviewer.models import Finding, Review

pytestmark = pytest.mark.django_db


def _publish(client: Any, session: Any, **body: Any) -> Any:
    return client.post(f"/api/sessions/{session.pk}/reviews/", body, format="json")


def test_it_keeps_a_reviewers_findings_to_them_until_they_publish(team_api, drafting_review):
    first = file_finding(team_api("reviewer"), drafting_review, "Only copy of the queue")
    file_finding(team_api("reviewer"), drafting_review, "Round-robin ignores busy workers", severity="clarify")
    assert first["draft"] is True and first["verdict"] is None and first["published_at"] is None
    assert listed_titles(team_api("reviewer"), drafting_review) == [
        "Only copy of the queue", "Round-robin ignores busy workers"]
    for other in ("reviewer2", "author", "owner", "staff"):
        assert listed_titles(team_api(other), drafting_review) == [], other
        assert team_api(other).get(f"/api/findings/{first['id']}/").status_code == 404, other

    response = _publish(team_api("reviewer"), drafting_review, verdict="needs_changes", summary="Two to fix.")
    assert response.status_code == 201, response.content
    review = response.json()
    assert (review["verdict"], review["findings_published"], review["reviewer"]) == ("needs_changes", 2, "reviewer")
    assert review["summary_html"] == "<p>Two to fix.</p>"
    for other in ("reviewer2", "author", "owner"):
        seen = team_api(other).get(f"/api/sessions/{drafting_review.pk}/findings/").json()["results"]
        assert sorted(f["title"] for f in seen) == ["Only copy of the queue", "Round-robin ignores busy workers"]
        assert {(f["draft"], f["verdict"], f["publication"]) for f in seen} == {(False, "needs_changes", review["id"])}
    listed = team_api("author").get(f"/api/sessions/{drafting_review.pk}/reviews/").json()["results"]
    assert [(r["reviewer"], r["verdict"]) for r in listed] == [("reviewer", "needs_changes")]


def test_it_publishes_only_the_publishers_own_drafts(team_api, drafting_review):
    file_finding(team_api("reviewer"), drafting_review, "Mine")
    file_finding(team_api("reviewer2"), drafting_review, "Theirs")
    assert _publish(team_api("reviewer"), drafting_review, verdict="comment").status_code == 201
    assert listed_titles(team_api("author"), drafting_review) == ["Mine"]
    assert listed_titles(team_api("reviewer2"), drafting_review) == ["Mine", "Theirs"]
    assert Finding.objects.get(title="Theirs").published_at is None


def test_a_reviewers_reply_is_a_draft_until_they_publish(team_api, drafting_review):
    finding = file_finding(team_api("reviewer"), drafting_review, "Only copy of the queue")
    _publish(team_api("reviewer"), drafting_review, verdict="comment")
    url = f"/api/findings/{finding['id']}/replies/"
    reply = team_api("reviewer2").post(url, {"body": "Agreed, and it is worse at peak."}, format="json")
    assert reply.status_code == 201 and reply.json()["draft"] is True
    assert team_api("author").get(url).json()["results"] == []
    assert team_api("author").get(f"/api/findings/{finding['id']}/").json()["reply_count"] == 0
    assert [r["body"] for r in team_api("reviewer2").get(url).json()["results"]] == [
        "Agreed, and it is worse at peak."]

    published = _publish(team_api("reviewer2"), drafting_review, verdict="approve").json()
    assert (published["findings_published"], published["replies_published"]) == (0, 1)
    replies = team_api("author").get(url).json()["results"]
    assert [(r["author"], r["draft"]) for r in replies] == [("reviewer2", False)]
    assert team_api("author").get(f"/api/findings/{finding['id']}/").json()["reply_count"] == 1


def test_a_session_that_files_directly_has_no_drafts(team_api, drafting_review):
    response = team_api("owner").patch(f"/api/sessions/{drafting_review.pk}/", {"file_directly": True},
                                       format="json")
    assert response.status_code == 200 and response.json()["file_directly"] is True
    made = file_finding(team_api("reviewer"), drafting_review, "Filed at once")
    assert made["draft"] is False and made["published_at"] is not None
    assert listed_titles(team_api("author"), drafting_review) == ["Filed at once"]


def test_only_the_owner_switches_filing_directly(team_api, drafting_review):
    response = team_api("reviewer").patch(f"/api/sessions/{drafting_review.pk}/", {"file_directly": True},
                                          format="json")
    assert response.status_code == 403


@pytest.mark.parametrize(("body", "field"), [({"verdict": "lgtm"}, "verdict"), ({}, "verdict"),
                                             ({"verdict": "approve", "summary": "x" * 20_001}, "summary")])
def test_it_answers_a_bad_publication_with_the_field(team_api, drafting_review, body, field):
    response = _publish(team_api("reviewer"), drafting_review, **body)
    assert response.status_code == 400
    assert field in response.json(), response.json()
    assert not Review.objects.exists()


def test_who_may_publish(team_api, drafting_review):
    assert _publish(team_api("author"), drafting_review, verdict="approve").status_code == 403
    assert _publish(team_api("outsider"), drafting_review, verdict="approve").status_code == 404
    assert team_api("outsider").get(f"/api/sessions/{drafting_review.pk}/reviews/").status_code == 404
    assert team_api("outsider").get(f"/api/sessions/{drafting_review.pk}/turn/").status_code == 404
    assert _publish(team_api("owner"), drafting_review, verdict="approve").status_code == 201


def test_finding_counts_and_exports_leave_drafts_out(team_api, drafting_review):
    file_finding(team_api("reviewer"), drafting_review, "Only copy of the queue")
    session_url = f"/api/sessions/{drafting_review.pk}/"
    assert team_api("reviewer").get(session_url).json()["finding_counts"]["fix_now"] == 0
    for fmt in ("json", "csv", "md", "jsonld"):
        text = team_api("reviewer").get(f"{session_url}export.{fmt}").content.decode()
        assert "Only copy of the queue" not in text, fmt
    _publish(team_api("reviewer"), drafting_review, verdict="needs_changes")
    assert team_api("author").get(session_url).json()["finding_counts"]["fix_now"] == 1
    exported = json.loads(team_api("author").get(f"{session_url}export.json").content)
    assert [(f["title"], f["draft"], f["verdict"], f["state"]) for f in exported["findings"]] == [
        ("Only copy of the queue", False, "needs_changes", "open")]
    assert [r["verdict"] for r in exported["reviews"]] == ["needs_changes"]
    header = team_api("author").get(f"{session_url}export.csv").content.decode().splitlines()[0].split(",")
    assert {"draft", "verdict", "state", "state_reason", "fixed_revision"} <= set(header)
    markdown = team_api("author").get(f"{session_url}export.md").content.decode()
    assert "Verdicts: reviewer: needs changes" in markdown
    annotations = json.loads(team_api("author").get(f"{session_url}export.jsonld").content)
    assert annotations["first"]["items"][0]["verdict"] == "needs_changes"


def test_it_says_whose_turn_it_is(team_api, drafting_review):
    turn_url = f"/api/sessions/{drafting_review.pk}/turn/"
    assert team_api("author").get(turn_url).json()["turn"] == "nobody"
    finding = file_finding(team_api("reviewer"), drafting_review, "Only copy of the queue")
    turn = team_api("author").get(turn_url).json()
    assert (turn["turn"], turn["reviewers_with_drafts"], turn["authors"]) == ("reviewers", ["reviewer"], [])
    _publish(team_api("reviewer"), drafting_review, verdict="needs_changes")
    turn = team_api("reviewer").get(turn_url).json()
    assert (turn["turn"], turn["authors"], turn["unanswered_fix_now"]) == ("authors", ["author"], 1)
    team_api("author").post(f"/api/findings/{finding['id']}/replies/", {"body": "Will fix in r2."}, format="json")
    assert team_api("reviewer").get(turn_url).json()["turn"] == "nobody"


def test_a_draft_changed_or_deleted_is_announced_to_nobody(team, drafting_review, monkeypatch):
    from reviewer.review import services

    sent: list[tuple[str, dict]] = []
    monkeypatch.setattr("reviewer.realtime.groups.session_event", lambda sid, event, data: sent.append((event, data)))
    finding = services.finding_create(session=drafting_review, author=team["reviewer"], review_pass="trace",
                                      title="Draft")
    finding = services.finding_update(finding=finding, version=1, title="Draft, reworded")
    services.reply_create(finding=finding, author=team["reviewer"], body="A note to self.")
    services.finding_delete(finding=finding)
    # Only that whose turn it is may have changed, with nothing of the draft in it.
    assert sent == [("turn.changed", {})] * 4


def test_a_doc_revision_moving_a_draft_announces_it_to_nobody(team, team_api, drafting_review, monkeypatch):
    from reviewer.review import services

    draft = file_finding(team_api("reviewer"), drafting_review, "Held back")
    services.reply_create(finding=Finding.objects.get(pk=draft["id"]), author=team["owner"], body="Owner's draft.")
    sent: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr("reviewer.realtime.groups.session_event", lambda sid, event, data: sent.append((event, data)))
    doc = drafting_review.doc
    services.doc_revise(doc=doc, author=team["owner"], body="A new opening line.\n\n" + doc.latest_revision().body)
    moved = Finding.objects.get(pk=draft["id"])
    assert moved.revision.number == 2  # it did move to the new revision
    assert [e for e, d in sent if e.startswith("finding.") and d["finding"]["id"] == draft["id"]] == []


def test_it_ranks_a_bucket_without_showing_or_moving_other_reviewers_drafts(team_api, team, drafting_review):
    owners = file_finding(team_api("owner"), drafting_review, "Owner's own draft")
    published = file_finding(team_api("reviewer2"), drafting_review, "Published by reviewer2")
    assert _publish(team_api("reviewer2"), drafting_review, verdict="comment").status_code == 201
    draft = file_finding(team_api("reviewer"), drafting_review, "Reviewer's secret draft", body="Not yet.")
    url = f"/api/sessions/{drafting_review.pk}/findings/reorder/"

    response = team_api("owner").post(url, {"severity": "fix_now", "ids": [published["id"], owners["id"]]},
                                      format="json")
    assert response.status_code == 200, response.content
    assert [f["id"] for f in response.json()] == [published["id"], owners["id"]]
    assert b"secret draft" not in response.content and b"Not yet." not in response.content

    # Naming the draft gets the answer an id of no finding gets: nothing moves.
    before = Finding.objects.get(pk=draft["id"])
    response = team_api("owner").post(url, {"severity": "clarify", "ids": [draft["id"]]}, format="json")
    nowhere = team_api("owner").post(url, {"severity": "clarify", "ids": [10**9]}, format="json")
    assert response.status_code == nowhere.status_code == 400
    assert response.json()["ids"][0].replace(str(draft["id"]), "N") == nowhere.json()["ids"][0].replace(
        str(10**9), "N")
    after = Finding.objects.get(pk=draft["id"])
    assert (after.version, after.severity, after.position) == (before.version, before.severity, before.position)
