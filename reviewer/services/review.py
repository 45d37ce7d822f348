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
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import QuerySet

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
from reviewer.services.errors import Conflict, Invalid, OverLimit
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
def _clean_provenance(provenance: Any, config: FleetConfig) -> dict[str, dict[str, str]]:
    """The provenance map checked against the config's scenario and its doc's text."""
    from reviewer.markdown import rendered_text
    from reviewer.provenance import ProvenanceError, clean_provenance

    doc_text = None
    if config.doc is not None:
        revision = config.doc.latest_revision()
        source = revision.body if revision else config.doc.body
        # A quote is selected in the rendered doc; one typed from the source counts too.
        doc_text = f"{source}\n{rendered_text(source)}"
    try:
        return clean_provenance(provenance, config.scenario, doc_text, tomllib.loads(config.toml))
    except ProvenanceError as exc:
        raise Invalid(exc.path, exc.message) from None


def _carried(provenance: dict[str, dict[str, str]], scenario: dict[str, Any],
             written: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Marks of the previous version whose keys the new scenario still has."""
    from reviewer.provenance import input_figures

    figures = {**input_figures(written), **input_figures(scenario)}
    return {p: m for p, m in provenance.items()
            if p in figures or any(k.startswith(f"{p}[") or k.startswith(f"{p}.") for k in figures)}


def fleet_config_create(
    *, owner: User, name: str, toml: str, doc: DesignDoc | None = None, provenance: Any = None
) -> FleetConfig:
    """Create a fleet config with its first version; the TOML is validated first, then
    the provenance of its figures (see :mod:`reviewer.provenance`)."""
    config = FleetConfig(owner=owner, name=name, toml=toml, doc=doc)
    config.clean()
    marks = _clean_provenance(provenance, config) if provenance is not None else {}
    config.save()
    FleetConfigVersion.objects.create(config=config, number=1, toml=config.toml, author=owner, provenance=marks)
    return config


@transaction.atomic
def fleet_config_save(
    *,
    config: FleetConfig,
    author: User | None,
    name: str | None = None,
    toml: str | None = None,
    doc: DesignDoc | None | Unchanged = UNCHANGED,
    provenance: Any = None,
) -> FleetConfig:
    """Change a fleet config; a changed scenario, or changed provenance of its
    figures, becomes a new version.

    ``doc=UNCHANGED`` (the default) leaves the link as it is; ``None`` removes it.
    ``provenance=None`` keeps the marks of the figures the new scenario still has.
    """
    config = FleetConfig.objects.select_for_update().get(pk=config.pk)
    if name is not None:
        config.name = name
    if doc is not UNCHANGED:
        config.doc = doc
    latest = config.latest_version()
    if toml is not None:
        config.toml = toml
    config.clean()
    if provenance is not None:
        marks = _clean_provenance(provenance, config)
    else:
        marks = _carried(latest.provenance if latest else {}, config.scenario, tomllib.loads(config.toml))
    new_version = latest is None or config.toml != latest.toml or marks != latest.provenance
    config.save()
    if new_version:
        number = (latest.number if latest else 0) + 1
        FleetConfigVersion.objects.create(config=config, number=number, toml=config.toml, author=author,
                                          provenance=marks)
    return config


# --- docs ------------------------------------------------------------------


@dataclass
class ReviseResult:
    """What a doc revision did to the findings anchored on the doc."""

    revision: DocRevision
    moved: list[Finding] = field(default_factory=list)
    orphaned: list[Finding] = field(default_factory=list)


# Findings re-anchored per transaction when a doc is revised: a doc with
# thousands of findings must not hold the database's write lock for long.
REANCHOR_BATCH = 200


def check_doc_body(body: str) -> None:
    """Refuse a body longer than DOC_BODY_MAX_CHARS."""
    limit = settings.DOC_BODY_MAX_CHARS
    if len(body) > limit:
        raise Invalid("body", f"body: {len(body):,} characters is over the {limit:,} a doc may hold "
                              "(DOC_BODY_MAX_CHARS); split the doc")


@transaction.atomic
def doc_create(*, owner: User, title: str, body: str = "") -> DesignDoc:
    """Create a doc and its first revision."""
    check_doc_body(body)
    doc = DesignDoc.objects.create(owner=owner, title=title, body=body)
    DocRevision.objects.create(doc=doc, number=1, title=title, body=body, author=owner)
    return doc


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

    The revision is saved in one transaction; the findings move in later ones
    of ``REANCHOR_BATCH`` each, so other writers wait for one batch at most. A
    finding is always anchored on the revision it names, so a reader between
    batches sees each finding whole; a newer revision saved meanwhile takes
    over the findings not yet moved.
    """
    saved = _save_revision(doc=doc, author=author, title=title, body=body, base_revision=base_revision)
    if isinstance(saved, ReviseResult):
        return saved
    revision, previous = saved
    result = ReviseResult(revision=revision)
    if previous is None or revision.body == previous.body:
        _move_unchanged(revision, result)
    else:
        _reanchor(revision, result)
    return result


@transaction.atomic
def _save_revision(
    *, doc: DesignDoc, author: User | None, title: str | None, body: str | None, base_revision: int | None
) -> ReviseResult | tuple[DocRevision, DocRevision | None]:
    """The new revision and the one before it; a ReviseResult when nothing changed."""
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
    check_doc_body(new_body)
    if doc.revisions.count() >= settings.DOC_REVISIONS_MAX:
        raise OverLimit("DOC_REVISIONS_MAX", f"the doc has {settings.DOC_REVISIONS_MAX} revisions, the most a doc "
                                             "keeps (DOC_REVISIONS_MAX); start a new doc")
    doc.title, doc.body = new_title, new_body
    doc.save()
    revision = DocRevision.objects.create(
        doc=doc, number=latest_number + 1, title=new_title, body=new_body, author=author
    )
    return revision, latest


def _batches(ids: list[int]) -> Iterator[list[int]]:
    for start in range(0, len(ids), REANCHOR_BATCH):
        yield ids[start:start + REANCHOR_BATCH]


def _superseded(revision: DocRevision) -> bool:
    """A newer revision was saved: it moves the findings from here on."""
    return DocRevision.objects.filter(doc_id=revision.doc_id, number__gt=revision.number).exists()


def _older_open_findings(revision: DocRevision) -> QuerySet[Finding]:
    return Finding.objects.filter(
        session__doc_id=revision.doc_id, status=FindingStatus.OPEN, revision__number__lt=revision.number
    )


def _reanchor(revision: DocRevision, result: ReviseResult) -> None:
    """Place each open finding's quote in the new text, a batch at a time.

    The search (the slow part) runs outside any transaction; each batch's
    writes then take one short transaction, skipping a finding changed
    meanwhile (its next revision moves it).
    """
    ids = list(_older_open_findings(revision).exclude(anchor_exact="").order_by("pk").values_list("pk", flat=True))
    for batch in _batches(ids):
        if _superseded(revision):
            return
        findings = list(_older_open_findings(revision).filter(pk__in=batch).select_related("revision"))
        placements = [(finding, _placement(finding, revision)) for finding in findings]
        with transaction.atomic():
            if _superseded(revision):
                return
            current = dict(Finding.objects.select_for_update().filter(pk__in=batch).values_list("pk", "version"))
            for finding, placed in placements:
                if current.get(finding.pk) == finding.version:
                    _apply_placement(finding, revision, placed, result)


def _placement(finding: Finding, revision: DocRevision) -> Any:
    """Where the finding's quote is in the new revision's text, or None."""
    # The query keeps only findings made on a revision.
    assert finding.revision is not None, f"finding {finding.pk} has no revision"
    anchor = Anchor(
        exact=finding.anchor_exact,
        prefix=finding.anchor_prefix,
        suffix=finding.anchor_suffix,
        start=finding.anchor_start or 0,
        end=finding.anchor_end or 0,
    )
    return reanchor(anchor, finding.revision.body, revision.body)


def _apply_placement(finding: Finding, revision: DocRevision, placed: Any, result: ReviseResult) -> None:
    if placed is None:
        if not finding.orphaned:
            finding.orphaned = True
            finding.version += 1
            finding.save(update_fields=["orphaned", "version", "updated_at"])
            publish_finding(finding, "finding.updated")
        result.orphaned.append(finding)
        return
    set_anchor(finding, revision, placed.anchor)
    finding.orphaned = False
    finding.version += 1
    finding.save()
    publish_finding(finding, "finding.updated")
    result.moved.append(finding)


def _move_unchanged(revision: DocRevision, result: ReviseResult) -> None:
    """Only the title changed: open, placed findings move without searching, a batch at a time."""
    ids = list(_older_open_findings(revision).filter(orphaned=False).order_by("pk").values_list("pk", flat=True))
    for batch in _batches(ids):
        with transaction.atomic():
            if _superseded(revision):
                return
            for finding in _older_open_findings(revision).select_for_update().filter(pk__in=batch):
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
