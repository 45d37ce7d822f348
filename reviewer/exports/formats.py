"""A review session's findings as JSON, CSV, a Markdown report and W3C Web Annotations.

Each builder takes a session and returns text (or a JSON-safe dict); the API
serves them under /api/sessions/<id>/export.<format>. Findings come in report
order: fix now, clarify, mention, each bucket by position.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from typing import Any

from django.db.models import Count, Prefetch, Q
from django.utils import timezone

from reviewer.fleets.analysis_record import latest_record
from reviewer.fleets.provenance import ASSUMED, FROM_DOC, MEASURED, split
from reviewer.models.collaboration import FindingState
from reviewer.models.review import (
    Finding,
    FindingReply,
    FindingStatus,
    ReviewPass,
    ReviewSession,
    Severity,
)
from reviewer.representations import (
    finding_representation,
    reply_representations,
    review_document_representation,
    review_representation,
    session_representation,
)
from reviewer.review.duplicates import duplicates_in_session
from reviewer.review.evidence import evidence_details
from reviewer.selectors import findings_in_report_order

ANNO_CONTEXT = "http://www.w3.org/ns/anno.jsonld"

# Our terms, published at /api/context.jsonld; "review:" expands to that
# document's URL + "#", so each term has a dereferenceable IRI.
CONTEXT_TERMS: dict[str, Any] = {
    "title": "http://purl.org/dc/terms/title",
    "pass": {"@id": "review:pass"},
    "severity": {"@id": "review:severity"},
    "rank": {"@id": "review:rank", "@type": "http://www.w3.org/2001/XMLSchema#integer"},
    "position": {"@id": "review:position", "@type": "http://www.w3.org/2001/XMLSchema#integer"},
    "findingStatus": {"@id": "review:findingStatus"},
    "orphaned": {"@id": "review:orphaned", "@type": "http://www.w3.org/2001/XMLSchema#boolean"},
    "traceHop": {"@id": "review:traceHop"},
    "evidence": {"@id": "review:evidence"},
    "run": {"@id": "review:run", "@type": "http://www.w3.org/2001/XMLSchema#integer"},
    "fromSeconds": {"@id": "review:fromSeconds", "@type": "http://www.w3.org/2001/XMLSchema#double"},
    "toSeconds": {"@id": "review:toSeconds", "@type": "http://www.w3.org/2001/XMLSchema#double"},
    "metric": {"@id": "review:metric"},
    "revision": {"@id": "review:revision", "@type": "http://www.w3.org/2001/XMLSchema#integer"},
    "opening": {"@id": "review:opening"},
    "strengths": {"@id": "review:strengths"},
    "restatement": {"@id": "review:restatement"},
    "mergedInto": {"@id": "review:mergedInto", "@type": "@id"},
    "duplicates": {"@id": "review:duplicates", "@type": "@id", "@container": "@set"},
    "runLabel": {"@id": "review:runLabel"},
    "measured": {"@id": "review:measured"},
    "comparedRun": {"@id": "review:comparedRun", "@type": "http://www.w3.org/2001/XMLSchema#integer"},
    "comparedRunLabel": {"@id": "review:comparedRunLabel"},
    "published": {"@id": "review:published", "@type": "http://www.w3.org/2001/XMLSchema#dateTime"},
    "verdict": {"@id": "review:verdict"},
    "state": {"@id": "review:state"},
    "stateReason": {"@id": "review:stateReason"},
    "fixedRevision": {"@id": "review:fixedRevision", "@type": "http://www.w3.org/2001/XMLSchema#integer"},
}

CSV_COLUMNS = [
    "id", "rank", "pass", "severity", "position", "status", "title", "body", "author",
    "anchor_exact", "anchor_prefix", "anchor_suffix", "anchor_start", "anchor_end", "revision",
    "orphaned", "trace_hop", "evidence_run_id", "evidence_t_from_s", "evidence_t_to_s",
    "evidence_metric", "evidence_compare_run_id", "created_at", "updated_at", "version",
    "merged_into", "duplicates", "evidence_measured",
    "draft", "published_at", "verdict", "state", "state_reason", "fixed_revision",
]

SEVERITY_HEADINGS = {Severity.FIX_NOW: "Fix now", Severity.CLARIFY: "Clarify", Severity.MENTION: "Mention"}

# Fleet-wide figures an export gives after the numbers pass's headline (and the
# figures beside it): the load, the capacity, the headroom and the floors.
HEADLINE_FIGURES = [
    "offered_peak_qps", "offered_avg_qps", "capacity_qps", "capacity_at_split_qps",
    "capacity_one_host_lost_qps", "queue_growth_avg", "latency_floor_s",
]

# Builds an absolute URL from a path (request.build_absolute_uri in the API).
UrlBuilder = Callable[[str], str]


def ordered_findings(session: ReviewSession) -> list[Finding]:
    """The session's published findings in report order (drafts are their authors' alone)."""
    # Reply counts and threads come with two queries, not two per finding.
    replies = FindingReply.objects.select_related("author").filter(published_at__isnull=False).order_by(
        "created_at", "id"
    )
    qs = (
        session.findings.filter(published_at__isnull=False)
        .select_related("author", "revision", "publication")
        .annotate(reply_total=Count("replies", filter=Q(replies__published_at__isnull=False)))
        .prefetch_related(Prefetch("replies", queryset=replies))
    )
    findings = list(findings_in_report_order(qs))
    # Worked out once for the export, not once per finding.
    duplicates = duplicates_in_session(session.pk)
    evidence = evidence_details(findings)
    for finding in findings:
        finding.duplicate_ids = duplicates.get(finding.pk, [])  # type: ignore[attr-defined]
        finding.evidence_detail = evidence.get(finding.pk)  # type: ignore[attr-defined]
    return findings


def _measured(finding: Finding) -> dict[str, Any] | None:
    """The evidence as read from the run (set by ``ordered_findings``)."""
    return getattr(finding, "evidence_detail", None)


def _not_ranked(finding: Finding) -> bool:
    """Dropped findings and findings merged into another take no rank."""
    return finding.status == FindingStatus.DROPPED or finding.merged_into_id is not None


def ranked_findings(session: ReviewSession) -> list[tuple[Finding, int | None]]:
    """Findings in report order with their rank: 1, 2, ... over the ones not dropped nor merged.

    The same numbers head the Markdown report's entries; dropped and merged
    findings have no rank.
    """
    ranked: list[tuple[Finding, int | None]] = []
    rank = 0
    for finding in ordered_findings(session):
        if _not_ranked(finding):
            ranked.append((finding, None))
        else:
            rank += 1
            ranked.append((finding, rank))
    return ranked


def fleet_headline(session: ReviewSession) -> list[dict[str, Any]]:
    """The headline figures of the session's fleet config, read from its stored analysis
    (empty without one)."""
    record = latest_record(session.fleet_config)
    if record is None:
        # A config the emulator no longer accepts still exports its findings, without figures.
        return []
    numbers = record["numbers"]
    out: dict[tuple[str, str], dict[str, Any]] = {}
    # The page's headline first, in its slots, then the figures beside each.
    for slot in numbers.get("headline", []):
        figure = {k: v for k, v in slot.items() if k != "beside"}
        out.setdefault((figure["model"], figure["key"]), figure)
        for beside in slot.get("beside", []):
            out.setdefault((beside["model"], beside["key"]), beside)
    fleet = {f["key"]: f for f in numbers["figures"] if f["model"] == "fleet"}
    for key in HEADLINE_FIGURES:
        if key in fleet:
            out.setdefault(("fleet", key), fleet[key])
    return list(out.values())


def export_json(session: ReviewSession) -> dict[str, Any]:
    """Everything about the session's findings, replies included."""
    doc = session.doc
    latest = doc.latest_revision()
    config = session.fleet_config
    config_version = config.latest_version() if config else None
    findings = []
    for finding, rank in ranked_findings(session):
        data = finding_representation(finding)
        data["rank"] = rank
        data["replies"] = reply_representations(finding.replies.all())
        data["evidence"] = _measured(finding)
        findings.append(data)
    return {
        "session": session_representation(session),
        "document": review_document_representation(session),
        "placement": placement_answer(session),
        "doc": {"id": doc.pk, "title": doc.title, "revision": latest.number if latest else None},
        "fleet_config": (
            {"id": config.pk, "name": config.name, "version": config_version.number if config_version else None,
             # Which input figures are the doc's (with its words) and which the reviewer assumed.
             "provenance": split(config_version.provenance if config_version else {}, config.scenario)}
            if config
            else None
        ),
        "exported_at": timezone.now().isoformat(),
        "numbers": fleet_headline(session),
        "reviews": [review_representation(r) for r in session.reviews.select_related("reviewer")],
        "findings": findings,
    }


