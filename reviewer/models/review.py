"""Review data: design docs and their revisions, fleet configs and their versions,
review sessions, findings anchored to a doc's text, and replies to findings.

Workflows that touch several rows (revising a doc, re-anchoring findings,
publishing live events) live in :mod:`reviewer.review.services`; the rules that
concern one row live here as methods.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from reviewer.fleets.scenario_toml import validate_scenario_toml
from reviewer.models.collaboration import FindingState
from reviewer.models.fields import OrderedJSONField


class ReviewPass(models.TextChoices):
    """The five passes of a review, in the order they are run."""

    RESTATE = "restate", "Restate"
    NUMBERS = "numbers", "Numbers"
    TRACE = "trace", "Trace"
    BREAK = "break", "Break"
    RANK = "rank", "Rank"


class Severity(models.TextChoices):
    """The rank pass's buckets, most urgent first."""

    FIX_NOW = "fix_now", "Fix now"
    CLARIFY = "clarify", "Clarify"
    MENTION = "mention", "Mention"


class FindingStatus(models.TextChoices):
    """Where a finding stands."""

    OPEN = "open", "Open"
    RESOLVED = "resolved", "Resolved"
    DROPPED = "dropped", "Dropped"


class TraceHop(models.TextChoices):
    """The hop of a request's path a trace-pass finding is about."""

    CLIENT = "client", "Client"
    GATEWAY = "gateway", "Gateway"
    DISPATCHER = "dispatcher", "Dispatcher"
    WORKER = "worker", "Worker"
    RESPONSE_PATH = "response_path", "Response path"
    # Hops of paths drawn from a fleet config (reviewer.fleets.scenario_view.trace_path).
    ROUTING = "routing", "Routing"
    PREFILL_POOL = "prefill_pool", "Prefill pool"
    KV_TRANSFER = "kv_transfer", "KV transfer"
    DECODE_POOL = "decode_pool", "Decode pool"


class SessionStatus(models.TextChoices):
    """Whether a review session still takes findings."""

    OPEN = "open", "Open"
    CLOSED = "closed", "Closed"


# Ordering of buckets in reports and in the rank pass.
SEVERITY_ORDER: dict[str, int] = {s.value: i for i, s in enumerate(Severity)}
PASS_ORDER: dict[str, int] = {p.value: i for i, p in enumerate(ReviewPass)}


class DesignDoc(models.Model):
    """A design document under review: a title and a Markdown body.

    ``title`` and ``body`` mirror the latest :class:`DocRevision`; every edit
    goes through ``reviewer.review.services.doc_revise`` so that a new revision is made.
    """

    title = models.CharField(max_length=200)
    body = models.TextField(blank=True, help_text="Markdown.")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="design_docs"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at", "-id"]

    def __str__(self) -> str:
        return self.title

    def latest_revision(self) -> DocRevision | None:
        """The newest revision, or None for a doc saved without the service."""
        return self.revisions.order_by("-number").first()


class ReanchorStatus(models.TextChoices):
    """Where moving a doc's findings onto a new revision stands."""

    PENDING = "pending", "Pending"
    DONE = "done", "Done"
    SUPERSEDED = "superseded", "Superseded"


