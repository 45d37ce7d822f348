"""Mentions and notifications: ``@name`` notifies once and reveals nothing, publishing
notifies the authors, the inbox is its owner's alone, and e-mail follows each
user's setting (instant, daily digest, off)."""

from __future__ import annotations

from typing import Any

import pytest
from collab_fixtures import *  # noqa: F403
from collab_fixtures import file_finding
from django.core.management import call_command
from review_data_fixtures import *  # noqa: F403

from reviewer.models import Notification
from reviewer.review import notifications

pytestmark = pytest.mark.django_db


def _publish(client: Any, session: Any, verdict: str = "comment") -> None:
    response = client.post(f"/api/sessions/{session.pk}/reviews/", {"verdict": verdict}, format="json")
    assert response.status_code == 201, response.content


def _inbox(client: Any) -> list[dict[str, Any]]:
    response = client.get("/api/notifications/")
    assert response.status_code == 200
    return response.json()["results"]


def test_it_finds_mentions_but_not_email_addresses() -> None:
    text = "@reviewer2 see this; cc @author. Mail ops@example.test, not @@x, and @reviewer2 again."
    assert notifications.mentioned_names(text) == ["reviewer2", "author"]


def test_a_mention_notifies_once_when_published(team_api, drafting_review):
    finding = file_finding(team_api("reviewer"), drafting_review, "Ask @reviewer2",
                           body="@reviewer2 you measured this; @reviewer2 twice is still once.")
    assert _inbox(team_api("reviewer2")) == []  # a draft notifies nobody
    _publish(team_api("reviewer"), drafting_review)
    inbox = _inbox(team_api("reviewer2"))
    assert [(n["kind"], n["actor"], n["finding"]) for n in inbox] == [("mention", "reviewer", finding["id"])]
    # Editing the finding keeps the mention but does not notify again.
    edited = team_api("reviewer").patch(f"/api/findings/{finding['id']}/",
                                        {"body": "@reviewer2 see the run.", "version": finding["version"]},
                                        format="json")
    assert edited.status_code == 200
    assert len(_inbox(team_api("reviewer2"))) == 1


def test_a_mention_in_a_reply_notifies(team_api, drafting_review):
    drafting_review.file_directly = True
    drafting_review.save()
    finding = file_finding(team_api("reviewer"), drafting_review, "Only copy of the queue")
    team_api("author").post(f"/api/findings/{finding['id']}/replies/", {"body": "@reviewer2 is this right?"},
                            format="json")
    inbox = _inbox(team_api("reviewer2"))
    assert [(n["kind"], n["actor"]) for n in inbox] == [("mention", "author")]
    assert "a reply to" in inbox[0]["text"]


def test_an_unknown_or_outside_name_notifies_nobody_and_reveals_nothing(team_api, drafting_review):
    drafting_review.file_directly = True
    drafting_review.save()
    answers = []
    for name in ("outsider", "ghost-who-does-not-exist"):
        response = team_api("reviewer").post(
            f"/api/sessions/{drafting_review.pk}/findings/",
            {"pass": "trace", "title": "Ask someone", "body": f"@{name} what do you think?"}, format="json")
        assert response.status_code == 201
        data = response.json()
        answers.append({k: v for k, v in data.items()
                        if k not in {"id", "body", "body_html", "created_at", "updated_at", "published_at",
                                     "position"}})
    assert answers[0] == answers[1]
    assert not Notification.objects.exists()
    assert _inbox(team_api("outsider")) == []


def test_publishing_notifies_the_authors(team_api, drafting_review):
    file_finding(team_api("reviewer"), drafting_review, "Only copy of the queue")
    _publish(team_api("reviewer"), drafting_review, verdict="needs_changes")
    inbox = _inbox(team_api("author"))
    assert [(n["kind"], n["actor"]) for n in inbox] == [("published", "reviewer")]
    assert "needs changes, 1 finding" in inbox[0]["text"]
    assert inbox[0]["url"] == f"/sessions/{drafting_review.pk}/"
    assert _inbox(team_api("reviewer2")) == []


def test_the_inbox_is_its_owners_alone(team_api, drafting_review):
    file_finding(team_api("reviewer"), drafting_review, "Only copy of the queue")
    _publish(team_api("reviewer"), drafting_review)
    item = _inbox(team_api("author"))[0]
    assert team_api("author").get("/api/notifications/unread/").json() == {"unread": 1}
    for other in ("reviewer", "outsider", "staff"):
        assert team_api(other).post(f"/api/notifications/{item['id']}/read/").status_code == 404, other
        assert _inbox(team_api(other)) == []
    assert team_api("author").post(f"/api/notifications/{item['id']}/read/").json() == {"unread": 0}
    assert _inbox(team_api("author"))[0]["read"] is True
    assert team_api("author").get("/api/notifications/?unread=true").json()["results"] == []
    assert team_api("author").get("/api/notifications/?unread=maybe").status_code == 400