# A cell starting with one of these is run as a formula by spreadsheets
# (OWASP "CSV injection"); such text cells get a leading apostrophe.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """``value`` as a CSV cell that a spreadsheet shows as text, never runs as a formula."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def export_csv(session: ReviewSession) -> str:
    """One row per finding, columns as ``CSV_COLUMNS``; text that looks like a formula is defused."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\r\n")
    writer.writeheader()
    for finding, rank in ranked_findings(session):
        data = finding_representation(finding)
        data["rank"] = rank
        measured = _measured(finding)
        data["evidence_measured"] = measured["text"] if measured else None
        data["duplicates"] = " ".join(str(i) for i in data.get("duplicates") or []) or None
        row = {name: data.get(name) for name in CSV_COLUMNS}
        writer.writerow({k: csv_cell(v) for k, v in row.items()})
    return out.getvalue()


def placement_answer(session: ReviewSession) -> dict[str, Any] | None:
    """The placement puzzle's best layout for the session's fleet, read from its stored
    analysis, or None without one (or for a fleet the puzzle does not apply to)."""
    record = latest_record(session.fleet_config)
    placed = None if record is None else record["placement"]
    if not placed or not placed.get("applies") or not placed.get("best"):
        return None
    best = placed["best"]
    return {
        "layout": best["label"],
        "hosts": placed["hosts"],
        "units": placed["units"],
        "nominal_qps": best["nominal_qps"],
        "demand_qps": placed["demand_qps"],
        "wasted_units": best["wasted_units"],
        "worst_case": best["worst_case"],
        "worst_ratio": best["worst_ratio"],
        "candidates": placed["candidates"],
        "survives_any_host_loss": best["survives_any_host_loss"],
        # The layout the fleet config gives, with what each model keeps under each host's
        # loss: the figures the numbers pass gives for its headroom.
        "as_configured": _as_configured(placed.get("current")),
    }


def _as_configured(current: dict[str, Any] | None) -> dict[str, Any] | None:
    if not current:
        return None
    return {"layout": current["label"], "survives_any_host_loss": current["survives_any_host_loss"],
            "models_down_with": current["models_down_with"],
            "cases": [{"failure": c["failure"], "model_capacity": c["model_capacity"]} for c in current["cases"]]}


def _placement_markdown(answer: dict[str, Any]) -> list[str]:
    worst = answer["worst_case"]
    loss = "with every host up" if worst == "none" else f"when {worst.replace(':', ' ')} is lost"
    return [
        f"Best of {answer['candidates']} layouts for {answer['hosts']} hosts of {answer['units']} units: "
        f"**{answer['layout']}**.",
        "",
        f"- Capacity with every host up: {answer['nominal_qps']:,.0f} QPS"
        + (" (the config states no demand)." if answer["demand_qps"] is None
           else f" against {answer['demand_qps']:,.0f} QPS of demand."),
        f"- Units left unused: {answer['wasted_units']}.",
        f"- Worst single failure: {loss}, the hardest-hit model keeps {answer['worst_ratio']:.0%} "
        "of its share of demand.",
        "",
        *_as_configured_markdown(answer.get("as_configured")),
    ]


def _as_configured_markdown(current: dict[str, Any] | None) -> list[str]:
    if not current:
        return []
    down = current["models_down_with"]
    if current["survives_any_host_loss"]:
        verdict = "survives the loss of any one host."
    elif down:
        verdict = "; ".join(f"losing {', '.join(h.replace(':', ' ') for h in hosts)} takes {m} down"
                            for m, hosts in down.items()) + "."
    else:
        verdict = "a host's loss leaves a model without its share of demand."
    lines = [f"As configured, **{current['layout']}**: {verdict}", ""]
    for case in current["cases"]:
        where = "every host up" if case["failure"] == "none" else case["failure"].replace(":", " ") + " lost"
        kept = ", ".join(f"{m} {q:,.1f} QPS" for m, q in case["model_capacity"].items())
        lines.append(f"- {where}: {kept}")
    return [*lines, ""]


def _evidence_line(finding: Finding) -> str | None:
    if finding.evidence_run_id is None:
        return None
    measured = _measured(finding)
    if measured is not None:
        return "Evidence: " + measured["text"]
    parts = [f"emulator run {finding.evidence_run_id}"]
    if finding.evidence_t_from_s is not None or finding.evidence_t_to_s is not None:
        start = "start" if finding.evidence_t_from_s is None else f"{finding.evidence_t_from_s:g} s"
        end = "end" if finding.evidence_t_to_s is None else f"{finding.evidence_t_to_s:g} s"
        parts.append(f"{start} to {end}")
    if finding.evidence_metric:
        parts.append(f"metric `{finding.evidence_metric}`")
    if finding.evidence_compare_run_id is not None:
        parts.append(f"compared with emulator run {finding.evidence_compare_run_id}")
    return "Evidence: " + ", ".join(parts) + "."


def _quote_block(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in text.strip().splitlines())


def _finding_markdown(finding: Finding, heading: str) -> list[str]:
    meta = [f"pass: {finding.get_review_pass_display().lower()}", f"by {finding.author.get_username()}"]
    if finding.status != FindingStatus.OPEN:
        meta.append(f"status: {finding.status}")
    if finding.state != FindingState.OPEN:
        state = f"state: {finding.get_state_display().lower()}"
        if finding.fixed_revision is not None:
            state += f" in revision {finding.fixed_revision}"
        meta.append(state + (f" ({finding.state_reason})" if finding.state_reason else ""))
    if finding.trace_hop:
        meta.append(f"hop: {finding.get_trace_hop_display().lower()}")
    lines = [heading, "", "*" + " · ".join(meta) + "*", ""]
    if finding.anchor_exact:
        where = f"revision {finding.revision.number}" if finding.revision_id else "the doc"
        if finding.orphaned:
            where += "; this passage is no longer in the latest revision"
        lines += [_quote_block(finding.anchor_exact), f"> — {where}", ""]
    if finding.body.strip():
        lines += [finding.body.strip(), ""]
    evidence = _evidence_line(finding)
    if evidence:
        lines += [evidence, ""]
    lines += _thread_markdown(finding)
    return lines


def _thread_markdown(finding: Finding) -> list[str]:
    """The finding's published replies, oldest first, each with its author and time."""
    replies = list(finding.replies.all())  # published, in order (see ordered_findings)
    if not replies:
        return []
    lines = [f"Thread ({len(replies)} repl{'y' if len(replies) == 1 else 'ies'}):", ""]
    for reply in replies:
        body = reply.body.strip().splitlines() or [""]
        when = (reply.published_at or reply.created_at).strftime("%Y-%m-%d %H:%M")
        lines.append(f"- **{reply.author.get_username()}** ({when}): {body[0]}")
        lines += [f"  {line}" if line else "" for line in body[1:]]
    return lines + [""]


