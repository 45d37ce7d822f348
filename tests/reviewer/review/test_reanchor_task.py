"""Re-anchoring off the request path: a doc edit returns at once and a worker moves the findings.

The edit commits the new revision and answers with ``reanchoring`` pending;
the findings not moved yet say ``anchor_pending``. The task moves them in
bounded batches, records and publishes its progress, and is idempotent, so a
retry after its worker died finishes the job without moving anything twice.
"""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from review_data_fixtures import *  # noqa: F403

from reviewer.models import DocRevision, Finding
from reviewer.review import services
from reviewer.tasks import reanchor_revision

pytestmark = pytest.mark.usefixtures("redis_url")

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def in_background(settings: Any) -> None:
    settings.REANCHOR_IN_BACKGROUND = True


def _docs_queue_length() -> int:
    import redis
    from django.conf import settings

    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        return int(client.llen(settings.DOCS_QUEUE))
    finally:
        client.close()


def _purge_docs_queue() -> None:
    import redis
    from django.conf import settings

    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        client.delete(settings.DOCS_QUEUE)
    finally:
        client.close()


def _file(session: Any, author: Any, count: int, quote: str = "round-robin") -> list[Finding]:
    return [services.finding_create(session=session, author=author, review_pass="trace", title=f"f{i}",
                                    anchor_exact=quote) for i in range(count)]


