"""The session's findings, with replies, evidence and the fleet's figures, as JSON."""

from __future__ import annotations

import json
from typing import Any

from django.utils import timezone

from reviewer.exports.contents import (
    UrlBuilder,
    fleet_headline,
    measured_evidence,
    placement_answer,
    ranked_findings,
)
from reviewer.fleets.provenance import split
from reviewer.models.review import ReviewSession
from reviewer.representations import (
    finding_representation,
    reply_representations,
    review_document_representation,
    review_representation,
    session_representation,
)


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
        data["evidence"] = measured_evidence(finding)
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


def render(session: ReviewSession, url: UrlBuilder) -> str:
    """The JSON export's text."""
    return json.dumps(export_json(session), indent=2, ensure_ascii=False)
