"""The review report in Markdown: the restatement, the numbers headline and the
placement answer, then the findings by bucket with their evidence and threads."""

from __future__ import annotations

from typing import Any

from reviewer.exports.contents import (
    UrlBuilder,
    fleet_headline,
    measured_evidence,
    not_ranked,
    ordered_findings,
    placement_answer,
)
from reviewer.fleets.provenance import ASSUMED, FROM_DOC, MEASURED, split
from reviewer.models.collaboration import FindingState
from reviewer.models.review import (
    Finding,
    FindingStatus,
    ReviewPass,
    ReviewSession,
    Severity,
)

SEVERITY_HEADINGS = {Severity.FIX_NOW: "Fix now", Severity.CLARIFY: "Clarify", Severity.MENTION: "Mention"}


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
    measured = measured_evidence(finding)
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
    ranked = [f for f in everything if not not_ranked(f)]
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


def render(session: ReviewSession, url: UrlBuilder) -> str:
    """The Markdown report's text."""
    return export_markdown(session)
