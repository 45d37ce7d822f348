"""The author's side: the doc's authors see published findings, reply, and set each
finding's state; they never see drafts or change a reviewer's finding."""

from __future__ import annotations

from typing import Any

import pytest
from collab_fixtures import *  # noqa: F403
from collab_fixtures import file_finding, listed_titles
from review_data_fixtures import *  # noqa: F403
from review_data_fixtures import REVIEW_DOC_BODY

from reviewer.models import Notification
from reviewer.review import services

pytestmark = pytest.mark.django_db


@pytest.fixture
def published(team_api: Any, drafting_review: Any) -> dict[str, Any]:
    """A fix-now finding by ``reviewer``, published with a verdict."""
    finding = file_finding(team_api("reviewer"), drafting_review, "Only copy of the queue")
    response = team_api("reviewer").post(f"/api/sessions/{drafting_review.pk}/reviews/",
                                         {"verdict": "needs_changes"}, format="json")
    assert response.status_code == 201
    return finding


def _state(client: Any, finding: dict[str, Any], **body: Any) -> Any:
    return client.post(f"/api/findings/{finding['id']}/state/", body, format="json")


def test_an_author_marks_a_finding_fixed_in_revision_2_and_its_reviewer_hears_of_it(
    team, team_api, drafting_review, published, mailoutbox, django_capture_on_commit_callbacks
):
    services.doc_revise(doc=drafting_review.doc, author=team["author"],
                        body=REVIEW_DOC_BODY.replace("in-memory queue", "replicated queue"))
    with django_capture_on_commit_callbacks(execute=True):
        response = _state(team_api("author"), published, state="fixed", fixed_revision=2)
    assert response.status_code == 200, response.content
    data = response.json()
    assert (data["state"], data["fixed_revision"]) == ("fixed", 2)
    inbox = team_api("reviewer").get("/api/notifications/").json()["results"]
    assert [(n["kind"], n["actor"], n["finding"]) for n in inbox] == [("state_changed", "author", published["id"])]
    assert "fixed in revision 2" in inbox[0]["text"]
    assert len(mailoutbox) == 1
    assert mailoutbox[0].to == ["reviewer@example.test"]
    assert "fixed in revision 2" in mailoutbox[0].subject
    assert f"/sessions/{drafting_review.pk}/#finding-{published['id']}" in mailoutbox[0].body


def test_wont_fix_needs_a_reason(team_api, published):
    response = _state(team_api("author"), published, state="wont_fix")
    assert response.status_code == 400 and "reason" in response.json()
    response = _state(team_api("author"), published, state="wont_fix", reason="The standby is out of scope.")
    assert response.status_code == 200
    assert (response.json()["state"], response.json()["state_reason"]) == ("wont_fix", "The standby is out of scope.")


@pytest.mark.parametrize(("body", "field"), [
    ({"state": "fixed", "fixed_revision": 7}, "fixed_revision"),
    ({"state": "open", "fixed_revision": 1}, "fixed_revision"),
    ({"state": "done"}, "state"),
    ({"state": "fixed", "fixed_revision": 0}, "fixed_revision"),
])
def test_it_answers_a_bad_state_with_the_field(team_api, published, body, field):
    response = _state(team_api("author"), published, **body)
    assert response.status_code == 400
    assert field in response.json(), response.json()


def test_reviewers_and_authors_resolve_and_reopen_as_on_a_code_review(team_api, published):
    # An open finding has nothing to reopen.
    assert _state(team_api("reviewer"), published, state="reopened").status_code == 400
    # A co-reviewer resolves the finding, the author reopens it, its reviewer resolves it again.
    assert _state(team_api("reviewer2"), published, state="fixed").status_code == 200
    response = _state(team_api("author"), published, state="reopened")
    assert response.status_code == 200 and response.json()["state"] == "reopened"
    response = _state(team_api("reviewer"), published, state="wont_fix", reason="Out of scope")
    assert response.status_code == 200 and response.json()["state"] == "wont_fix"
    response = _state(team_api("reviewer2"), published, state="reopened")
    assert response.status_code == 200 and response.json()["state"] == "reopened"


def test_the_author_hears_nothing_of_their_own_change_and_the_reviewer_of_a_reopen_by_themself(
    team, team_api, published
):
    _state(team_api("author"), published, state="fixed")
    _state(team_api("reviewer"), published, state="reopened")
    assert list(Notification.objects.filter(kind="state_changed").values_list("recipient__username", flat=True)) == [
        "reviewer"]


