"""Review workflows: docs, fleet configs, sessions and findings.

Docs, fleet configs and sessions are here; findings live in
:mod:`reviewer.review.findings` and are re-exported, so callers use this
module for all of them. Plain functions with keyword-only arguments, shared by the REST API, the admin,
the pages and the management commands. Writes are atomic; live events for a
session's viewers go out through :func:`reviewer.realtime.groups.session_event` once
the transaction commits.

Kept as one module: a doc's revision and the re-anchoring of its findings onto it are
one workflow (the revision is saved, then its findings move in leased batches that the
watchdog resumes); the fleet config and session workflows beside it are short.
"""

from __future__ import annotations

import enum
import logging
import time
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Count, F, Q, QuerySet
from django.utils import timezone

from reviewer import permissions, selectors
from reviewer.errors import Conflict, Forbidden, Invalid, OverLimit
from reviewer.fleets.provenance import ProvenanceError, clean_provenance, input_figures
from reviewer.fleets.scenario_toml import scenario_dict_to_toml, validate_scenario_toml
from reviewer.fleets.toml_edit import TomlEditError, set_key
from reviewer.models.review import (
    DesignDoc,
    DocRevision,
    Finding,
    FindingStatus,
    FleetConfig,
    FleetConfigVersion,
    ReanchorStatus,
    ReviewPass,
    ReviewSession,
)
from reviewer.models.runs import FINAL_STATUSES, EmulatorRun
from reviewer.realtime import groups as realtime
from reviewer.representations import FindingSerializer
from reviewer.review.findings import (
    finding_create,
    finding_delete,
    finding_update,
    findings_reorder,
    publish_finding,
    reply_create,
    resolve_anchor,
    set_anchor,
)
from reviewer.runs import broker
from reviewer.text.anchoring import Anchor, reanchor
from reviewer.text.markdown import rendered_text

log = logging.getLogger(__name__)

# --- fleet configs ---------------------------------------------------------


class Unchanged(enum.Enum):
    """Type of :data:`UNCHANGED`, for arguments where ``None`` already means "clear"."""

    UNCHANGED = "unchanged"


#: Default of optional links in the update services: leave the stored value as it is.
UNCHANGED: Final = Unchanged.UNCHANGED


@transaction.atomic
def _clean_provenance(provenance: Any, config: FleetConfig) -> dict[str, dict[str, str]]:
    """The provenance map checked against the config's scenario and its doc's text."""

    doc_text = None
    # Quotes are checked against the doc only while the config's owner may see
    # it: else the check would answer whether a text is in a doc they lost.
    doc = selectors.linked_doc(config, config.owner)
    if doc is not None:
        revision = doc.latest_revision()
        source = revision.body if revision else doc.body
        # A quote is selected in the rendered doc; one typed from the source counts too.
        doc_text = f"{source}\n{rendered_text(source)}"
    try:
        return clean_provenance(provenance, config.scenario, doc_text, tomllib.loads(config.toml))
    except ProvenanceError as exc:
        raise Invalid(exc.path, exc.message) from None