class DocRevision(models.Model):
    """One saved state of a doc. Findings point at the revision they were made on."""

    doc = models.ForeignKey(DesignDoc, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # Moving the doc's open findings onto this revision (a background task; see
    # reviewer.review.services.reanchor_revision): pending until done, or superseded by
    # a newer revision that takes the findings over.
    reanchor_status = models.CharField(max_length=10, choices=ReanchorStatus.choices, default=ReanchorStatus.DONE)
    reanchor_total = models.PositiveIntegerField(default=0, help_text="Open findings to move onto this revision.")
    reanchor_done = models.PositiveIntegerField(default=0, help_text="Of those, the ones handled so far.")
    reanchor_beat_at = models.DateTimeField(null=True, blank=True, help_text="Last progress of the re-anchoring.")
    reanchor_dispatch = models.PositiveIntegerField(
        default=0, help_text="How many times the re-anchoring was handed to a worker; only the latest copy works.")

    class Meta:
        ordering = ["doc", "number"]
        constraints = [
            models.UniqueConstraint(fields=["doc", "number"], name="docrevision_unique_number")
        ]

    def __str__(self) -> str:
        return f"{self.doc.title} r{self.number}"


class FleetConfig(models.Model):
    """A named emulator scenario, edited as TOML and stored as JSON too.

    ``toml`` and ``scenario`` mirror the latest :class:`FleetConfigVersion`.
    Every save validates the TOML with the emulator's validator, so a config
    that the emulator would refuse never reaches the database.
    """

    name = models.CharField(max_length=200)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="fleet_configs"
    )
    doc = models.ForeignKey(
        DesignDoc, on_delete=models.SET_NULL, null=True, blank=True, related_name="fleet_configs"
    )
    toml = models.TextField(help_text="The scenario in the emulator's TOML format.")
    scenario = OrderedJSONField(default=dict, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at", "-id"]

    def __str__(self) -> str:
        return self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Validate the TOML and refresh ``scenario`` from it, then save."""
        self.clean()
        super().save(*args, **kwargs)

    def clean(self) -> None:
        """Validate the TOML; errors are reported on the ``toml`` field."""
        try:
            self.scenario = validate_scenario_toml(self.toml)
        except ValidationError as exc:
            raise ValidationError({"toml": exc.messages}) from None

    def latest_version(self) -> FleetConfigVersion | None:
        """The newest version, or None for a config saved without the service."""
        return self.versions.order_by("-number").first()

    @property
    def provenance(self) -> dict[str, Any]:
        """Where the latest version's figures come from (see reviewer.fleets.provenance)."""
        latest = self.latest_version()
        return dict(latest.provenance) if latest else {}


class FleetConfigVersion(models.Model):
    """One saved state of a fleet config: what an emulator run actually used."""

    config = models.ForeignKey(FleetConfig, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    toml = models.TextField()
    scenario = OrderedJSONField(default=dict, editable=False)
    #: The break pass's measured advice (reviewer.fleets.break_advice), once worked out.
    break_advice = OrderedJSONField(null=True, blank=True, editable=False)
    break_advice_asked_at = models.DateTimeField(null=True, blank=True, editable=False)
    #: The one analysis of the version (emulator.analysis.record.fleet_record: the numbers
    #: pass, the placement answer, the doc's figures), worked out once and read by the
    #: numbers pass and every export (reviewer.fleets.analysis_record).
    analysis = OrderedJSONField(null=True, blank=True, editable=False)
    # Key path -> {"source": "doc", "quote": ...} or {"source": "assumed"}: see reviewer.fleets.provenance.
    provenance = models.JSONField(default=dict, blank=True)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["config", "number"]
        constraints = [
            models.UniqueConstraint(fields=["config", "number"], name="fleetconfigversion_unique_number")
        ]

    def __str__(self) -> str:
        return f"{self.config.name} v{self.number}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Validate the TOML and refresh ``scenario`` from it, then save."""
        try:
            self.scenario = validate_scenario_toml(self.toml)
        except ValidationError as exc:
            raise ValidationError({"toml": exc.messages}) from None
        super().save(*args, **kwargs)


class PlacementAnswer(models.Model):
    """The placement pass's answer for a fleet config version on another number of hosts
    (``?hosts=N``), worked out once by a docs worker (reviewer.fleets.analysis_record).

    ``answer`` is None while a worker is asked (since ``asked_at``); then the solver's
    answer, ``{"error": why}`` when the puzzle does not apply, or ``{"refused": why}``
    when it went over its time or memory limit. The answer on the version's own hosts
    is in its ``analysis`` record.
    """

    version = models.ForeignKey(FleetConfigVersion, on_delete=models.CASCADE, related_name="placement_answers")
    hosts = models.PositiveIntegerField()
    answer = OrderedJSONField(null=True, blank=True, editable=False)
    asked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["version", "hosts"], name="placementanswer_unique_hosts")
        ]

    def __str__(self) -> str:
        return f"{self.version} on {self.hosts} hosts"


class TraceUploadStatus(models.TextChoices):
    PENDING = "pending", "pending"
    DONE = "done", "done"
    FAILED = "failed", "failed"


