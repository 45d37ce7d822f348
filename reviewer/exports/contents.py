"""What every export of a session reads: its published findings in report order with
their ranks, replies and measured evidence, and its fleet's headline figures and
placement answer from the stored analysis."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import Count, Prefetch, Q

from reviewer.fleets.analysis_record import latest_record
from reviewer.models.review import (
    Finding,
    FindingReply,
    FindingStatus,
    ReviewSession,
)
from reviewer.review.duplicates import duplicates_in_session
from reviewer.review.evidence import evidence_details
from reviewer.selectors import findings_in_report_order

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


def measured_evidence(finding: Finding) -> dict[str, Any] | None:
    """The evidence as read from the run (set by ``ordered_findings``)."""
    return getattr(finding, "evidence_detail", None)


def not_ranked(finding: Finding) -> bool:
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
        if not_ranked(finding):
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