def test_read_all_marks_every_item(team_api, drafting_review):
    for title in ("One", "Two"):
        file_finding(team_api("reviewer"), drafting_review, title)
        _publish(team_api("reviewer"), drafting_review)
    assert team_api("author").get("/api/notifications/unread/").json() == {"unread": 2}
    assert team_api("author").post("/api/notifications/read-all/").json() == {"unread": 0}
    assert team_api("author").get("/api/notifications/unread/").json() == {"unread": 0}


def test_email_follows_each_users_setting(team_api, drafting_review, mailoutbox, django_capture_on_commit_callbacks):
    assert team_api("author").get("/api/notifications/settings/").json() == {"email": "instant"}
    bad = team_api("author").put("/api/notifications/settings/", {"email": "hourly"}, format="json")
    assert bad.status_code == 400 and "email" in bad.json()
    assert team_api("author").put("/api/notifications/settings/", {"email": "daily"},
                                  format="json").json() == {"email": "daily"}
    assert team_api("reviewer2").put("/api/notifications/settings/", {"email": "off"}, format="json").status_code == 200
    with django_capture_on_commit_callbacks(execute=True):
        file_finding(team_api("reviewer"), drafting_review, "One", body="@reviewer2 look")
        _publish(team_api("reviewer"), drafting_review)
        file_finding(team_api("reviewer"), drafting_review, "Two")
        _publish(team_api("reviewer"), drafting_review)
    assert mailoutbox == []  # the author is on the digest, reviewer2 has e-mail off
    assert Notification.objects.filter(recipient__username="reviewer2").count() == 1  # still in the inbox

    call_command("send_digests", verbosity=0)
    assert len(mailoutbox) == 1
    assert mailoutbox[0].to == ["author@example.test"]
    assert "2 notifications" in mailoutbox[0].subject
    assert mailoutbox[0].body.count("published a review") == 2
    call_command("send_digests", verbosity=0)
    assert len(mailoutbox) == 1  # nothing is mailed twice


def test_the_digest_task_runs_the_same_digest(team_api, drafting_review, mailoutbox):
    from reviewer.tasks import send_notification_digests

    team_api("author").put("/api/notifications/settings/", {"email": "daily"}, format="json")
    file_finding(team_api("reviewer"), drafting_review, "One")
    _publish(team_api("reviewer"), drafting_review)
    assert send_notification_digests() == 1
    assert len(mailoutbox) == 1


def test_the_inbox_page_and_the_top_bar_count(client, team, team_api, drafting_review):
    file_finding(team_api("reviewer"), drafting_review, "Only copy of the queue")
    _publish(team_api("reviewer"), drafting_review)
    client.force_login(team["author"])
    page = client.get("/inbox/").content.decode()
    assert 'id="inbox-unread" data-unread="1"' in page
    assert "reviewer published a review" in page
    client.force_login(team["outsider"])
    page = client.get("/inbox/").content.decode()
    assert "published a review" not in page and "Nothing here yet" in page
    assert client.get("/").status_code == 200


def test_a_title_with_line_breaks_still_makes_a_one_line_subject(
    team_api, drafting_review, mailoutbox, django_capture_on_commit_callbacks
):
    drafting_review.file_directly = True
    drafting_review.save()
    with django_capture_on_commit_callbacks(execute=True):
        file_finding(team_api("reviewer"), drafting_review, "Two\nlines @reviewer2")
    assert len(mailoutbox) == 1
    assert "\n" not in mailoutbox[0].subject and "Two lines" in mailoutbox[0].subject


def test_staff_read_reviews_and_notifications_in_the_admin(client, team, team_api, drafting_review):
    file_finding(team_api("reviewer"), drafting_review, "Only copy of the queue")
    _publish(team_api("reviewer"), drafting_review)
    team["staff"].is_superuser = True
    team["staff"].save()
    client.force_login(team["staff"])
    reviews = client.get("/admin/reviewer/review/")
    assert reviews.status_code == 200 and "Comment" in reviews.content.decode()
    items = client.get("/admin/reviewer/notification/")
    assert items.status_code == 200 and "published a review" in items.content.decode()
