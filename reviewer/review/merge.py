"""Merging a near-duplicate finding into another one.

The merged finding is kept, marked ``merged_into`` the surviving one, with its
own text and evidence; its replies move under the surviving finding (each
remembering where it came from, ``merged_from``), so both threads read as one.
The surviving finding takes the merged one's evidence when it has none.
"""

from __future__ import annotations

from django.db import transaction

from reviewer.errors import Conflict, Invalid
from reviewer.models.review import Finding, FindingReply
from reviewer.review.findings import publish_finding

EVIDENCE_FIELDS = (
    "evidence_run_id", "evidence_t_from_s", "evidence_t_to_s", "evidence_metric", "evidence_compare_run_id",
)


@transaction.atomic
def finding_merge(*, finding: Finding, into: Finding, version: int | None = None) -> Finding:
    """Merge ``finding`` into ``into``; returns the surviving finding.

    With ``version``, refuse (:class:`Conflict`) unless it is still ``finding``'s version.
    """
    if finding.pk == into.pk:
        raise Invalid("into", "into: a finding cannot be merged into itself; name another finding.")
    # Both rows locked in id order, so two opposite merges cannot deadlock.
    rows = {f.pk: f for f in Finding.objects.select_for_update().filter(pk__in=[finding.pk, into.pk]).order_by("pk")}
    finding, into = rows[finding.pk], rows[into.pk]
    if finding.session_id != into.session_id:
        raise Invalid("into", "into: name a finding of the same session.")
    if finding.published_at is None or into.published_at is None:
        raise Invalid("into", "into: only published findings are merged; publish the draft first.")
    if version is not None and version != finding.version:
        raise Conflict(
            f"The finding was changed meanwhile (version {finding.version}, you sent {version}).",
            current=finding.version,
        )
    if finding.merged_into_id is not None:
        raise Conflict(f"The finding is already merged into finding {finding.merged_into_id}.")
    if into.merged_into_id is not None:
        raise Invalid("into", f"into: finding {into.pk} is itself merged into finding {into.merged_into_id}; "
                              "merge into that one.")
    FindingReply.objects.filter(finding=finding).update(finding=into, merged_from=finding)
    # Findings merged earlier into this one follow it to the survivor.
    for earlier in Finding.objects.select_for_update().filter(merged_into=finding):
        earlier.merged_into = into
        earlier.version += 1
        earlier.save(update_fields=["merged_into", "version", "updated_at"])
        publish_finding(earlier, "finding.updated")
    if into.evidence_run_id is None and finding.evidence_run_id is not None:
        for name in EVIDENCE_FIELDS:
            setattr(into, name, getattr(finding, name))
    finding.merged_into = into
    finding.version += 1
    finding.save(update_fields=["merged_into", "version", "updated_at"])
    into.version += 1
    into.save()
    publish_finding(finding, "finding.updated")
    publish_finding(into, "finding.updated")
    return into
