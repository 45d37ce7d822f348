"""Exports of a session's findings: JSON, CSV, the Markdown report and W3C Web Annotations."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from django.core.management import call_command
from review_data_fixtures import *  # noqa: F403

from emulator.analysis.numbers import compute
from emulator.scenario import Scenario
from reviewer import selectors
from reviewer.models import EmulatorRun, Finding, ReviewSession
from reviewer.review import services

pytestmark = pytest.mark.django_db

FORMATS = ["json", "csv", "md", "jsonld"]


@pytest.fixture
def reviewed(open_review: Any, people: dict[str, Any]) -> Any:
    """The session with findings in every bucket, a restatement, evidence and a dropped one."""
    reviewer, owner = people["reviewer"], people["owner"]
    run = EmulatorRun.objects.create(session=open_review, started_by=reviewer,
                                     scenario=open_review.fleet_config.scenario, seed=1)
    make = services.finding_create
    make(session=open_review, author=owner, review_pass="restate", severity="mention",
         title="Two models behind a gateway", body="A per-model dispatcher batches by tokens.")
    make(session=open_review, author=reviewer, review_pass="numbers", severity="clarify",
         title="About 50 times too small", body="One worker serves about 13 QPS.\n\nSecond paragraph.",
         anchor_exact="Serve 10k QPS at peak.")
    make(session=open_review, author=reviewer, review_pass="trace", severity="fix_now", trace_hop="dispatcher",
         title="Round-robin to busy workers", body="Use **pull**.",
         anchor_exact="The queue sends each batch to the next worker in round-robin order.",
         evidence_run_id=run.pk, evidence_t_from_s=100.0, evidence_t_to_s=160.5, evidence_metric="backlog")
    make(session=open_review, author=owner, review_pass="break", severity="fix_now",
         title="Failover loses the queue", body="Cold standby.",
         anchor_exact="hot standby")
    make(session=open_review, author=owner, review_pass="break", severity="mention",
         title="Dropped idea", body="Not a problem after all.", status="dropped")
    return open_review


def _report_order(session: ReviewSession) -> list[Finding]:
    return list(selectors.findings_in_report_order(session.findings.all()))


def test_json_export_holds_every_finding_in_report_order(api_as, reviewed):
    response = api_as("reviewer").get(f"/api/sessions/{reviewed.pk}/export.json")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    data = json.loads(response.content)
    expected = _report_order(reviewed)
    assert [f["id"] for f in data["findings"]] == [f.pk for f in expected]
    ranks = [f["rank"] for f in data["findings"]]
    assert [r for r in ranks if r is not None] == list(range(1, len(expected)))
    assert [f["title"] for f in data["findings"] if f["rank"] is None] == ["Dropped idea"]
    by_id = {f["id"]: f for f in data["findings"]}
    for finding in expected:
        exported = by_id[finding.pk]
        assert (exported["title"], exported["body"], exported["pass"], exported["severity"], exported["status"]) == (
            finding.title, finding.body, finding.review_pass, finding.severity, finding.status)
        assert exported["anchor_exact"] == finding.anchor_exact
    assert data["doc"] == {"id": reviewed.doc_id, "title": "Chat serving", "revision": 1}
    assert data["fleet_config"]["version"] == 1
    assert data["session"]["id"] == reviewed.pk
    # The page's headline opens the export's figures, the best mix beside the gap at the peak.
    keys = [f["key"] for f in data["numbers"]]
    assert keys[0] == "gap_peak" and data["numbers"][0]["slot"] == "gap at the peak"
    assert {"best_mix_qps", "utilisation_avg", "offered_peak_qps", "capacity_at_split_qps"} <= set(keys)


def test_csv_export_parses_back_to_the_findings(api_as, reviewed):
    response = api_as("owner").get(f"/api/sessions/{reviewed.pk}/export.csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    expected = _report_order(reviewed)
    assert [int(r["id"]) for r in rows] == [f.pk for f in expected]
    for row, finding in zip(rows, expected, strict=True):
        assert row["title"] == finding.title and row["body"] == finding.body
        assert row["pass"] == finding.review_pass and row["severity"] == finding.severity
        assert row["anchor_exact"] == finding.anchor_exact
        assert row["anchor_start"] == ("" if finding.anchor_start is None else str(finding.anchor_start))
        assert row["evidence_run_id"] == ("" if finding.evidence_run_id is None else str(finding.evidence_run_id))


def test_markdown_report_follows_the_review_order(api_as, reviewed):
    response = api_as("owner").get(f"/api/sessions/{reviewed.pk}/export.md")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/markdown")
    text = response.content.decode()
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == ["## Opening", "## What the doc gets right", "## Restatement", "## Fix now", "## Clarify",
                        "## Mention", "## Published reviews", "## Placement", "## Figures from the fleet config"]
    sections = {h: text.split(h, 1)[1].split("\n## ", 1)[0] for h in headings}
    assert "No opening written yet." in sections["## Opening"]
    assert "No strengths recorded yet." in sections["## What the doc gets right"]
    # The restate-pass finding is named in the restatement and given once, where it ranks.
    assert "\"Two models behind a gateway\"" in sections["## Restatement"]
    assert text.count("### 4. Two models behind a gateway") == 1 and text.count("### Two models") == 0
    numbers = sections["## Figures from the fleet config"]
    assert "Computed from the fleet config small fleet (version 1):" in numbers
    figures = {f["key"]: f for f in compute(Scenario.from_dict(reviewed.fleet_config.scenario)).to_dict()["figures"]
               if f["model"] == "fleet"}
    assert f"- Capacity of the placed workers: {figures['capacity_qps']['display']}" in numbers
    assert f"- Offered load at average traffic: {figures['offered_avg_qps']['display']}" in numbers
    fix_now = sections["## Fix now"]
    assert fix_now.index("### 1. Round-robin to busy workers") < fix_now.index("### 2. Failover loses the queue")
    assert "> The queue sends each batch to the next worker in round-robin order." in fix_now
    run_id = EmulatorRun.objects.get().pk
    assert f"Evidence: run {run_id} (small, seed 1), 100 s to 160.5 s, metric `backlog`: no frames stored." in fix_now
    assert "hop: dispatcher" in fix_now
    assert "### 3. About 50 times too small" in sections["## Clarify"]
    assert "> Serve 10k QPS at peak." in sections["## Clarify"]
    assert "Dropped idea" not in text
    mention = sections["## Mention"]
    assert "### 4. Two models behind a gateway" in mention
    assert text.count("A per-model dispatcher batches by tokens.") == 1
    assert "A per-model dispatcher batches by tokens." in mention
    assert "No review published yet." in sections["## Published reviews"]
    assert "Findings: 2 to fix now, 1 to clarify, 1 to mention." in text


def test_jsonld_export_is_a_w3c_annotation_collection(api_as, reviewed):
    response = api_as("owner").get(f"/api/sessions/{reviewed.pk}/export.jsonld")
    assert response.status_code == 200 and response["Content-Type"] == "application/ld+json"
    data = json.loads(response.content)
    assert data["@context"][0] == "http://www.w3.org/ns/anno.jsonld"
    assert data["@context"][1] == "http://testserver/api/context.jsonld"
    assert data["type"] == "AnnotationCollection"
    items = data["first"]["items"]
    assert data["first"]["type"] == "AnnotationPage" and data["total"] == len(items)
    expected = _report_order(reviewed)
    assert [a["id"] for a in items] == [f"http://testserver/api/findings/{f.pk}/" for f in expected]
    ranks = iter(range(1, len(items)))
    for annotation, finding in zip(items, expected, strict=True):
        rank = None if finding.status == "dropped" else next(ranks)
        assert annotation["type"] == "Annotation"
        assert annotation["motivation"] == "assessing"
        assert annotation["body"] == {"type": "TextualBody", "value": finding.body,
                                      "format": "text/markdown", "purpose": "assessing"}
        assert (annotation["pass"], annotation["severity"], annotation.get("rank")) == (
            finding.review_pass, finding.severity, rank)
        target = annotation["target"]
        if finding.anchor_exact:
            assert target["source"] == f"http://testserver/api/docs/{reviewed.doc_id}/revisions/1/"
            quote, position = target["selector"]
            assert quote == {"type": "TextQuoteSelector", "exact": finding.anchor_exact,
                             "prefix": finding.anchor_prefix, "suffix": finding.anchor_suffix}
            assert position == {"type": "TextPositionSelector", "start": finding.anchor_start,
                                "end": finding.anchor_end}
            body = reviewed.doc.body
            assert body[position["start"] : position["end"]] == quote["exact"]
        else:
            assert "selector" not in target
    with_evidence = next(a for a in items if "evidence" in a)
    run_id = EmulatorRun.objects.get().pk
    assert with_evidence["evidence"] == {
        "run": run_id, "fromSeconds": 100.0, "toSeconds": 160.5, "metric": "backlog",
        "runLabel": f"run {run_id} (small, seed 1)",
        "measured": f"run {run_id} (small, seed 1), 100 s to 160.5 s, metric `backlog`: no frames stored."}


def test_the_published_context_defines_every_term_the_export_adds(api_as, reviewed, client):
    data = json.loads(api_as("owner").get(f"/api/sessions/{reviewed.pk}/export.jsonld").content)
    response = client.get("/api/context.jsonld")  # public: JSON-LD processors fetch it unauthenticated
    assert response.status_code == 200 and response["Content-Type"] == "application/ld+json"
    context = json.loads(response.content)["@context"]
    assert context["review"] == "http://testserver/api/context.jsonld#"
    w3c_terms = {"id", "type", "motivation", "created", "modified", "creator", "body", "target"}
    for annotation in data["first"]["items"]:
        for key in set(annotation) - w3c_terms:
            assert key in context, key
        for key in annotation.get("evidence", {}):
            assert key in context, key


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("who", "status"), [("staff", 200), ("outsider", 404), (None, 401)])
def test_who_may_export(api_as, reviewed, fmt, who, status):
    assert api_as(who).get(f"/api/sessions/{reviewed.pk}/export.{fmt}").status_code == status


def test_an_orphaned_finding_is_exported_with_its_original_anchor(api_as, reviewed, people):
    doc = reviewed.doc
    services.doc_revise(doc=doc, author=people["owner"], body=doc.body.replace(
        "The queue sends each batch to the next worker in round-robin order.\n", ""))
    text = api_as("owner").get(f"/api/sessions/{reviewed.pk}/export.md").content.decode()
    assert "revision 1; this passage is no longer in the latest revision" in text
    items = json.loads(api_as("owner").get(f"/api/sessions/{reviewed.pk}/export.jsonld").content)["first"]["items"]
    orphan = next(a for a in items if a["orphaned"])
    assert orphan["target"]["source"].endswith("/revisions/1/") and orphan["revision"] == 1


def test_the_example_review_exports_in_all_four_formats(api_as, people):
    call_command("load_example", owner="owner", example=["gateway"], verbosity=0)
    session = ReviewSession.objects.get()
    findings = _report_order(session)
    assert findings
    client = api_as("owner")
    exported = {fmt: client.get(f"/api/sessions/{session.pk}/export.{fmt}") for fmt in FORMATS}
    assert {fmt: r.status_code for fmt, r in exported.items()} == dict.fromkeys(FORMATS, 200)
    assert [f["id"] for f in json.loads(exported["json"].content)["findings"]] == [f.pk for f in findings]
    rows = list(csv.DictReader(io.StringIO(exported["csv"].content.decode())))
    assert [r["title"] for r in rows] == [f.title for f in findings]
    report = exported["md"].content.decode()
    assert all(f.title in report for f in findings)
    assert all(f.anchor_exact in report for f in findings)
    # The numbers headline of the doc as written: 10k QPS against 200 QPS at most.
    assert "- Gap at the peak, as placed: 93.8x" in report
    items = json.loads(exported["jsonld"].content)["first"]["items"]
    assert [a["body"]["value"] for a in items] == [f.body for f in findings]
    assert all(a["target"]["selector"][0]["exact"] == f.anchor_exact for a, f in zip(items, findings, strict=True))


def test_ranks_agree_across_the_report_and_the_data_exports(api_as, reviewed):
    client = api_as("owner")
    data = json.loads(client.get(f"/api/sessions/{reviewed.pk}/export.json").content)
    report = client.get(f"/api/sessions/{reviewed.pk}/export.md").content.decode()
    rows = list(csv.DictReader(io.StringIO(client.get(f"/api/sessions/{reviewed.pk}/export.csv").content.decode())))
    for finding, row in zip(data["findings"], rows, strict=True):
        if finding["rank"] is None:
            assert row["rank"] == "" and finding["title"] not in report
        else:
            assert row["rank"] == str(finding["rank"])
            assert f"### {finding['rank']}. {finding['title']}" in report


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_data_exports_cost_the_same_queries_however_many_findings(api_as, reviewed, people, fmt):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def exported() -> tuple[int, bytes]:
        with CaptureQueriesContext(connection) as ctx:
            response = api_as("reviewer").get(f"/api/sessions/{reviewed.pk}/export.{fmt}")
        assert response.status_code == 200
        return len(ctx.captured_queries), response.content

    first = Finding.objects.filter(session=reviewed).order_by("id").first()
    services.reply_create(finding=first, author=people["owner"], body="A reply.")
    exported()  # the first export works out the fleet config's analysis and stores it
    queries, _ = exported()
    for i in range(3):
        services.finding_create(session=reviewed, author=people["reviewer"], review_pass="trace",
                                title=f"More {i}")
    for finding in Finding.objects.filter(session=reviewed):
        services.reply_create(finding=finding, author=people["reviewer"], body="Another.")
    more_queries, content = exported()
    assert more_queries == queries
    if fmt == "json":
        by_id = {f["id"]: f for f in json.loads(content)["findings"]}
        assert [r["body"] for r in by_id[first.pk]["replies"]] == ["A reply.", "Another."]
        assert by_id[first.pk]["reply_count"] == 2


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t"])
def test_it_defuses_csv_cells_that_a_spreadsheet_would_run_as_formulas(api_as, open_review, people, start):
    from reviewer.review import services

    services.finding_create(session=open_review, author=people["reviewer"], review_pass="trace",
                            title=f"{start}HYPERLINK(\"http://evil.example\")", body=f"{start}1+1")
    response = api_as("owner").get(f"/api/sessions/{open_review.pk}/export.csv")
    row = next(csv.DictReader(io.StringIO(response.content.decode())))
    assert row["title"] == f"'{start}HYPERLINK(\"http://evil.example\")"
    assert row["body"] == f"'{start}1+1"


def test_the_exports_keep_apart_the_figures_from_the_doc_and_those_assumed(api_as, people):
    from reviewer.review.example.reviews import SECOND

    call_command("load_example", owner="owner", example=[SECOND.key], verbosity=0)
    session = ReviewSession.objects.get()
    client = api_as("owner")
    marks = json.loads(client.get(f"/api/sessions/{session.pk}/export.json").content)["fleet_config"]["provenance"]
    assert [m["path"] for m in marks["assumed"]] == ["worker.mbu", "worker.mfu"]
    assert {"path": "slo.tpot_s", "value": 0.008, "quote": "Time per output token (TPOT) of at most 8 ms"} in marks["doc"]
    report = client.get(f"/api/sessions/{session.pk}/export.md").content.decode()
    assert "from figures the doc states and figures the reviewer assumed:" in report
    assert "Assumed by the reviewer (not stated in the doc):\n\n- `worker.mbu` = 0.6\n- `worker.mfu` = 0.5" in report
    assert '- `slo.tpot_s` = 0.008: "Time per output token (TPOT) of at most 8 ms"' in report


def test_exports_read_the_analysis_stored_with_the_fleet_version(api_as, reviewed, monkeypatch):
    import emulator.analysis.record as record_module

    assert api_as("owner").get(f"/api/sessions/{reviewed.pk}/export.md").status_code == 200
    version = reviewed.fleet_config.latest_version()
    version.refresh_from_db()
    assert version.analysis["version"] == record_module.RECORD_VERSION

    def refuse(*args, **kwargs):
        raise AssertionError("an export worked the analysis out again")

    # Neither the numbers nor the placement answer is computed again: every format reads
    # the stored record.
    monkeypatch.setattr(record_module, "fleet_record", refuse)
    for fmt in ("json", "md", "csv", "jsonld"):
        assert api_as("owner").get(f"/api/sessions/{reviewed.pk}/export.{fmt}").status_code == 200
    stored = version.analysis["numbers"]["figures"]
    report = api_as("owner").get(f"/api/sessions/{reviewed.pk}/export.json").json()
    by_ref = {(f["model"], f["key"]): f for f in stored}
    assert report["numbers"] and all({k: v for k, v in fig.items() if k != "slot"} == by_ref[fig["model"], fig["key"]]
                                     for fig in report["numbers"])


def test_the_markdown_report_gives_threads_published_reviews_and_each_verdict_once(api_as, reviewed, people):
    from reviewer.review.publishing import review_publish

    owner, reviewer = people["owner"], people["reviewer"]
    finding = Finding.objects.get(title="Failover loses the queue")
    services.reply_create(finding=finding, author=reviewer, body="Is the standby warm?")
    services.reply_create(finding=finding, author=owner, body="Cold, for now.\n\nWe will measure the switch.")
    review_publish(session=reviewed, reviewer=reviewer, verdict="needs_changes", summary="Fix the failover first.")
    review_publish(session=reviewed, reviewer=reviewer, verdict="approve", summary="Good after the fix.")
    text = api_as("owner").get(f"/api/sessions/{reviewed.pk}/export.md").content.decode()
    entry = text.split("Failover loses the queue", 1)[1].split("\n### ", 1)[0]
    assert "Thread (2 replies):" in entry
    first, second = entry.index("- **reviewer** ("), entry.index("- **owner** (")
    assert first < second
    assert "): Is the standby warm?" in entry and "): Cold, for now." in entry
    assert "  We will measure the switch." in entry
    facts = text.split("## Opening", 1)[0]
    assert facts.count("reviewer: ") == 1 and "- Verdicts: reviewer: approve" in facts
    assert facts.count("Reviewers: owner, reviewer\n") == 1
    published = text.split("## Published reviews", 1)[1].split("\n## ", 1)[0]
    assert published.index("Fix the failover first.") < published.index("Good after the fix.")
    assert "### reviewer: needs changes" in published and "### reviewer: approve" in published


def test_evidence_quotes_units_and_the_fault_times_the_run_page_shows(api_as, reviewed, people):
    from reviewer.models import RunCommand, RunFrame
    from reviewer.review.evidence import evidence_details

    scenario = dict(reviewed.fleet_config.scenario, faults=[{"at_s": 30.0, "kill": "host:0"}])
    run = EmulatorRun.objects.create(session=reviewed, started_by=people["reviewer"], scenario=scenario, seed=1)
    for i in range(3):
        RunFrame.objects.create(run=run, i=i, t_s=float(i + 1), data={
            "i": i, "t_s": float(i + 1), "models": ["small"],
            "m": {"tpot_p50_s": [0.0496 + i / 1000], "queue_depth": [40 + i], "goodput": [0.5]}})
    # Sent during the second frame, applied at its end (2 s): the page marks it where it
    # shows, at the end of the third frame (3 s).
    RunCommand.objects.create(run=run, kind="fault", command="kill host:1", applied_after_frame=2, applied_at_s=2.0)
    made = {metric: services.finding_create(
        session=reviewed, author=people["reviewer"], review_pass="break", severity="clarify", title=metric,
        evidence_run_id=run.pk, evidence_t_from_s=0.0, evidence_t_to_s=3.0, evidence_metric=metric)
        for metric in ("tpot_p50_s", "queue_depth", "goodput")}
    details = evidence_details(made.values())
    texts = {metric: details[f.pk]["text"] for metric, f in made.items()}
    assert "tpot_p50_s peaked at 51.6 ms, mean 50.6 ms (small)" in texts["tpot_p50_s"]
    assert "queue_depth peaked at 42 requests, mean 41 requests (small)" in texts["queue_depth"]
    assert "goodput peaked at 50%" in texts["goodput"]
    assert "Faults: kill host:0 at 30 s (scheduled), kill host:1 at 3 s (injected)" in texts["goodput"]


def test_evidence_comparing_two_runs_names_both_with_their_changed_keys(api_as, reviewed, people):
    from reviewer.models import RunFrame
    from reviewer.review.evidence import evidence_details

    scenario = reviewed.fleet_config.scenario
    runs = [EmulatorRun.objects.create(session=reviewed, started_by=people["reviewer"], scenario=scenario, seed=1,
                                       overrides=overrides)
            for overrides in ([], ["dispatcher.policy=pull"])]
    for depth, run in zip((40, 7), runs, strict=True):
        for i in range(3):
            RunFrame.objects.create(run=run, i=i, t_s=float(i + 1), data={
                "i": i, "t_s": float(i + 1), "models": ["small"], "m": {"queue_depth": [depth + i]}})
    finding = services.finding_create(
        session=reviewed, author=people["reviewer"], review_pass="break", severity="fix_now",
        title="Pull keeps the queue short", evidence_run_id=runs[0].pk, evidence_compare_run_id=runs[1].pk,
        evidence_t_from_s=0.0, evidence_t_to_s=3.0, evidence_metric="queue_depth")
    detail = evidence_details([finding])[finding.pk]
    assert detail["compared"]["run"] == runs[1].pk
    first, _, second = detail["text"].partition(" Compared with ")
    assert f"run {runs[0].pk}" in first and "queue_depth peaked at 42 requests" in first
    assert f"run {runs[1].pk}" in second and "with dispatcher.policy=pull" in second
    assert "queue_depth peaked at 9 requests" in second

    report = api_as("reviewer").get(f"/api/sessions/{reviewed.pk}/export.md").content.decode()
    assert f"Compared with run {runs[1].pk}" in report and "with dispatcher.policy=pull" in report
    annotations = json.loads(api_as("reviewer").get(f"/api/sessions/{reviewed.pk}/export.jsonld").content)
    evidence = next(a["evidence"] for a in annotations["first"]["items"]
                    if a["id"].endswith(f"/api/findings/{finding.pk}/"))
    assert evidence["comparedRun"] == runs[1].pk and "dispatcher.policy=pull" in evidence["comparedRunLabel"]
    rows = list(csv.DictReader(io.StringIO(api_as("reviewer").get(f"/api/sessions/{reviewed.pk}/export.csv").content.decode())))
    assert next(r for r in rows if r["title"] == "Pull keeps the queue short")["evidence_compare_run_id"] == str(runs[1].pk)
