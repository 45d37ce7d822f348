"""The findings as W3C Web Annotations (one per finding, motivation "assessing"), and
the JSON-LD context of our terms they use."""

from __future__ import annotations

import json
from typing import Any

from reviewer.exports.contents import (
    UrlBuilder,
    measured_evidence,
    ranked_findings,
)
from reviewer.models.review import (
    Finding,
    ReviewSession,
)

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
        measured = measured_evidence(finding)
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


def render(session: ReviewSession, url: UrlBuilder) -> str:
    """The Web Annotations export's text."""
    return json.dumps(export_jsonld(session, url), indent=2, ensure_ascii=False)
