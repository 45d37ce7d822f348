"""Review workflows: docs, fleet configs, sessions and findings.

Docs, fleet configs and sessions are here; findings live in
:mod:`reviewer.services.findings` and are re-exported, so callers use this
module for all of them. Plain functions with keyword-only arguments, shared by the REST API, the admin,
the pages and the management commands. Writes are atomic; live events for a
session's viewers go out through :func:`reviewer.realtime.session_event` once
the transaction commits.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from django.contrib.auth.models import User
from django.db import transaction

from reviewer import realtime
from reviewer.anchoring import Anchor, reanchor
from reviewer.fleet_toml import scenario_dict_to_toml, validate_scenario_toml
from reviewer.models.review import (
    DesignDoc,
    DocRevision,
    Finding,
    FindingStatus,
    FleetConfig,
    FleetConfigVersion,
    ReviewPass,
    ReviewSession,
)
from reviewer.models.runs import FINAL_STATUSES, EmulatorRun
from reviewer.services.errors import Conflict
from reviewer.services.findings import (
    finding_create,
    finding_delete,
    finding_update,
    findings_reorder,
    publish_finding,
    reply_create,
    resolve_anchor,
    set_anchor,
)

# --- fleet configs ---------------------------------------------------------


class Unchanged(enum.Enum):
    """Type of :data:`UNCHANGED`, for arguments where ``None`` already means "clear"."""

    UNCHANGED = "unchanged"


#: Default of optional links in the update services: leave the stored value as it is.
UNCHANGED: Final = Unchanged.UNCHANGED


@transaction.atomic
def fleet_config_create(
    *, owner: User, name: str, toml: str, doc: DesignDoc | None = None
) -> FleetConfig:
    """Create a fleet config with its first version; the TOML is validated first."""
    config = FleetConfig(owner=owner, name=name, toml=toml, doc=doc)
    config.save()
    FleetConfigVersion.objects.create(config=config, number=1, toml=config.toml, author=owner)
    return config


@transaction.atomic
def fleet_config_save(
    *,
    config: FleetConfig,
    author: User | None,
    name: str | None = None,
    toml: str | None = None,
    doc: DesignDoc | None | Unchanged = UNCHANGED,
) -> FleetConfig:
    """Change a fleet config; a changed scenario becomes a new version.

    ``doc=UNCHANGED`` (the default) leaves the link as it is; ``None`` removes it.
    """
    config = FleetConfig.objects.select_for_update().get(pk=config.pk)
    if name is not None:
        config.name = name
    if doc is not UNCHANGED:
        config.doc = doc
    latest = config.latest_version()
    new_version = toml is not None and (latest is None or toml != latest.toml)
    if toml is not None:
        config.toml = toml
    config.save()
    if new_version:
        number = (latest.number if latest else 0) + 1
        FleetConfigVersion.objects.create(config=config, number=number, toml=config.toml, author=author)
    return config


# --- docs ------------------------------------------------------------------


@dataclass
class ReviseResult:
    """What a doc revision did to the findings anchored on the doc."""

    revision: DocRevision
    moved: list[Finding] = field(default_factory=list)
    orphaned: list[Finding] = field(default_factory=list)


@transaction.atomic
def doc_create(*, owner: User, title: str, body: str = "") -> DesignDoc:
    """Create a doc and its first revision."""
    doc = DesignDoc.objects.create(owner=owner, title=title, body=body)
    DocRevision.objects.create(doc=doc, number=1, title=title, body=body, author=owner)
    return doc


@transaction.atomic
def doc_revise(
    *,
    doc: DesignDoc,
    author: User | None,
    title: str | None = None,
    body: str | None = None,
    base_revision: int | None = None,
) -> ReviseResult:
    """Save a new revision of ``doc`` and move its open findings onto it.

    ``base_revision`` is the revision number the editor started from; when a
    newer one exists the edit is refused with :class:`Conflict`. Findings that
    cannot be placed in the new text are marked orphaned (and keep their
    anchor on the revision they were made on).
    """
    doc = DesignDoc.objects.select_for_update().get(pk=doc.pk)
    latest = doc.latest_revision()
    latest_number = latest.number if latest else 0
    if base_revision is not None and base_revision != latest_number:
        raise Conflict(
            f"The doc was revised meanwhile (revision {latest_number}, you edited {base_revision}).",
            current=latest_number,
        )
    new_title = doc.title if title is None else title
    new_body = doc.body if body is None else body
    if latest is not None and new_title == latest.title and new_body == latest.body:
        return ReviseResult(revision=latest)
    doc.title, doc.body = new_title, new_body
    doc.save()
    revision = DocRevision.objects.create(
        doc=doc, number=latest_number + 1, title=new_title, body=new_body, author=author
    )
    result = ReviseResult(revision=revision)
    if latest is None or new_body == latest.body:
        _move_unchanged(doc, revision, result)
        return result
    findings = (
        Finding.objects.select_for_update()
        .filter(session__doc=doc, status=FindingStatus.OPEN, revision__isnull=False)
        .exclude(anchor_exact="")
        .select_related("revision")
    )
    for finding in findings:
        # The query keeps only findings made on a revision.
        assert finding.revision is not None, f"finding {finding.pk} has no revision"
        old_text = finding.revision.body
        anchor = Anchor(
            exact=finding.anchor_exact,
            prefix=finding.anchor_prefix,
            suffix=finding.anchor_suffix,
            start=finding.anchor_start or 0,
            end=finding.anchor_end or 0,
        )
        placed = reanchor(anchor, old_text, new_body)
        if placed is None:
            if not finding.orphaned:
                finding.orphaned = True
                finding.version += 1
                finding.save(update_fields=["orphaned", "version", "updated_at"])
                publish_finding(finding, "finding.updated")
            result.orphaned.append(finding)
            continue
        set_anchor(finding, revision, placed.anchor)
        finding.orphaned = False
        finding.version += 1
        finding.save()
        publish_finding(finding, "finding.updated")
        result.moved.append(finding)
    return result


def _move_unchanged(doc: DesignDoc, revision: DocRevision, result: ReviseResult) -> None:
    """Only the title changed: open, placed findings move without searching."""
    findings = Finding.objects.filter(
        session__doc=doc, status=FindingStatus.OPEN, orphaned=False, revision__isnull=False
    )
    for finding in findings:
        finding.revision = revision
        finding.version += 1
        finding.save(update_fields=["revision", "version", "updated_at"])
        publish_finding(finding, "finding.updated")
        result.moved.append(finding)


# --- sessions --------------------------------------------------------------


@transaction.atomic
def session_create(
    *,
    owner: User,
    doc: DesignDoc,
    fleet_config: FleetConfig | None = None,
    title: str = "",
    reviewers: Iterable[User] = (),
) -> ReviewSession:
    """Open a review session on ``doc`` owned by ``owner``."""
    session = ReviewSession.objects.create(owner=owner, doc=doc, fleet_config=fleet_config, title=title)
    session.reviewers.set([r for r in reviewers if r.pk != owner.pk])
    return session


@transaction.atomic
def session_update(
    *,
    session: ReviewSession,
    title: str | None = None,
    fleet_config: FleetConfig | None | Unchanged = UNCHANGED,
    current_pass: str | None = None,
    status: str | None = None,
    reviewers: Iterable[User] | None = None,
) -> ReviewSession:
    """Change a session's settings; a pass change is announced to its viewers."""
    pass_changed = current_pass is not None and current_pass != session.current_pass
    if title is not None:
        session.title = title
    if fleet_config is not UNCHANGED:
        session.fleet_config = fleet_config
    if current_pass is not None:
        session.current_pass = current_pass
    if status is not None:
        session.status = status
    session.save()
    if reviewers is not None:
        before = set(session.reviewers.values_list("pk", flat=True))
        session.reviewers.set([r for r in reviewers if r.pk != session.owner_id])
        reviewers_removed(session=session, user_ids=before - set(session.reviewers.values_list("pk", flat=True)))
    if pass_changed:
        realtime.session_event(session.pk, "pass.changed", {"pass": session.current_pass})
    return session


def reviewers_removed(*, session: ReviewSession, user_ids: set[int]) -> None:
    """Cut the live feeds of reviewers just removed from ``session`` (its own and its runs')."""
    if not user_ids:
        return
    run_ids = list(
        EmulatorRun.objects.filter(session=session).exclude(status__in=FINAL_STATUSES).values_list("pk", flat=True)
    )
    realtime.access_withdrawn(session.pk, user_ids, run_ids)


__all__ = [
    "Conflict",
    "ReviewPass",
    "ReviseResult",
    "UNCHANGED",
    "Unchanged",
    "doc_create",
    "doc_revise",
    "finding_create",
    "finding_delete",
    "finding_update",
    "findings_reorder",
    "fleet_config_create",
    "fleet_config_save",
    "publish_finding",
    "reply_create",
    "resolve_anchor",
    "reviewers_removed",
    "scenario_dict_to_toml",
    "session_create",
    "session_update",
    "validate_scenario_toml",
]