def _carried(provenance: dict[str, dict[str, str]], scenario: dict[str, Any],
             written: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Marks of the previous version whose keys the new scenario still has."""

    figures = {**input_figures(written), **input_figures(scenario)}
    return {p: m for p, m in provenance.items()
            if p in figures or any(k.startswith(f"{p}[") or k.startswith(f"{p}.") for k in figures)}


def check_fleet_versions_quota(owner: User) -> None:
    """Refuse a new fleet config version that would take ``owner``'s versions over
    USER_FLEET_VERSIONS_MAX (all their configs' versions together)."""
    limit = settings.USER_FLEET_VERSIONS_MAX
    used = FleetConfigVersion.objects.filter(config__owner=owner).count()
    if used >= limit:
        raise OverLimit(
            "USER_FLEET_VERSIONS_MAX",
            f"your fleet configs hold {used:,} versions, the most one user may keep "
            f"({limit:,}, USER_FLEET_VERSIONS_MAX); delete fleet configs you no longer need "
            "(their versions go with them) or ask for a higher limit",
        )


@transaction.atomic
def fleet_config_create(
    *, owner: User, name: str, toml: str, doc: DesignDoc | None = None, provenance: Any = None
) -> FleetConfig:
    """Create a fleet config with its first version; the TOML is validated first, then
    the provenance of its figures (see :mod:`reviewer.fleets.provenance`)."""
    config = FleetConfig(owner=owner, name=name, toml=toml, doc=doc)
    config.clean()
    marks = _clean_provenance(provenance, config) if provenance is not None else {}
    check_fleet_versions_quota(owner)
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
    if new_version:
        check_fleet_versions_quota(config.owner)
    config.save()
    if new_version:
        number = (latest.number if latest else 0) + 1
        FleetConfigVersion.objects.create(config=config, number=number, toml=config.toml, author=author,
                                          provenance=marks)
    return config


def fleet_config_accept_figure(*, config: FleetConfig, author: User | None, key: str, value: Any,
                               quote: str) -> FleetConfig:
    """Write a figure the doc states into the fleet config: ``key`` set to ``value`` in
    its TOML (comments kept) and marked "from the doc" with ``quote``, the doc's words,
    as a new version. Refused, naming the key, when the key cannot be written or the
    emulator refuses the value."""

    if not isinstance(value, int | float | str | bool):
        raise Invalid("value", f"value: {key} takes a number or a name; give the figure's value")
    try:
        toml = set_key(config.toml, key, value)
    except TomlEditError as exc:
        raise Invalid("key", str(exc)) from None
    latest = config.latest_version()
    marks = {**(latest.provenance if latest else {}), key: {"source": "doc", "quote": quote}}
    return fleet_config_save(config=config, author=author, toml=toml, provenance=marks)


# --- docs ------------------------------------------------------------------


@dataclass
class ReviseResult:
    """What a doc revision did to the findings anchored on the doc.

    ``pending``: the findings are being moved in the background; ``moved``
    and ``orphaned`` are then empty, and the revision's ``reanchor_status``
    says when it is done.
    """

    revision: DocRevision
    moved: list[Finding] = field(default_factory=list)
    orphaned: list[Finding] = field(default_factory=list)
    pending: bool = False


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

    The revision is saved in one transaction. Moving the findings (searching
    each quote in the new text) is :func:`reanchor_revision`: with
    ``REANCHOR_IN_BACKGROUND`` it runs in a Celery worker once the revision is
    committed, and the result comes back with ``pending`` set (the revision's
    ``reanchor_status`` says when it is done); otherwise, or with
    ``CELERY_TASK_ALWAYS_EAGER``, it runs here before returning.
    """
    saved = _save_revision(doc=doc, author=author, title=title, body=body, base_revision=base_revision)
    if isinstance(saved, ReviseResult):
        return saved
    revision = saved
    if revision.reanchor_status != ReanchorStatus.PENDING:
        return ReviseResult(revision=revision)
    if reanchor_in_background():
        _send_reanchor_task(revision.pk)
        return ReviseResult(revision=revision, pending=True)
    return reanchor_revision(revision_id=revision.pk)


def reanchor_in_background() -> bool:
    """Whether revisions are re-anchored by a Celery task (not in the caller's process)."""
    return bool(settings.REANCHOR_IN_BACKGROUND) and not getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False)


def _send_reanchor_task(revision_id: int) -> None:
    """Hand the re-anchoring to a worker once the current transaction commits, off the request path.

    Each hand-over takes the next dispatch number and starts the lease afresh:
    a copy sent earlier (still queued, or redelivered) finds its number behind
    and returns at once, and a live copy superseded so stops at its next beat.
    """
    with transaction.atomic():
        DocRevision.objects.filter(pk=revision_id).update(
            reanchor_dispatch=F("reanchor_dispatch") + 1, reanchor_beat_at=timezone.now())
        dispatch = DocRevision.objects.values_list("reanchor_dispatch", flat=True).get(pk=revision_id)
    # The revision stays pending meanwhile.
    broker.send_task_after_commit("reanchor_revision", [revision_id, dispatch],
                                  f"the re-anchoring of revision {revision_id}", "reanchors_resume")


# How often a working re-anchoring task renews its lease (the watchdog allows
# REANCHOR_STALLED_AFTER_S without one before it hands the task over again).
REANCHOR_HEARTBEAT_S = 5.0


class ReanchorLeaseLost(Exception):
    """The re-anchoring was handed to a worker again: this copy of the task stops."""


class ReanchorSliceOver(Exception):
    """The task used its time slice: the rest goes to the back of the docs queue."""


class _Lease:
    """A re-anchoring task's hold on its revision: dispatch number ``dispatch`` (None: any)."""

    def __init__(self, revision_id: int, dispatch: int | None) -> None:
        self.revision_id = revision_id
        self.dispatch = dispatch
        self.beaten_at = 0.0
        self.started_at = time.monotonic()

    def next_batch(self, first: bool) -> None:
        """Before each batch but the first: raise ReanchorSliceOver once REANCHOR_SLICE_S is spent."""

        if not first and time.monotonic() - self.started_at >= settings.REANCHOR_SLICE_S:
            raise ReanchorSliceOver(self.revision_id)

    def beat(self, *, force: bool = False) -> None:
        """Renew the lease (at most every REANCHOR_HEARTBEAT_S); raise ReanchorLeaseLost if it is lost."""

        now = time.monotonic()
        if not force and now - self.beaten_at < REANCHOR_HEARTBEAT_S:
            return
        rows = DocRevision.objects.filter(pk=self.revision_id, reanchor_status=ReanchorStatus.PENDING)
        if self.dispatch is not None:
            rows = rows.filter(reanchor_dispatch=self.dispatch)
        if not rows.update(reanchor_beat_at=timezone.now()):
            raise ReanchorLeaseLost(f"revision {self.revision_id}: dispatch {self.dispatch} is no longer the live one")
        self.beaten_at = now


def reanchor_revision(*, revision_id: int, dispatch: int | None = None) -> ReviseResult:
    """Move the doc's open findings onto revision ``revision_id``; idempotent.

    Findings already on it (an earlier attempt moved them) are left alone, so
    a task retried after its worker died carries on where it stopped. Progress
    is stored on the revision and published to the doc's sessions after each
    batch; a newer revision saved meanwhile takes the rest over.

    ``dispatch`` is the hand-over number the task was sent with: a copy whose
    number is not the revision's latest returns at once, and the live copy
    renews its lease as it works, so the watchdog leaves it alone.
    """
    revision = DocRevision.objects.get(pk=revision_id)
    result = ReviseResult(revision=revision)
    if revision.reanchor_status != ReanchorStatus.PENDING:
        return result
    if dispatch is not None and dispatch != revision.reanchor_dispatch:
        log.info("re-anchoring of revision %s: copy %s is stale (latest %s); skipped",
                 revision_id, dispatch, revision.reanchor_dispatch)
        return result
    lease = _Lease(revision_id, dispatch)
    previous = DocRevision.objects.filter(doc_id=revision.doc_id, number__lt=revision.number).order_by(
        "-number").first()
    try:
        lease.beat(force=True)
        if previous is None or revision.body == previous.body:
            _move_unchanged(revision, result, lease)
        else:
            _reanchor(revision, result, lease)
    except ReanchorLeaseLost:
        log.info("re-anchoring of revision %s: handed to a worker again meanwhile; copy %s stops",
                 revision_id, dispatch)
        return result
    except ReanchorSliceOver:
        if dispatch is None:  # run in the caller's process, not from the queue: carry on here
            return reanchor_revision(revision_id=revision_id)
        # Fair share of the docs worker: the rest waits behind the jobs queued meanwhile.
        _send_reanchor_task(revision_id)
        return result
    status = ReanchorStatus.SUPERSEDED if _superseded(revision) else ReanchorStatus.DONE
    with transaction.atomic():
        DocRevision.objects.filter(pk=revision.pk, reanchor_status=ReanchorStatus.PENDING).update(
            reanchor_status=status, reanchor_beat_at=timezone.now())
        revision.refresh_from_db()
        _publish_reanchoring(revision)
    return result


def _progress(revision: DocRevision, done: int) -> None:
    """Record (inside the batch's transaction) and publish how many findings were handled."""
    DocRevision.objects.filter(pk=revision.pk).update(reanchor_done=done, reanchor_beat_at=timezone.now())
    revision.reanchor_done = done
    _publish_reanchoring(revision)


def _publish_reanchoring(revision: DocRevision) -> None:
    if not reanchor_in_background():
        return  # the edit waits for the findings to move, and its answer says so
    data = {"doc": revision.doc_id, "revision": revision.number, **reanchoring_representation(revision)}
    for session_id in ReviewSession.objects.filter(doc_id=revision.doc_id).values_list("pk", flat=True):
        realtime.session_event(session_id, "doc.reanchoring", data)


def reanchoring_representation(revision: DocRevision | None) -> dict[str, Any]:
    """How far moving the findings onto ``revision`` got: status, done, total."""
    if revision is None:
        return {"status": ReanchorStatus.DONE.value, "done": 0, "total": 0}
    return {"status": revision.reanchor_status, "done": revision.reanchor_done, "total": revision.reanchor_total}


# A revision pending this long without progress lost its task: it is handed over again.
REANCHOR_STALLED_AFTER_S = 60.0


def reanchors_resume(*, stalled_after_s: float = REANCHOR_STALLED_AFTER_S) -> list[int]:
    """Hand re-anchorings that made no progress for ``stalled_after_s`` to a worker again; their ids.

    The task is idempotent, so one that was only slow and runs twice moves
    nothing twice. Called by the workers' watchdog and the beat.
    """
    if not reanchor_in_background():
        return []
    cutoff = timezone.now() - timedelta(seconds=stalled_after_s)
    stalled = list(DocRevision.objects.filter(reanchor_status=ReanchorStatus.PENDING).filter(
        Q(reanchor_beat_at__lt=cutoff) | Q(reanchor_beat_at__isnull=True, created_at__lt=cutoff)
    ).values_list("pk", flat=True))
    for revision_id in stalled:
        _send_reanchor_task(revision_id)  # a new dispatch number: the lost copy, should it wake, stops
    if stalled:
        log.warning("re-anchoring of revisions %s made no progress; handed to a worker again", stalled)
    return stalled


@transaction.atomic
def _save_revision(
    *, doc: DesignDoc, author: User | None, title: str | None, body: str | None, base_revision: int | None
) -> ReviseResult | DocRevision:
    """The new revision (pending re-anchoring when findings must move); a ReviseResult when nothing changed."""
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
    revision = DocRevision(doc=doc, number=latest_number + 1, title=new_title, body=new_body, author=author)
    if latest is not None:
        # Every open finding on an older revision moves (or, if its quote is gone, is orphaned).
        revision.reanchor_total = _older_open_findings(revision).count()
    if revision.reanchor_total:
        revision.reanchor_status = ReanchorStatus.PENDING
    revision.save()
    return revision


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


def _reanchor(revision: DocRevision, result: ReviseResult, lease: _Lease) -> None:
    """Place each open finding's quote in the new text, a batch at a time.

    The search (the slow part) runs outside any transaction; each batch's
    writes then take one short transaction (one UPDATE for the batch),
    skipping a finding changed meanwhile (its next revision moves it). The
    viewers are told after the commit, so the write lock is never held while
    the findings are serialized for them.
    """
    ids = list(_older_open_findings(revision).exclude(anchor_exact="").order_by("pk").values_list("pk", flat=True))
    # Findings without a quote need no search; on a retry, the ones moved already are gone from ids.
    done = max(0, revision.reanchor_total - len(ids))
    for index, batch in enumerate(_batches(ids)):
        lease.next_batch(index == 0)
        if _superseded(revision):
            return
        findings = list(_older_open_findings(revision).filter(pk__in=batch).select_related("revision"))
        placements = []
        for finding in findings:
            lease.beat()
            placements.append((finding, _placement(finding, revision)))
        with transaction.atomic():
            if _superseded(revision):
                return
            current = dict(Finding.objects.select_for_update().filter(pk__in=batch).values_list("pk", "version"))
            changed = [finding for finding, placed in placements if current.get(finding.pk) == finding.version
                       and _apply_placement(finding, revision, placed, result)]
            Finding.objects.bulk_update(changed, MOVED_FIELDS)
            done += len(batch)
            _progress(revision, done)
        _publish_updated(changed)


# What moving a finding changes (bulk updates set updated_at themselves).
MOVED_FIELDS = ["revision", "anchor_exact", "anchor_prefix", "anchor_suffix", "anchor_start", "anchor_end",
                "orphaned", "version", "updated_at"]


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


def _apply_placement(finding: Finding, revision: DocRevision, placed: Any, result: ReviseResult) -> bool:
    """Change the finding in memory; True when it must be saved (and its viewers told)."""
    if placed is None:
        result.orphaned.append(finding)
        if finding.orphaned:
            return False
        finding.orphaned = True
    else:
        set_anchor(finding, revision, placed.anchor)
        finding.orphaned = False
        result.moved.append(finding)
    finding.version += 1
    finding.updated_at = timezone.now()
    return True


def _publish_updated(findings: list[Finding]) -> None:
    """Send each changed finding to its session's viewers (serialized together, after the commit)."""
    if not findings:
        return

    # Drafts are their writer's alone: a moved draft is not announced, and replies
    # still in draft are not counted.
    fresh = (Finding.objects.filter(pk__in=[f.pk for f in findings], published_at__isnull=False)
             .select_related("author", "revision")
             .annotate(reply_total=Count("replies", filter=Q(replies__published_at__isnull=False)))
             .order_by("pk"))
    for finding, data in zip(fresh, FindingSerializer(fresh, many=True).data, strict=True):
        realtime.session_event(finding.session_id, "finding.updated", {"finding": dict(data)})


def _move_unchanged(revision: DocRevision, result: ReviseResult, lease: _Lease) -> None:
    """Only the title changed: open, placed findings move without searching, a batch at a time."""
    ids = list(_older_open_findings(revision).filter(orphaned=False).order_by("pk").values_list("pk", flat=True))
    done = max(0, revision.reanchor_total - len(ids))
    for index, batch in enumerate(_batches(ids)):
        lease.next_batch(index == 0)
        lease.beat()
        with transaction.atomic():
            if _superseded(revision):
                return
            changed = list(_older_open_findings(revision).select_for_update().filter(pk__in=batch))
            for finding in changed:
                finding.revision = revision
                finding.version += 1
                finding.updated_at = timezone.now()
                result.moved.append(finding)
            Finding.objects.bulk_update(changed, ["revision", "version", "updated_at"])
            done += len(batch)
            _progress(revision, done)
        _publish_updated(changed)


# --- sessions --------------------------------------------------------------


@transaction.atomic
def session_create(
    *,
    owner: User,
    doc: DesignDoc,
    fleet_config: FleetConfig | None = None,
    title: str = "",
    reviewers: Iterable[User] = (),
    authors: Iterable[User] = (),
    file_directly: bool = False,
) -> ReviewSession:
    """Open a review session on ``doc`` owned by ``owner``; ``authors`` are the doc's authors.

    Only the doc's owner (and staff) open one, and only with their own fleet
    config (``permissions.can_share``): a session decides who sees them.
    """
    if not permissions.can_share(owner, doc):
        raise Forbidden("Only the doc's owner opens review sessions on it.", field="doc")
    if fleet_config is not None and not permissions.can_share(owner, fleet_config):
        raise Forbidden("Only the fleet config's owner puts it in a review session.", field="fleet_config")
    session = ReviewSession.objects.create(
        owner=owner, doc=doc, fleet_config=fleet_config, title=title, file_directly=file_directly
    )
    session.reviewers.set([r for r in reviewers if r.pk != owner.pk])
    session.authors.set(list(authors))
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
    authors: Iterable[User] | None = None,
    file_directly: bool | None = None,
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
    if file_directly is not None:
        session.file_directly = file_directly
    session.save()
    if reviewers is not None or authors is not None:
        before = set(selectors.participant_ids(session))
        if reviewers is not None:
            session.reviewers.set([r for r in reviewers if r.pk != session.owner_id])
        if authors is not None:
            session.authors.set(list(authors))
        reviewers_removed(session=session, user_ids=before - set(selectors.participant_ids(session)))
    if pass_changed:
        realtime.session_event(session.pk, "pass.changed", {"pass": session.current_pass})
    return session


@transaction.atomic
def session_bring_everyone(*, session: ReviewSession, user: Any, review_pass: str) -> ReviewSession:
    """Make ``review_pass`` the session's pass and move every open tab of it there.

    Unlike a plain pass change (which moves only the viewers who were on the
    session's pass), every viewer hears ``pass.brought`` and shows the pass,
    even when the session was already on it.
    """
    if review_pass not in ReviewPass.values:
        raise Invalid("pass", f"pass: use one of {', '.join(ReviewPass.values)}")
    if not permissions.can_manage_session(user, session):
        raise Forbidden("Only the session's owner brings everyone to a pass.", field="pass")
    session.current_pass = review_pass
    session.save(update_fields=["current_pass", "updated_at"])
    realtime.session_event(session.pk, "pass.brought", {"pass": review_pass, "by": user.get_username()})
    return session


@transaction.atomic
def session_delete(*, session: ReviewSession) -> None:
    """Delete a session with its findings and its finished runs.

    A run of the session still queued or running (anyone's) refuses with 409:
    deleting it would pull its rows from under the worker playing it, and take
    another user's run, frames and evidence with it. Cancel the runs, or let
    them end, first.
    """
    session = ReviewSession.objects.select_for_update().get(pk=session.pk)
    going = EmulatorRun.objects.filter(session=session).exclude(status__in=FINAL_STATUSES)
    sweeps = session.sweeps.exclude(status__in=FINAL_STATUSES)
    if going.exists() or sweeps.exists():
        raise Conflict(
            "Emulator runs of this session are queued or running; cancel them (or let them end) first, "
            "then delete the session.",
            field="runs",
        )
    session.delete()


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
    "session_delete",
    "session_bring_everyone",
    "session_update",
    "validate_scenario_toml",
]
