"""The session's findings as CSV, one row per finding, safe to open in a spreadsheet."""

from __future__ import annotations

import csv
import io
from typing import Any

from reviewer.exports.contents import (
    UrlBuilder,
    measured_evidence,
    ranked_findings,
)
from reviewer.models.review import ReviewSession
from reviewer.representations import finding_representation

CSV_COLUMNS = [
    "id", "rank", "pass", "severity", "position", "status", "title", "body", "author",
    "anchor_exact", "anchor_prefix", "anchor_suffix", "anchor_start", "anchor_end", "revision",
    "orphaned", "trace_hop", "evidence_run_id", "evidence_t_from_s", "evidence_t_to_s",
    "evidence_metric", "evidence_compare_run_id", "created_at", "updated_at", "version",
    "merged_into", "duplicates", "evidence_measured",
    "draft", "published_at", "verdict", "state", "state_reason", "fixed_revision",
]


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
        measured = measured_evidence(finding)
        data["evidence_measured"] = measured["text"] if measured else None
        data["duplicates"] = " ".join(str(i) for i in data.get("duplicates") or []) or None
        row = {name: data.get(name) for name in CSV_COLUMNS}
        writer.writerow({k: csv_cell(v) for k, v in row.items()})
    return out.getvalue()


def render(session: ReviewSession, url: UrlBuilder) -> str:
    """The CSV export's text."""
    return export_csv(session)