class TraceUpload(models.Model):
    """A request trace uploaded for a fleet config, stored as it came and checked by a
    docs worker (reviewer.fleets.traces), which then makes the version that replays it."""

    config = models.ForeignKey(FleetConfig, on_delete=models.CASCADE, related_name="trace_uploads")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    name = models.CharField(max_length=255)
    #: The stored file, absolute, under TRACE_UPLOAD_DIR (kept while pending and once done).
    path = models.CharField(max_length=1024)
    size = models.BigIntegerField(default=0)
    status = models.CharField(max_length=16, choices=TraceUploadStatus.choices, default=TraceUploadStatus.PENDING)
    #: When refused: the field at fault and the one-line error naming the fix.
    error_field = models.CharField(max_length=64, blank=True)
    error = models.TextField(blank=True)
    version = models.ForeignKey(FleetConfigVersion, on_delete=models.SET_NULL, null=True, blank=True,
                                related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.name} for {self.config_id} ({self.status})"


class ReviewSession(models.Model):
    """A review of one doc (optionally with a fleet config) by an owner and reviewers."""

    title = models.CharField(max_length=200, blank=True)
    doc = models.ForeignKey(DesignDoc, on_delete=models.PROTECT, related_name="sessions")
    fleet_config = models.ForeignKey(
        FleetConfig, on_delete=models.PROTECT, null=True, blank=True, related_name="sessions"
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="owned_review_sessions"
    )
    reviewers = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="review_sessions"
    )
    current_pass = models.CharField(
        max_length=16, choices=ReviewPass.choices, default=ReviewPass.RESTATE
    )
    status = models.CharField(max_length=8, choices=SessionStatus.choices, default=SessionStatus.OPEN)
    # The doc's authors: they see published findings, reply and set their state.
    authors = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="authored_review_sessions")
    file_directly = models.BooleanField(
        default=False, help_text="Findings and replies are published as they are filed, without drafts."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    # The review document: what the export opens with, before the findings.
    # Changed through services.document.review_document_update, guarded by
    # document_version as findings are by their version.
    opening = models.TextField(
        blank=True, help_text="Markdown. The verdict in a sentence and the things to fix now."
    )
    strengths = models.TextField(blank=True, help_text="Markdown. What the doc gets right.")
    restatement = models.TextField(blank=True, help_text="Markdown. The design said back (the restate pass).")
    document_version = models.PositiveIntegerField(default=1)
    document_updated_at = models.DateTimeField(null=True, blank=True)
    document_updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["-updated_at", "-id"]

    def __str__(self) -> str:
        return self.title or f"Review of {self.doc.title}"

    @property
    def is_open(self) -> bool:
        """True while the session takes new findings."""
        return self.status == SessionStatus.OPEN

    def is_participant(self, user: Any) -> bool:
        """The owner or one of the reviewers."""
        if not getattr(user, "is_authenticated", False):
            return False
        return self.owner_id == user.pk or self.reviewers.filter(pk=user.pk).exists()

    def is_author(self, user: Any) -> bool:
        """One of the doc's authors named on the session."""
        if not getattr(user, "is_authenticated", False):
            return False
        return self.authors.filter(pk=user.pk).exists()


class Finding(models.Model):
    """One observation made during a review, anchored to the doc's text.

    The anchor follows the W3C Web Annotation selectors: a TextQuoteSelector
    (``anchor_exact`` with ``anchor_prefix``/``anchor_suffix`` of about 32
    characters) and a TextPositionSelector (``anchor_start``/``anchor_end``,
    character offsets into ``revision.body``). ``version`` grows by one on every
    update so that a stale write can be refused.
    """

    ANCHOR_CONTEXT_CHARS = 32

    session = models.ForeignKey(ReviewSession, on_delete=models.CASCADE, related_name="findings")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="findings"
    )
    review_pass = models.CharField(max_length=16, choices=ReviewPass.choices)
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True, help_text="Markdown.")
    severity = models.CharField(max_length=8, choices=Severity.choices, default=Severity.MENTION)
    position = models.PositiveIntegerField(default=0, help_text="Order within the severity bucket.")
    status = models.CharField(max_length=9, choices=FindingStatus.choices, default=FindingStatus.OPEN)

    revision = models.ForeignKey(
        DocRevision, on_delete=models.PROTECT, null=True, blank=True, related_name="findings"
    )
    anchor_exact = models.TextField(blank=True)
    anchor_prefix = models.CharField(max_length=64, blank=True)
    anchor_suffix = models.CharField(max_length=64, blank=True)
    anchor_start = models.PositiveIntegerField(null=True, blank=True)
    anchor_end = models.PositiveIntegerField(null=True, blank=True)
    orphaned = models.BooleanField(
        default=False, help_text="The quote could not be placed in the doc's latest revision."
    )

    trace_hop = models.CharField(max_length=16, choices=TraceHop.choices, blank=True)

    # A run is referred to by id (runs live in reviewer.models.runs and may be
    # pruned); the window and metric say what to look at in it.
    evidence_run_id = models.BigIntegerField(null=True, blank=True)
    evidence_t_from_s = models.FloatField(null=True, blank=True)
    evidence_t_to_s = models.FloatField(null=True, blank=True)
    evidence_metric = models.CharField(max_length=64, blank=True)
    # A second run the evidence compares the first with (the same window of both; their
    # changed keys tell them apart), or None for a single run.
    evidence_compare_run_id = models.BigIntegerField(null=True, blank=True)

    # A draft (unset) is seen by its author alone until their review is published.
    published_at = models.DateTimeField(null=True, blank=True)
    publication = models.ForeignKey(
        "reviewer.Review", on_delete=models.SET_NULL, null=True, blank=True, related_name="findings"
    )
    state = models.CharField(max_length=8, choices=FindingState.choices, default=FindingState.OPEN)
    state_reason = models.TextField(blank=True)
    fixed_revision = models.PositiveIntegerField(
        null=True, blank=True, help_text="The number of the doc revision that fixes the finding."
    )
    state_changed_at = models.DateTimeField(null=True, blank=True)

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    version = models.PositiveIntegerField(default=1)

    # A near-duplicate folded into another finding: kept (with its evidence),
    # its replies moved under the surviving finding.
    merged_into = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="merged_findings"
    )

    class Meta:
        # Buckets are ordered by SEVERITY_ORDER, not alphabetically: see
        # selectors.findings_in_report_order.
        ordering = ["session", "position", "id"]
        indexes = [models.Index(fields=["session", "severity", "position"])]

    def __str__(self) -> str:
        return self.title

    @property
    def has_anchor(self) -> bool:
        """True when the finding quotes the doc."""
        return bool(self.anchor_exact)

    @property
    def is_draft(self) -> bool:
        """True until its author publishes their review."""
        return self.published_at is None

    @property
    def has_evidence(self) -> bool:
        """True when the finding points at an emulator run."""
        return self.evidence_run_id is not None

    def clean(self) -> None:
        """Check the rules that concern this row alone."""
        errors: dict[str, str] = {}
        if (self.anchor_start is None) != (self.anchor_end is None):
            errors["anchor_end"] = "Give both anchor_start and anchor_end, or neither."
        elif self.anchor_start is not None and self.anchor_end is not None and self.anchor_end < self.anchor_start:
            errors["anchor_end"] = "anchor_end must not be before anchor_start."
        if (
            self.evidence_t_from_s is not None
            and self.evidence_t_to_s is not None
            and self.evidence_t_to_s < self.evidence_t_from_s
        ):
            errors["evidence_t_to_s"] = "The window must end at or after evidence_t_from_s."
        if errors:
            raise ValidationError(errors)


class FindingReply(models.Model):
    """A reply in a finding's discussion thread."""

    finding = models.ForeignKey(Finding, on_delete=models.CASCADE, related_name="replies")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="finding_replies"
    )
    body = models.TextField(help_text="Markdown.")
    published_at = models.DateTimeField(null=True, blank=True)
    publication = models.ForeignKey(
        "reviewer.Review", on_delete=models.SET_NULL, null=True, blank=True, related_name="replies"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Set on a reply moved here when its finding was merged into this one.
    merged_from = models.ForeignKey(
        Finding, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["finding", "created_at", "id"]

    def __str__(self) -> str:
        return f"Reply by {self.author} on {self.finding}"