@pytest.mark.django_db
def test_it_answers_a_doc_edit_at_once_with_the_findings_pending_then_the_task_moves_them(
        api_as: Any, open_review: Any, people: Any, in_background: None,
        django_capture_on_commit_callbacks: Any) -> None:
    from reviewer.runs.services import wait_enqueued

    _purge_docs_queue()
    findings = _file(open_review, people["reviewer"], 3)
    doc = open_review.doc
    with django_capture_on_commit_callbacks(execute=True):
        response = api_as("owner").patch(f"/api/docs/{doc.pk}/", {"body": "Intro.\n\n" + doc.body}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["revision"] == 2
    assert response.json()["reanchoring"] == {"status": "pending", "done": 0, "total": 3}
    wait_enqueued()
    assert _docs_queue_length() == 1  # handed to the docs queue's worker, not done in the request
    _purge_docs_queue()

    listed = api_as("reviewer").get(f"/api/sessions/{open_review.pk}/findings/").json()["results"]
    assert {(f["revision"], f["anchor_pending"]) for f in listed} == {(1, True)}

    revision = DocRevision.objects.get(doc=doc, number=2)
    assert reanchor_revision.apply(args=[revision.pk]).get() == {"status": "done", "done": 3, "total": 3}
    listed = api_as("reviewer").get(f"/api/sessions/{open_review.pk}/findings/").json()["results"]
    assert {(f["revision"], f["anchor_pending"], f["anchor_start"]) for f in listed} == {
        (2, False, findings[0].anchor_start + len("Intro.\n\n"))}
    assert api_as("owner").get(f"/api/docs/{doc.pk}/").json()["reanchoring"]["status"] == "done"


@pytest.mark.django_db
def test_it_publishes_the_progress_to_the_docs_sessions_after_each_batch(
        open_review: Any, people: Any, in_background: None, monkeypatch: pytest.MonkeyPatch,
        django_capture_on_commit_callbacks: Any) -> None:
    monkeypatch.setattr(services, "REANCHOR_BATCH", 2)
    sent: list[tuple[int, str, dict]] = []
    monkeypatch.setattr("reviewer.realtime.groups.session_event", lambda sid, event, data: sent.append((sid, event, data)))
    _file(open_review, people["reviewer"], 5)
    doc = open_review.doc
    with django_capture_on_commit_callbacks(execute=False):
        result = services.doc_revise(doc=doc, author=people["owner"], body="Intro.\n\n" + doc.body)
    assert result.pending and result.moved == []
    services.reanchor_revision(revision_id=result.revision.pk)
    progress = [(data["done"], data["status"]) for sid, event, data in sent
                if event == "doc.reanchoring" and sid == open_review.pk]
    assert progress == [(2, "pending"), (4, "pending"), (5, "pending"), (5, "done")]


@pytest.mark.django_db
def test_a_retry_after_the_worker_died_finishes_without_moving_a_finding_twice(
        open_review: Any, people: Any, in_background: None, monkeypatch: pytest.MonkeyPatch,
        django_capture_on_commit_callbacks: Any) -> None:
    monkeypatch.setattr(services, "REANCHOR_BATCH", 2)
    findings = _file(open_review, people["reviewer"], 5)
    doc = open_review.doc
    with django_capture_on_commit_callbacks(execute=False):
        revision = services.doc_revise(doc=doc, author=people["owner"], body="Intro.\n\n" + doc.body).revision

    real_progress = services._progress

    def die_in_second_batch(rev: DocRevision, done: int) -> None:
        if done > 2:  # the first batch committed; the second is lost with the worker
            raise SystemExit("worker killed")
        real_progress(rev, done)

    monkeypatch.setattr(services, "_progress", die_in_second_batch)
    with pytest.raises(SystemExit):
        services.reanchor_revision(revision_id=revision.pk)
    revision.refresh_from_db()
    assert (revision.reanchor_status, revision.reanchor_done) == ("pending", 2)
    assert Finding.objects.filter(revision=revision).count() == 2

    monkeypatch.setattr(services, "_progress", real_progress)
    services.reanchor_revision(revision_id=revision.pk)
    services.reanchor_revision(revision_id=revision.pk)  # a duplicate delivery does nothing
    revision.refresh_from_db()
    assert (revision.reanchor_status, revision.reanchor_done, revision.reanchor_total) == ("done", 5, 5)
    versions = dict(Finding.objects.values_list("pk", "version"))
    assert all(versions[f.pk] == f.version + 1 for f in findings)
    assert Finding.objects.filter(revision=revision).count() == 5


@pytest.mark.django_db
def test_it_hands_a_re_anchoring_that_stopped_making_progress_to_a_worker_again(
        open_review: Any, people: Any, in_background: None, django_capture_on_commit_callbacks: Any) -> None:
    from reviewer.runs.services import wait_enqueued

    _purge_docs_queue()
    _file(open_review, people["reviewer"], 2)
    doc = open_review.doc
    with django_capture_on_commit_callbacks(execute=False):
        revision = services.doc_revise(doc=doc, author=people["owner"], body="Intro.\n\n" + doc.body).revision
    assert services.reanchors_resume() == []  # just saved: its task has time to start
    DocRevision.objects.filter(pk=revision.pk).update(
        reanchor_beat_at=timezone.now() - timedelta(seconds=services.REANCHOR_STALLED_AFTER_S + 1))
    with django_capture_on_commit_callbacks(execute=True):
        assert services.reanchors_resume() == [revision.pk]
    wait_enqueued()
    assert _docs_queue_length() == 1
    _purge_docs_queue()
    assert services.reanchors_resume() == []  # handed over just now


@pytest.mark.django_db
def test_it_stays_synchronous_with_eager_tasks(open_review: Any, people: Any, settings: Any,
                                               in_background: None) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = True
    _file(open_review, people["reviewer"], 2)
    doc = open_review.doc
    result = services.doc_revise(doc=doc, author=people["owner"], body="Intro.\n\n" + doc.body)
    assert not result.pending and len(result.moved) == 2
    result.revision.refresh_from_db()
    assert result.revision.reanchor_status == "done"


@pytest.mark.django_db
def test_a_title_only_edit_moves_the_findings_in_the_task_too(
        open_review: Any, people: Any, in_background: None, django_capture_on_commit_callbacks: Any) -> None:
    _file(open_review, people["reviewer"], 2)
    doc = open_review.doc
    with django_capture_on_commit_callbacks(execute=False):
        result = services.doc_revise(doc=doc, author=people["owner"], title="Renamed")
    assert result.pending
    assert len(services.reanchor_revision(revision_id=result.revision.pk).moved) == 2


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_docs_queue_worker_moves_the_findings_after_the_edit_returned(
        api_as: Any, open_review: Any, people: Any, in_background: None, redis_url: str, tmp_path: Path) -> None:
    import os
    import signal

    from support import subprocess_database_url

    _file(open_review, people["reviewer"], 4)
    env = {**os.environ, "REDIS_URL": redis_url, "DATABASE_URL": subprocess_database_url(),
           "DJANGO_SETTINGS_MODULE": "reviewer.settings"}
    log = tmp_path / "docs-worker.log"
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "reviewer", "worker", "-P", "prefork", "-c", "1", "-Q", "docs",
             "--without-heartbeat", "--without-gossip", "--without-mingle", "-n", "docs-test@localhost"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        doc = open_review.doc
        response = api_as("owner").patch(f"/api/docs/{doc.pk}/", {"body": "Intro.\n\n" + doc.body}, format="json")
        assert response.json()["reanchoring"]["status"] == "pending"
        deadline = time.monotonic() + 60
        while api_as("owner").get(f"/api/docs/{doc.pk}/").json()["reanchoring"]["status"] != "done":
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.3)
        assert set(Finding.objects.values_list("revision__number", flat=True)) == {2}
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)