def _latest_reviews(session: ReviewSession) -> list[Any]:
    """Each reviewer's latest published review, in the order they first published."""
    latest: dict[int, Any] = {}
    for review in session.reviews.select_related("reviewer").order_by("created_at", "id"):
        latest.pop(review.reviewer_id, None)
        latest[review.reviewer_id] = review
    return sorted(latest.values(), key=lambda r: (r.created_at, r.pk))


def _reviews_markdown(session: ReviewSession) -> list[str]:
    """Every published review, oldest first: who, the verdict, what it published and its summary."""
    reviews = list(session.reviews.select_related("reviewer").order_by("created_at", "id"))
    lines = ["## Published reviews", ""]
    if not reviews:
        return lines + ["No review published yet.", ""]
    for review in reviews:
        counts = [f"{review.findings_published} finding{'s' if review.findings_published != 1 else ''}"]
        if review.replies_published:
            counts.append(f"{review.replies_published} repl{'y' if review.replies_published == 1 else 'ies'}")
        lines += [f"### {review.reviewer.get_username()}: {review.get_verdict_display().lower()}", "",
                  f"*published {review.created_at.strftime('%Y-%m-%d %H:%M')} · {', '.join(counts)}*", ""]
        lines += [review.summary.strip(), ""] if review.summary.strip() else ["No summary written.", ""]
    return lines