def test_authors_see_published_findings_never_drafts(team_api, drafting_review, published):
    file_finding(team_api("reviewer"), drafting_review, "Still a draft")
    assert listed_titles(team_api("author"), drafting_review) == ["Only copy of the queue"]
    draft = next(f for f in team_api("reviewer").get(f"/api/sessions/{drafting_review.pk}/findings/").json()[
        "results"] if f["title"] == "Still a draft")
    assert team_api("author").get(f"/api/findings/{draft['id']}/").status_code == 404
    assert _state(team_api("author"), draft, state="fixed").status_code == 404
    assert team_api("author").get(f"/api/findings/{draft['id']}/replies/").status_code == 404


def test_authors_reply_at_once_but_cannot_change_or_add_findings(team_api, drafting_review, published):
    url = f"/api/findings/{published['id']}/"
    reply = team_api("author").post(f"{url}replies/", {"body": "Replicated in r2."}, format="json")
    assert reply.status_code == 201 and reply.json()["draft"] is False
    assert [r["body"] for r in team_api("reviewer2").get(f"{url}replies/").json()["results"]] == ["Replicated in r2."]
    assert team_api("author").patch(url, {"title": "Fine as is", "version": published["version"]},
                                    format="json").status_code == 403
    assert team_api("author").delete(url).status_code == 403
    response = team_api("author").post(f"/api/sessions/{drafting_review.pk}/findings/",
                                       {"pass": "trace", "title": "Mine"}, format="json")
    assert response.status_code == 403


def test_outsiders_get_404_on_the_state_of_a_finding(team_api, published):
    assert _state(team_api("outsider"), published, state="fixed").status_code == 404


def test_the_owner_names_the_authors(team, team_api, drafting_review):
    url = f"/api/sessions/{drafting_review.pk}/"
    assert team_api("owner").get(url).json()["authors"] == ["author"]
    assert team_api("reviewer").patch(url, {"authors": ["reviewer2"]}, format="json").status_code == 403
    response = team_api("owner").patch(url, {"authors": ["author", "outsider"]}, format="json")
    assert response.status_code == 200 and sorted(response.json()["authors"]) == ["author", "outsider"]
    # The new author now sees the session and its doc.
    assert team_api("outsider").get(url).status_code == 200
    assert team_api("outsider").get(f"/api/docs/{drafting_review.doc_id}/").status_code == 200
    bad = team_api("owner").patch(url, {"authors": ["nobody-by-this-name"]}, format="json")
    assert bad.status_code == 400 and "nobody-by-this-name" not in bad.content.decode()


def test_an_author_removed_loses_the_session(team_api, drafting_review):
    url = f"/api/sessions/{drafting_review.pk}/"
    team_api("owner").patch(url, {"authors": []}, format="json")
    assert team_api("author").get(url).status_code == 404


def test_a_reopened_finding_waits_for_a_new_answer_from_the_authors(team_api, drafting_review, published):
    turn_url = f"/api/sessions/{drafting_review.pk}/turn/"
    replies = f"/api/findings/{published['id']}/replies/"
    team_api("author").post(replies, {"body": "Replicated in r2."}, format="json")
    assert team_api("reviewer").get(turn_url).json()["turn"] == "nobody"
    _state(team_api("author"), published, state="fixed")
    _state(team_api("reviewer"), published, state="reopened")
    turn = team_api("reviewer").get(turn_url).json()
    assert (turn["turn"], turn["unanswered_fix_now"]) == ("authors", 1)
    team_api("author").post(replies, {"body": "Now with a second standby."}, format="json")
    assert team_api("reviewer").get(turn_url).json()["turn"] == "nobody"


def _reviewers_run(team: dict[str, Any], session: Any, monkeypatch: Any, status: str) -> Any:
    from support import TINY_SCENARIO

    from reviewer.models import EmulatorRun
    from reviewer.runs import services as run_services

    monkeypatch.setattr("reviewer.runs.services.enqueue_run", lambda run: None)
    run = run_services.run_start(user=team["reviewer"], session=session, scenario=TINY_SCENARIO, speed=10)
    EmulatorRun.objects.filter(pk=run.pk).update(status=status)
    return run