@pytest.mark.django_db
def test_a_stale_copy_of_the_task_returns_at_once_and_the_live_one_stops_when_handed_over(
        open_review: Any, people: Any, in_background: None, monkeypatch: pytest.MonkeyPatch,
        django_capture_on_commit_callbacks: Any) -> None:
    sent: list[list[Any]] = []
    monkeypatch.setattr("reviewer.runs.broker.send_task_after_commit",
                        lambda name, args, what, retried_by: sent.append(args))
    _file(open_review, people["reviewer"], 3)
    doc = open_review.doc
    revision = services.doc_revise(doc=doc, author=people["owner"], body="Intro.\n\n" + doc.body).revision
    DocRevision.objects.filter(pk=revision.pk).update(
        reanchor_beat_at=timezone.now() - timedelta(seconds=services.REANCHOR_STALLED_AFTER_S + 1))
    assert services.reanchors_resume() == [revision.pk]
    assert sent == [[revision.pk, 1], [revision.pk, 2]]  # each hand-over has its own number

    assert reanchor_revision(revision.pk, 1) == {"status": "pending", "done": 0, "total": 3}  # the stale copy
    assert Finding.objects.filter(revision=revision).count() == 0

    # The live copy is handed over again while it works (its worker seemed lost): it stops at its next beat.
    monkeypatch.setattr(services, "REANCHOR_HEARTBEAT_S", 0.0)
    real_placement = services._placement

    def handed_over_meanwhile(finding: Finding, rev: DocRevision) -> Any:
        DocRevision.objects.filter(pk=rev.pk).update(reanchor_dispatch=3)
        return real_placement(finding, rev)

    monkeypatch.setattr(services, "_placement", handed_over_meanwhile)
    assert reanchor_revision(revision.pk, 2)["status"] == "pending"
    assert Finding.objects.filter(revision=revision).count() == 0
    monkeypatch.setattr(services, "_placement", real_placement)
    assert reanchor_revision(revision.pk, 3) == {"status": "done", "done": 3, "total": 3}
    assert Finding.objects.filter(revision=revision).count() == 3