def _merged_markdown(merged: list[Finding]) -> list[str]:
    """The findings folded into one entry: who raised them, and their own evidence."""
    lines = []
    for other in merged:
        line = f"- Also raised as \"{other.title}\" by {other.author.get_username()} (merged)."
        evidence = _evidence_line(other)
        if evidence:
            line += " " + evidence
        lines.append(line)
    return lines + [""] if lines else []


def _document_part(text: str, empty: str) -> list[str]:
    return [text.strip(), ""] if text.strip() else [empty, ""]


def export_markdown(session: ReviewSession) -> str:
    """The review as a document, in the order a review is given.

    The opening (the verdict and the things to fix now), what the doc gets
    right, the restatement; then the findings, fix now / clarify / mention,
    each with its pass, quote, evidence as measured, status and thread of
    replies; then every published review with its summary, the placement
    answer when the fleet has one, and the figures computed from the fleet
    config. Dropped findings are left out; a finding merged into another is
    listed under it. Restate-pass findings are named in the restatement and
    given once, in full, in the bucket where they rank.
    """
    everything = ordered_findings(session)
    merged_into: dict[int, list[Finding]] = {}
    for f in everything:
        if f.merged_into_id is not None and f.status != FindingStatus.DROPPED:
            merged_into.setdefault(f.merged_into_id, []).append(f)
    ranked = [f for f in everything if not _not_ranked(f)]
    restate = [f for f in ranked if f.review_pass == ReviewPass.RESTATE]
    doc = session.doc
    latest = doc.latest_revision()
    lines = [f"# Review: {session}", ""]
    facts = [f"Doc: {doc.title}" + (f" (revision {latest.number})" if latest else "")]
    if session.fleet_config:
        version = session.fleet_config.latest_version()
        facts.append(
            f"Fleet config: {session.fleet_config.name}" + (f" (version {version.number})" if version else "")
        )
    reviewers = list(dict.fromkeys(
        [session.owner.get_username()] + [u.get_username() for u in session.reviewers.order_by("id")]))
    facts.append("Reviewers: " + ", ".join(reviewers))
    # One verdict per reviewer: the latest they published (every publication is listed below).
    verdicts = [f"{r.reviewer.get_username()}: {r.get_verdict_display().lower()}" for r in _latest_reviews(session)]
    if verdicts:
        facts.append("Verdicts: " + ", ".join(verdicts))
    counts = {s: sum(1 for f in ranked if f.severity == s) for s in Severity}
    facts.append(
        f"Findings: {counts[Severity.FIX_NOW]} to fix now, {counts[Severity.CLARIFY]} to clarify, "
        f"{counts[Severity.MENTION]} to mention."
    )
    lines += [f"- {fact}" for fact in facts] + [""]

    lines += ["## Opening", ""] + _document_part(session.opening, "No opening written yet.")
    lines += ["## What the doc gets right", ""] + _document_part(session.strengths, "No strengths recorded yet.")
    lines += ["## Restatement", ""]
    if session.restatement.strip():
        lines += [session.restatement.strip(), ""]
    else:
        lines += ["No restatement recorded.", ""]
    if restate:
        # Each restate-pass finding is given once, in full, where it ranks.
        lines += ["The restate pass's findings are ranked below with the others: "
                  + "; ".join(f"\"{f.title}\"" for f in restate) + ".", ""]

    rank = 0
    for severity in Severity:
        lines += [f"## {SEVERITY_HEADINGS[severity]}", ""]
        bucket = [f for f in ranked if f.severity == severity]
        if not bucket:
            lines += ["Nothing here.", ""]
        for finding in bucket:
            rank += 1
            lines += _finding_markdown(finding, f"### {rank}. {finding.title}")
            lines += _merged_markdown(merged_into.get(finding.pk, []))

    lines += _reviews_markdown(session)

    answer = placement_answer(session)
    if answer is not None:
        lines += ["## Placement", ""] + _placement_markdown(answer)

    figures = fleet_headline(session)
    if figures and session.fleet_config is not None:
        version = session.fleet_config.latest_version()
        marks = split(version.provenance if version else {}, session.fleet_config.scenario)
        lines += [
            "## Figures from the fleet config",
            "",
            f"Computed from the fleet config {session.fleet_config.name}"
            + (f" (version {version.number})" if version else "")
            + (", from figures the doc states and figures the reviewer assumed:" if marks[ASSUMED]
               else ", from figures the doc states and figures measured:" if marks[FROM_DOC] and marks[MEASURED]
               else ", from figures measured:" if marks[MEASURED]
               else ":" if not marks[FROM_DOC] else ", from figures the doc states:"),
            "",
        ]
        lines += [f"- {f['label']}{'' if f['model'] == 'fleet' else ' (' + f['model'] + ')'}: {f['display']} "
                  f"({f['explain']})" for f in figures] + [""]
        if marks[FROM_DOC]:
            lines += ["From the doc:", ""]
            lines += [f"- `{m['path']}` = {_shown(m['value'])}: \"{m['quote']}\"" for m in marks[FROM_DOC]] + [""]
        if marks[MEASURED]:
            lines += ["Measured:", ""]
            lines += [f"- `{m['path']}` = {_shown(m['value'])}: {m['note']}" for m in marks[MEASURED]] + [""]
        if marks[ASSUMED]:
            lines += ["Assumed by the reviewer (not stated in the doc):", ""]
            lines += [f"- `{m['path']}` = {_shown(m['value'])}" for m in marks[ASSUMED]] + [""]
    return "\n".join(lines).rstrip() + "\n"