@pytest.mark.parametrize("status", ["queued", "running"])
def test_it_lets_no_author_cancel_or_fault_a_reviewers_run(team, team_api, drafting_review, monkeypatch, status):
    from reviewer.models import EmulatorRun, RunCommand

    run = _reviewers_run(team, drafting_review, monkeypatch, status)
    author = team_api("author")
    assert author.get(f"/api/runs/{run.pk}/").status_code == 200  # they read like a reviewer
    assert author.post(f"/api/runs/{run.pk}/cancel/").status_code == 403
    assert author.post(f"/api/runs/{run.pk}/faults/", {"kill": "host:1"}, format="json").status_code == 403
    assert EmulatorRun.objects.get(pk=run.pk).status == status
    assert not RunCommand.objects.filter(run=run).exists()
    # The session's other reviewer steers it, as before.
    assert team_api("reviewer2").post(f"/api/runs/{run.pk}/faults/", {"kill": "host:1"},
                                      format="json").status_code == 202


def test_it_lets_no_author_cancel_a_sweep(team, team_api, drafting_review, monkeypatch):
    from support import TINY_SCENARIO

    from reviewer.models import Sweep
    from reviewer.runs import sweeps

    monkeypatch.setattr("reviewer.runs.sweeps.enqueue_sweep", lambda *args: None)
    sweep = sweeps.sweep_start(user=team["reviewer"], session=drafting_review, scenario=TINY_SCENARIO,
                               key="traffic.qps", values=[10.0, 20.0])
    before = Sweep.objects.get(pk=sweep.pk).status
    assert team_api("author").post(f"/api/sweeps/{sweep.pk}/cancel/").status_code == 403
    assert Sweep.objects.get(pk=sweep.pk).status == before != "cancelled"


def test_it_lets_no_author_move_the_session_to_another_pass(team_api, drafting_review):
    response = team_api("author").patch(f"/api/sessions/{drafting_review.pk}/", {"current_pass": "break"},
                                        format="json")
    assert response.status_code == 403
    drafting_review.refresh_from_db()
    assert drafting_review.current_pass == "restate"
    assert team_api("reviewer").patch(f"/api/sessions/{drafting_review.pk}/", {"current_pass": "break"},
                                      format="json").status_code == 200


def test_the_turn_names_the_authors_only_while_a_fix_now_finding_waits_on_them(team, team_api, drafting_review,
                                                                              published):
    from reviewer.models import Finding, FindingReply

    turn_url = f"/api/sessions/{drafting_review.pk}/turn/"
    replies = f"/api/findings/{published['id']}/replies/"
    team_api("author").post(replies, {"body": "Replicated in r2."}, format="json")
    assert team_api("reviewer").get(turn_url).json()["authors"] == []
    # A reviewer's question back in the thread, once published, waits on them again.
    team_api("reviewer").post(replies, {"body": "Replicated how: sync or async?"}, format="json")
    turn = team_api("reviewer").get(turn_url).json()
    assert (turn["turn"], turn["reviewers_with_drafts"], turn["authors"]) == ("reviewers", ["reviewer"], [])
    team_api("reviewer").post(f"/api/sessions/{drafting_review.pk}/reviews/", {"verdict": "needs_changes"},
                              format="json")
    turn = team_api("reviewer").get(turn_url).json()
    assert (turn["turn"], turn["authors"], turn["unanswered_fix_now"]) == ("authors", ["author"], 1)
    team_api("author").post(replies, {"body": "Synchronous, to a second zone."}, format="json")
    assert team_api("reviewer").get(turn_url).json()["turn"] == "nobody"
    # An author's unpublished draft owes no review: it names nobody.
    finding = Finding.objects.get(pk=published["id"])
    FindingReply.objects.create(finding=finding, author=team["author"], body="a note to self")
    assert team_api("reviewer").get(turn_url).json()["reviewers_with_drafts"] == []
    # A fix-now finding merged into another waits on nobody.
    team_api("reviewer").post(replies, {"body": "And the failover time?"}, format="json")
    team_api("reviewer").post(f"/api/sessions/{drafting_review.pk}/reviews/", {"verdict": "needs_changes"},
                              format="json")
    assert team_api("reviewer").get(turn_url).json()["unanswered_fix_now"] == 1
    other = Finding.objects.create(session=drafting_review, author=team["reviewer"], review_pass="break",
                                   title="Queue loss", severity="fix_now", published_at=finding.published_at)
    Finding.objects.filter(pk=finding.pk).update(merged_into=other)
    turn = team_api("reviewer").get(turn_url).json()
    assert (turn["unanswered_fix_now"], turn["authors"]) == (1, ["author"])  # the finding it was merged into
    Finding.objects.filter(pk=other.pk).update(state="fixed")
    assert team_api("reviewer").get(turn_url).json()["turn"] == "nobody"