@pytest.mark.django_db
def test_the_watchdog_does_not_hand_over_a_task_that_beats_while_it_works(
        open_review: Any, people: Any, in_background: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch slower than the stall allowance: the live task's beats keep the watchdog off it."""
    sent: list[list[Any]] = []
    monkeypatch.setattr("reviewer.runs.broker.send_task_after_commit",
                        lambda name, args, what, retried_by: sent.append(args))
    monkeypatch.setattr(services, "REANCHOR_HEARTBEAT_S", 0.1, raising=False)
    stalled_after_s = 0.8
    _file(open_review, people["reviewer"], 6)
    doc = open_review.doc
    revision = services.doc_revise(doc=doc, author=people["owner"], body="Intro.\n\n" + doc.body).revision
    assert len(sent) == 1
    real_placement = services._placement
    resent: list[list[int]] = []

    def slow(finding: Finding, rev: DocRevision) -> Any:
        time.sleep(0.25)  # six findings: 1.5 s in one batch, before any progress is recorded
        resent.append(services.reanchors_resume(stalled_after_s=stalled_after_s))
        return real_placement(finding, rev)

    monkeypatch.setattr(services, "_placement", slow)
    assert reanchor_revision(revision.pk) == {"status": "done", "done": 6, "total": 6}
    assert resent == [[]] * 6
    assert len(sent) == 1  # never handed over again


@pytest.mark.django_db
def test_a_big_re_anchoring_goes_to_the_back_of_the_docs_queue_after_its_slice(
        open_review: Any, people: Any, in_background: None, settings: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The docs queue, worked in order: another user's job queued behind a big re-anchoring runs after its
    first slice, not after the whole job."""
    from reviewer import tasks

    settings.REANCHOR_SLICE_S = 0  # one batch per slice
    monkeypatch.setattr(services, "REANCHOR_BATCH", 2)
    queue: list[tuple[str, list[Any]]] = []
    monkeypatch.setattr("reviewer.runs.broker.send_task_after_commit",
                        lambda name, args, what, retried_by: queue.append((name, args)))
    ran: list[str] = []
    real_progress = services._progress

    def progress(rev: DocRevision, done: int) -> None:
        ran.append(f"re-anchoring {done} of {rev.reanchor_total}")
        real_progress(rev, done)

    monkeypatch.setattr(services, "_progress", progress)
    monkeypatch.setattr("reviewer.fleets.break_advice.break_advice_compute",
                        lambda *, version_id: ran.append(f"break advice {version_id}") or {})
    _file(open_review, people["reviewer"], 6)
    doc = open_review.doc
    revision = services.doc_revise(doc=doc, author=people["owner"], body="Intro.\n\n" + doc.body).revision
    queue.append(("break_advice", [77]))  # another user's job, queued behind the big one
    while queue:
        name, args = queue.pop(0)
        getattr(tasks, name)(*args)
    assert ran == ["re-anchoring 2 of 6", "break advice 77", "re-anchoring 4 of 6", "re-anchoring 6 of 6"]
    revision.refresh_from_db()
    assert (revision.reanchor_status, revision.reanchor_done) == ("done", 6)
    assert Finding.objects.filter(revision=revision).count() == 6


def test_the_re_anchoring_task_has_time_limits_from_the_settings() -> None:
    from django.conf import settings

    assert (reanchor_revision.soft_time_limit, reanchor_revision.time_limit) == (
        settings.REANCHOR_SOFT_TIME_LIMIT_S, settings.REANCHOR_TIME_LIMIT_S) == (120, 150)


@pytest.mark.django_db
def test_the_doc_reanchoring_event_says_how_many_findings_of_how_many_are_placed(
        client: Any, open_review: Any, people: Any, in_background: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the session page's re-anchoring line reads: the page's starting state, then each event."""
    import json
    import re

    monkeypatch.setattr(services, "REANCHOR_BATCH", 2)
    monkeypatch.setattr("reviewer.runs.broker.send_task_after_commit", lambda *args: None)
    sent: list[dict[str, Any]] = []
    monkeypatch.setattr("reviewer.realtime.groups.session_event",
                        lambda sid, event, data: sent.append({"type": event, **data}))
    _file(open_review, people["reviewer"], 3)
    doc = open_review.doc
    revision = services.doc_revise(doc=doc, author=people["owner"], body="Intro.\n\n" + doc.body).revision

    client.force_login(people["reviewer"])
    page = client.get(f"/sessions/{open_review.pk}/").content.decode()
    assert 'id="reanchoring"' in page
    config = json.loads(re.search(r'<script id="page-config" type="application/json">(.*?)</script>', page,
                                  re.S).group(1))
    assert config["reanchoring"] == {"revision": 2, "status": "pending", "done": 0, "total": 3}

    services.reanchor_revision(revision_id=revision.pk)
    events = [e for e in sent if e["type"] == "doc.reanchoring"]
    assert events == [
        {"type": "doc.reanchoring", "doc": doc.pk, "revision": 2, "status": "pending", "done": 2, "total": 3},
        {"type": "doc.reanchoring", "doc": doc.pk, "revision": 2, "status": "pending", "done": 3, "total": 3},
        {"type": "doc.reanchoring", "doc": doc.pk, "revision": 2, "status": "done", "done": 3, "total": 3},
    ]
    assert revision.number == 2
