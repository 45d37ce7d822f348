"""The review document: opening, strengths and restatement, edited with a version guard
and exported as a review in the order one is given."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from django.core.management import call_command
from review_data_fixtures import *  # noqa: F403

from reviewer.models import EmulatorRun, ReviewSession, RunCommand, RunFrame
from reviewer.review import services
from reviewer.review.example.reviews import FIRST_DOCUMENT as EXAMPLE_DOCUMENT
from reviewer.review.example.reviews import FIRST_SUMMARY

pytestmark = pytest.mark.django_db


def _doc_url(session: Any) -> str:
    return f"/api/sessions/{session.pk}/document/"


def test_it_starts_empty_and_a_reviewer_writes_it(api_as, open_review):
    client = api_as("reviewer")
    first = client.get(_doc_url(open_review)).json()
    assert first["opening"] == first["strengths"] == first["restatement"] == ""
    assert first["version"] == 1 and first["updated_by"] is None
    answer = client.patch(_doc_url(open_review), {"opening": "Not ready: **three** things first.", "version": 1},
                          format="json")
    assert answer.status_code == 200, answer.content
    data = answer.json()
    assert data["version"] == 2 and data["updated_by"] == "reviewer"
    assert "<strong>three</strong>" in data["opening_html"]
    open_review.refresh_from_db()
    assert open_review.opening == "Not ready: **three** things first." and open_review.strengths == ""


def test_a_stale_version_is_refused_with_the_current_one(api_as, open_review):
    owner, reviewer = api_as("owner"), api_as("reviewer")
    assert owner.patch(_doc_url(open_review), {"strengths": "Per-model dispatchers.", "version": 1},
                       format="json").status_code == 200
    stale = reviewer.patch(_doc_url(open_review), {"strengths": "Something else.", "version": 1}, format="json")
    assert stale.status_code == 409
    assert stale.json()["current_version"] == 2
    open_review.refresh_from_db()
    assert open_review.strengths == "Per-model dispatchers."


def test_a_write_without_version_names_the_field(api_as, open_review):
    answer = api_as("owner").patch(_doc_url(open_review), {"opening": "x"}, format="json")
    assert answer.status_code == 400 and "version" in answer.json()


def test_a_part_over_the_limit_is_refused_naming_it(api_as, open_review, settings):
    settings.REVIEW_DOCUMENT_MAX_CHARS = 10
    answer = api_as("owner").patch(_doc_url(open_review), {"restatement": "x" * 11, "version": 1}, format="json")
    assert answer.status_code == 400
    assert "REVIEW_DOCUMENT_MAX_CHARS" in answer.json()["restatement"][0]


@pytest.mark.parametrize("who, get_status, patch_status", [
    ("outsider", 404, 404), (None, 401, 401), ("staff", 200, 200),
])
def test_who_may_read_and_write_it(api_as, open_review, who, get_status, patch_status):
    client = api_as(who)
    assert client.get(_doc_url(open_review)).status_code == get_status
    assert client.patch(_doc_url(open_review), {"opening": "x", "version": 1}, format="json").status_code == patch_status


def test_a_change_is_announced_to_the_session(api_as, open_review, monkeypatch):
    from reviewer.realtime import groups as realtime

    sent: list[tuple[int, str, dict[str, Any]]] = []
    monkeypatch.setattr(realtime, "session_event", lambda sid, event, data: sent.append((sid, event, data)))
    api_as("owner").patch(_doc_url(open_review), {"restatement": "Two models.", "version": 1}, format="json")
    assert [(sid, event) for sid, event, _ in sent] == [(open_review.pk, "document.updated")]
    assert sent[0][2]["document"]["restatement"] == "Two models." and sent[0][2]["document"]["version"] == 2


def test_the_example_review_exports_opening_strengths_and_restatement_in_order(api_as, people):
    call_command("load_example", owner="owner", example=["gateway"], verbosity=0)
    session = ReviewSession.objects.get()
    report = api_as("owner").get(f"/api/sessions/{session.pk}/export.md").content.decode()
    opening = report.index(EXAMPLE_DOCUMENT["opening"])
    strengths = report.index(EXAMPLE_DOCUMENT["strengths"])
    restatement = report.index(EXAMPLE_DOCUMENT["restatement"])
    groups = [report.index(f"\n## {name}\n") for name in ("Fix now", "Clarify", "Mention")]
    assert opening < strengths < restatement < groups[0] < groups[1] < groups[2]
    headings = [line for line in report.splitlines() if line.startswith("## ")]
    assert headings[:6] == ["## Opening", "## What the doc gets right", "## Restatement",
                            "## Fix now", "## Clarify", "## Mention"]
    # The published reviews follow the findings, then the placement puzzle's answer for
    # the doc's three hosts.
    assert headings[6:8] == ["## Published reviews", "## Placement"]
    assert FIRST_SUMMARY in report
    assert "**1 big + 2 small / 1 big + 2 small / 1 big + 2 small**" in report
    fix_now = report.split("\n## Fix now\n", 1)[1].split("\n## ", 1)[0]
    assert "*pass: numbers" in fix_now and "*pass: trace" in fix_now


def test_every_data_export_carries_the_document(api_as, people):
    call_command("load_example", owner="owner", example=["gateway"], verbosity=0)
    session = ReviewSession.objects.get()
    client = api_as("owner")
    data = json.loads(client.get(f"/api/sessions/{session.pk}/export.json").content)
    assert {k: data["document"][k] for k in EXAMPLE_DOCUMENT} == EXAMPLE_DOCUMENT
    assert data["placement"]["layout"].startswith("1 big + 2 small")
    jsonld = json.loads(client.get(f"/api/sessions/{session.pk}/export.jsonld").content)
    assert {k: jsonld[k] for k in EXAMPLE_DOCUMENT} == EXAMPLE_DOCUMENT
    context = client.get("/api/context.jsonld").json()["@context"]
    assert {"opening", "strengths", "restatement", "mergedInto", "duplicates", "measured"} <= set(context)
    rows = list(csv.DictReader(io.StringIO(client.get(f"/api/sessions/{session.pk}/export.csv").content.decode())))
    assert {"merged_into", "duplicates", "evidence_measured"} <= set(rows[0])


def test_evidence_is_exported_with_the_figures_measured_in_its_window(api_as, open_review, people):
    run = EmulatorRun.objects.create(session=open_review, started_by=people["owner"],
                                     scenario={**open_review.fleet_config.scenario, "name": "small"}, seed=3,
                                     status="done", frames_stored=3,
                                     summary={"offered": 1200, "ok": 900, "lost": 300, "latency_s": {"p99": 2.5}})
    for i, (t, depth, lost) in enumerate([(90.0, 7, 0), (100.0, 40, 5), (110.0, 12, 20), (200.0, 900, 100)]):
        RunFrame.objects.create(run=run, i=i, t_s=t, data={
            "i": i, "t_s": t, "models": ["small"], "m": {"queue_depth": [depth], "lost": [lost]}})
    # Sent during the frame ending at 110 s: the run page marks it at the end of the
    # frame it shows in, 110 s.
    RunCommand.objects.create(run=run, kind="fault", command="kill host:0", applied_at_s=105.0,
                              applied_after_frame=2)
    services.finding_create(session=open_review, author=people["owner"], review_pass="break", severity="fix_now",
                            title="The queue grows", evidence_run_id=run.pk, evidence_t_from_s=100.0,
                            evidence_t_to_s=110.0, evidence_metric="queue_depth")
    services.finding_create(session=open_review, author=people["owner"], review_pass="break", severity="clarify",
                            title="Requests are lost", evidence_run_id=run.pk, evidence_t_from_s=95.0,
                            evidence_t_to_s=150.0, evidence_metric="lost")
    report = api_as("owner").get(f"/api/sessions/{open_review.pk}/export.md").content.decode()
    assert (f"Evidence: run {run.pk} (small, seed 3), 100 s to 110 s, metric `queue_depth`: "
            "queue_depth peaked at 40 requests, mean 26 requests (small). Faults: kill host:0 at 110 s (injected). "
            "Whole run (done): 1,200 offered, 900 ok, 300 lost, p99 latency 2.5 s.") in report
    assert "lost 25 requests in the window (small)" in report
    data = json.loads(api_as("owner").get(f"/api/sessions/{open_review.pk}/export.json").content)
    evidence = {f["title"]: f["evidence"] for f in data["findings"]}
    assert evidence["The queue grows"]["figures"] == [
        {"metric": "queue_depth", "model": "small", "peak": 40.0, "mean": 26.0,
         "text": "queue_depth peaked at 40 requests, mean 26 requests (small)"}]
    assert evidence["Requests are lost"]["frames"] == 2