def _shown(value: Any) -> str:
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)


def context_document(context_url: str) -> dict[str, Any]:
    """The published JSON-LD @context for our terms."""
    return {"@context": {"review": context_url + "#", **CONTEXT_TERMS}}


def _annotation(finding: Finding, rank: int | None, url: UrlBuilder) -> dict[str, Any]:
    target: dict[str, Any]
    if finding.revision_id:
        source = url(f"/api/docs/{finding.session.doc_id}/revisions/{finding.revision.number}/")
    else:
        source = url(f"/api/docs/{finding.session.doc_id}/")
    target = {"source": source}
    if finding.anchor_exact:
        target["selector"] = [
            {
                "type": "TextQuoteSelector",
                "exact": finding.anchor_exact,
                "prefix": finding.anchor_prefix,
                "suffix": finding.anchor_suffix,
            },
            {"type": "TextPositionSelector", "start": finding.anchor_start, "end": finding.anchor_end},
        ]
    annotation: dict[str, Any] = {
        "id": url(f"/api/findings/{finding.pk}/"),
        "type": "Annotation",
        "motivation": "assessing",
        "created": finding.created_at.isoformat(),
        "modified": finding.updated_at.isoformat(),
        "creator": {"type": "Person", "nickname": finding.author.get_username()},
        "title": finding.title,
        "body": {
            "type": "TextualBody",
            "value": finding.body,
            "format": "text/markdown",
            "purpose": "assessing",
        },
        "target": target,
        "pass": finding.review_pass,
        "severity": finding.severity,
        "position": finding.position,
        "findingStatus": finding.status,
        "orphaned": finding.orphaned,
        "state": finding.state,
    }
    if finding.published_at is not None:
        annotation["published"] = finding.published_at.isoformat()
    if finding.publication_id:
        annotation["verdict"] = finding.publication.verdict
    if finding.state_reason:
        annotation["stateReason"] = finding.state_reason
    if finding.fixed_revision is not None:
        annotation["fixedRevision"] = finding.fixed_revision
    if rank is not None:
        annotation["rank"] = rank
    if finding.revision_id:
        annotation["revision"] = finding.revision.number
    if finding.trace_hop:
        annotation["traceHop"] = finding.trace_hop
    if finding.merged_into_id is not None:
        annotation["mergedInto"] = url(f"/api/findings/{finding.merged_into_id}/")
    duplicates = getattr(finding, "duplicate_ids", [])
    if duplicates:
        annotation["duplicates"] = [url(f"/api/findings/{pk}/") for pk in duplicates]
    if finding.evidence_run_id is not None:
        evidence: dict[str, Any] = {"run": finding.evidence_run_id}
        measured = _measured(finding)
        if measured and not measured.get("missing"):
            evidence["runLabel"] = measured["label"]
            evidence["measured"] = measured["text"]
        if finding.evidence_t_from_s is not None:
            evidence["fromSeconds"] = finding.evidence_t_from_s
        if finding.evidence_t_to_s is not None:
            evidence["toSeconds"] = finding.evidence_t_to_s
        if finding.evidence_metric:
            evidence["metric"] = finding.evidence_metric
        if finding.evidence_compare_run_id is not None:
            evidence["comparedRun"] = finding.evidence_compare_run_id
            compared = (measured or {}).get("compared")
            if compared and not compared.get("missing"):
                evidence["comparedRunLabel"] = compared["label"]
        annotation["evidence"] = evidence
    return annotation


def export_jsonld(session: ReviewSession, url: UrlBuilder) -> dict[str, Any]:
    """The findings as a W3C Web Annotation collection, one Annotation per finding."""
    items = [_annotation(f, rank, url) for f, rank in ranked_findings(session)]
    return {
        "@context": [ANNO_CONTEXT, url("/api/context.jsonld")],
        "id": url(f"/api/sessions/{session.pk}/export.jsonld"),
        "type": "AnnotationCollection",
        "label": str(session),
        "opening": session.opening,
        "strengths": session.strengths,
        "restatement": session.restatement,
        "total": len(items),
        "first": {"type": "AnnotationPage", "startIndex": 0, "items": items},
    }
