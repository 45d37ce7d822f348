"""How findings, replies, sessions, runs and sweeps look to the outside.

One representation of each object serves the REST API, the live events sent
to browsers and the exports, so a finding pushed over a websocket or written
to an export is the finding the API answers with. The API's views, the
services and the exports import from here; this module imports models,
selectors and the Markdown renderer only, never the API or the services.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from reviewer import selectors
from reviewer.models import EmulatorRun, Sweep
from reviewer.models.collaboration import Notification, Review
from reviewer.models.review import Finding, FindingReply, ReviewPass, ReviewSession
from reviewer.review.duplicates import duplicates_of
from reviewer.text.markdown import render_markdown


def username_or_none(user: Any) -> str | None:
    """The user's username, or None for a user since deleted."""
    return user.get_username() if user is not None else None


class VisibleToRequestUser(serializers.PrimaryKeyRelatedField):
    """A reference that only accepts objects the requesting user may see."""

    def __init__(self, visible: Any, **kwargs: Any) -> None:
        self.visible = visible
        super().__init__(**kwargs)

    def get_queryset(self) -> Any:
        request = self.context.get("request")
        return self.visible(request.user if request else None)


class UsernameField(serializers.SlugRelatedField):
    """An active user given by username.

    A name that is unknown, deactivated or malformed gets one message that does
    not repeat the name, so the answer does not say which usernames exist.
    """

    default_error_messages = {
        "does_not_exist": "Each reviewer must be the username of an active user; check the spelling.",
        "invalid": "Each reviewer must be the username of an active user; check the spelling.",
    }

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(slug_field="username", queryset=get_user_model().objects.filter(is_active=True), **kwargs)


# --- sessions --------------------------------------------------------------


class ReviewSessionSerializer(serializers.ModelSerializer):
    """A review session; ``reviewers`` are usernames."""

    owner = serializers.SerializerMethodField()
    doc = VisibleToRequestUser(selectors.docs_visible_to)
    fleet_config = VisibleToRequestUser(selectors.fleet_configs_visible_to, required=False, allow_null=True)
    reviewers = UsernameField(many=True, required=False)
    authors = UsernameField(many=True, required=False, help_text="The doc's authors, by username.")
    finding_counts = serializers.SerializerMethodField()

    class Meta:
        model = ReviewSession
        fields = [
            "id", "title", "doc", "fleet_config", "owner", "reviewers", "current_pass", "status",
            "finding_counts", "created_at", "updated_at", "authors", "file_directly",
        ]

    def get_owner(self, obj: ReviewSession) -> str:
        return obj.owner.get_username()

    def get_finding_counts(self, obj: ReviewSession) -> dict[str, int]:
        names = ("fix_now", "clarify", "mention", "orphaned")
        if hasattr(obj, "findings_orphaned"):  # annotated by the list's query
            return {name: getattr(obj, f"findings_{name}") for name in names}
        counts = dict.fromkeys(names, 0)
        published = obj.findings.exclude(status="dropped").filter(published_at__isnull=False)
        for severity, orphaned in published.values_list("severity", "orphaned"):
            counts[severity] += 1
            counts["orphaned"] += int(orphaned)
        return counts



# --- findings --------------------------------------------------------------


class FindingReplySerializer(serializers.ModelSerializer):
    """A reply in a finding's thread."""

    author = serializers.SerializerMethodField()
    body_html = serializers.SerializerMethodField()
    draft = serializers.SerializerMethodField(help_text="True until its author publishes their review.")

    class Meta:
        model = FindingReply
        fields = ["id", "finding", "author", "body", "body_html", "created_at", "draft"]
        read_only_fields = ["finding"]

    def get_draft(self, obj: FindingReply) -> bool:
        return obj.published_at is None

    def get_author(self, obj: FindingReply) -> str:
        return obj.author.get_username()

    def get_body_html(self, obj: FindingReply) -> str:
        return render_markdown(obj.body)


class SelectionSerializer(serializers.Serializer):
    """Text a reader selected in the rendered doc; the server finds it in the doc's source."""

    quote = serializers.CharField(max_length=20_000, trim_whitespace=False,
                                  help_text="The selected text, as rendered.")
    prefix = serializers.CharField(max_length=200, required=False, allow_blank=True, trim_whitespace=False,
                                   help_text="About 32 characters of rendered text before the selection.")
    suffix = serializers.CharField(max_length=200, required=False, allow_blank=True, trim_whitespace=False,
                                   help_text="About 32 characters of rendered text after the selection.")
    position = serializers.FloatField(required=False, allow_null=True, min_value=0.0, max_value=1.0,
                                      help_text="Roughly where the selection starts: 0 the top of the doc, 1 its end.")


class FindingSerializer(serializers.ModelSerializer):
    """A finding. ``pass`` is the review pass; writes must carry the current ``version``.

    The anchor may be given as a quote (``anchor_exact``, with optional
    ``anchor_prefix``/``anchor_suffix`` to pick among repeats), as offsets
    (``anchor_start``/``anchor_end``), or both; or, from a page, as the reader's
    ``selection`` in the rendered doc, which the server places. It is taken on
    the doc's latest revision and answered with all five filled in.
    """

    author = serializers.SerializerMethodField()
    body_html = serializers.SerializerMethodField()
    revision = serializers.SerializerMethodField()
    anchor_pending = serializers.SerializerMethodField(
        help_text="The doc was revised and this finding's anchor is still being moved to the new revision "
                  "(revision and anchor_* are on the older one until then)."
    )
    reply_count = serializers.SerializerMethodField()
    duplicates = serializers.SerializerMethodField()
    version = serializers.IntegerField(
        required=False, min_value=1, help_text="Required on update: the version you read."
    )
    position = serializers.IntegerField(required=False, min_value=0, max_value=1_000_000)
    anchor_start = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=10_000_000)
    anchor_end = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=10_000_000)
    evidence_run_id = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=2**63 - 1
    )
    evidence_compare_run_id = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=2**63 - 1,
        help_text="A second run the evidence compares evidence_run_id with, or null.",
    )
    evidence_t_from_s = serializers.FloatField(required=False, allow_null=True, min_value=0, max_value=1e9)
    evidence_t_to_s = serializers.FloatField(required=False, allow_null=True, min_value=0, max_value=1e9)
    selection = SelectionSerializer(write_only=True, required=False,
                                    help_text="Instead of the anchor_* fields: text selected in the rendered doc.")
    draft = serializers.SerializerMethodField(
        help_text="True until its author publishes their review; a draft is seen by its author alone."
    )
    verdict = serializers.SerializerMethodField(help_text="The verdict of the review that published it.")

    class Meta:
        model = Finding
        fields = [
            "id", "session", "author", "title", "body", "body_html", "severity", "position",
            "status", "anchor_exact", "anchor_prefix", "anchor_suffix", "anchor_start",
            "anchor_end", "revision", "orphaned", "trace_hop", "evidence_run_id",
            "evidence_t_from_s", "evidence_t_to_s", "evidence_metric", "evidence_compare_run_id", "reply_count",
            "created_at", "updated_at", "version", "selection", "anchor_pending",
            "merged_into", "duplicates",
            "draft", "published_at", "publication", "verdict", "state", "state_reason", "fixed_revision",
        ]
        read_only_fields = [
            "session", "orphaned", "anchor_pending", "merged_into",
            "published_at", "publication", "state", "state_reason", "fixed_revision",
        ]
        # Quotes and their context are compared character for character.
        extra_kwargs = {
            "anchor_exact": {"trim_whitespace": False},
            "anchor_prefix": {"trim_whitespace": False},
            "anchor_suffix": {"trim_whitespace": False},
        }

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        # "pass" is a Python keyword, so the field is added here, not declared.
        fields["pass"] = serializers.ChoiceField(
            source="review_pass", choices=ReviewPass.choices, help_text="The review pass."
        )
        return fields

    def get_author(self, obj: Finding) -> str:
        return obj.author.get_username()

    def get_body_html(self, obj: Finding) -> str:
        return render_markdown(obj.body)

    def get_revision(self, obj: Finding) -> int | None:
        return obj.revision.number if obj.revision_id else None

    @extend_schema_field(OpenApiTypes.BOOL)
    def get_anchor_pending(self, obj: Finding) -> bool:
        """True while the doc's newer revision is re-anchoring and this open finding has not moved yet."""
        if not obj.revision_id or obj.status != "open" or not obj.anchor_exact:
            return False
        # One query per doc for a whole list of findings.
        pending = self.context.setdefault("pending_revisions", {})
        doc_id = obj.revision.doc_id
        if doc_id not in pending:
            pending[doc_id] = selectors.pending_revision_number(doc_id)
        number = pending[doc_id]
        return number is not None and obj.revision.number < number

    def get_reply_count(self, obj: Finding) -> int:
        # Lists annotate the count; a single finding counts the replies the reader
        # sees (live events and exports: the published ones).
        annotated = getattr(obj, "reply_total", None)
        if annotated is not None:
            return annotated
        request = self.context.get("request")
        return selectors.published_or_own(obj.replies.all(), request.user).count() if request else (
            obj.replies.filter(published_at__isnull=False).count())

    def get_draft(self, obj: Finding) -> bool:
        return obj.published_at is None

    def get_verdict(self, obj: Finding) -> str | None:
        return obj.publication.verdict if obj.publication_id else None

    @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
    def get_duplicates(self, obj: Finding) -> list[int]:
        """Ids of the session's findings that look like this one (see reviewer.review.duplicates)."""
        if obj.merged_into_id is not None:
            return []
        # Lists and exports work the session's duplicates out once; a single finding asks.
        known = self.context.get("duplicates", getattr(obj, "duplicate_ids", None))
        if known is None:
            return duplicates_of(obj)
        return list(known.get(obj.pk, [])) if isinstance(known, dict) else list(known)



# --- runs ------------------------------------------------------------------


#: A run's speed as the API shows it: 1, 10 or 100 (simulated seconds per second), or "max".
RUN_SPEED_SCHEMA = {"oneOf": [{"type": "integer", "enum": [1, 10, 100]}, {"type": "string", "enum": ["max"]}]}


class RunSerializer(serializers.ModelSerializer):
    """A run's header: status, summary and where it came from."""

    speed = serializers.SerializerMethodField()
    duration_s = serializers.FloatField(read_only=True)
    started_by = serializers.CharField(source="started_by.username", read_only=True)
    commands = serializers.SerializerMethodField()
    queue_position = serializers.SerializerMethodField(
        help_text="For a queued run, its place in the queue of runs waiting for a worker (1 starts next; "
                  "the order is fair between users); null once it runs."
    )

    class Meta:
        model = EmulatorRun
        fields = ["id", "status", "reason", "speed", "seed", "duration_s", "sim_s", "frames_stored",
                  "behind", "summary", "layout", "session", "config_version", "sweep", "sweep_value", "overrides",
                  "started_by", "created_at", "started_at", "finished_at", "heartbeat_at", "attempts",
                  "commands", "queue_position"]
        read_only_fields = fields

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_queue_position(self, run: EmulatorRun) -> int | None:
        if run.status != "queued":
            return None
        # One computation of the queue for a whole list of runs.
        context = self.context
        if "queue_positions" not in context:
            context["queue_positions"] = selectors.run_queue_positions()
        return context["queue_positions"].get(run.pk)

    @extend_schema_field(RUN_SPEED_SCHEMA)
    def get_speed(self, run: EmulatorRun) -> int | str:
        return run.speed_for_json()

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_commands(self, run: EmulatorRun) -> list[dict[str, Any]]:
        return [
            {"id": c.pk, "kind": c.kind, "command": c.command, "applied_at_s": c.applied_at_s,
             "applied_after_frame": c.applied_after_frame, "error": c.error or None}
            for c in run.commands.all()
        ]


class SweepSerializer(serializers.ModelSerializer):
    """A sweep with its progress, curve and answer."""

    progress = serializers.SerializerMethodField()
    started_by = serializers.CharField(source="started_by.username", read_only=True)

    class Meta:
        model = Sweep
        fields = ["id", "status", "reason", "key", "values", "seed", "target_p99_s", "min_ok_rate",
                  "progress", "curve", "answer", "session", "config_version", "started_by",
                  "created_at", "finished_at"]
        read_only_fields = fields

    @extend_schema_field(serializers.DictField(child=serializers.IntegerField()))
    def get_progress(self, sweep: Sweep) -> dict[str, int]:
        return selectors.sweep_progress(sweep)



# --- publications and notifications ----------------------------------------


class ReviewSerializer(serializers.ModelSerializer):
    """A published review: its verdict, summary and how much it published."""

    reviewer = serializers.SerializerMethodField()
    summary_html = serializers.SerializerMethodField()

    class Meta:
        model = Review
        fields = ["id", "session", "reviewer", "verdict", "summary", "summary_html", "findings_published",
                  "replies_published", "created_at"]
        read_only_fields = ["session", "findings_published", "replies_published"]

    def get_reviewer(self, obj: Review) -> str:
        return obj.reviewer.get_username()

    def get_summary_html(self, obj: Review) -> str:
        return render_markdown(obj.summary)


class NotificationSerializer(serializers.ModelSerializer):
    """An inbox item; ``url`` is the page it is about."""

    actor = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()
    read = serializers.SerializerMethodField()

    class Meta:
        model = Notification
        fields = ["id", "kind", "text", "actor", "session", "finding", "review", "url", "read",
                  "created_at", "read_at"]
        read_only_fields = fields

    def get_actor(self, obj: Notification) -> str | None:
        return username_or_none(obj.actor)

    def get_url(self, obj: Notification) -> str:
        return notification_url(obj)

    def get_read(self, obj: Notification) -> bool:
        return obj.read_at is not None


def notification_url(notification: Notification) -> str:
    """The page a notification points at: its session, at the finding when there is one."""
    url = f"/sessions/{notification.session_id}/"
    return f"{url}#finding-{notification.finding_id}" if notification.finding_id else url


# --- plain dicts for live events and exports -------------------------------


def finding_representation(finding: Finding) -> dict[str, Any]:
    """A finding as the API shows it, as a plain dict."""
    return dict(FindingSerializer(finding).data)


def reply_representations(replies: Any) -> list[dict[str, Any]]:
    """Replies as the API shows them, as plain dicts."""
    return [dict(r) for r in FindingReplySerializer(replies, many=True).data]


class ReviewDocumentSerializer(serializers.ModelSerializer):
    """A session's review document: opening, strengths and restatement (Markdown).

    Writes carry the ``version`` they read; a stale one answers 409.
    """

    version = serializers.IntegerField(source="document_version", min_value=1,
                                       help_text="Required on update: the version you read.")
    updated_at = serializers.DateTimeField(source="document_updated_at", read_only=True, allow_null=True)
    updated_by = serializers.SerializerMethodField()
    opening = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False, max_length=1_000_000,
                                    help_text="The verdict in a sentence and the things to fix now.")
    strengths = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False,
                                      max_length=1_000_000, help_text="What the doc gets right.")
    restatement = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False,
                                        max_length=1_000_000, help_text="The design said back (the restate pass).")
    opening_html = serializers.SerializerMethodField()
    strengths_html = serializers.SerializerMethodField()
    restatement_html = serializers.SerializerMethodField()

    class Meta:
        model = ReviewSession
        fields = ["opening", "strengths", "restatement", "opening_html", "strengths_html", "restatement_html",
                  "version", "updated_at", "updated_by"]

    def get_updated_by(self, obj: ReviewSession) -> str | None:
        return username_or_none(obj.document_updated_by)

    def get_opening_html(self, obj: ReviewSession) -> str:
        return render_markdown(obj.opening)

    def get_strengths_html(self, obj: ReviewSession) -> str:
        return render_markdown(obj.strengths)

    def get_restatement_html(self, obj: ReviewSession) -> str:
        return render_markdown(obj.restatement)


def review_document_representation(session: ReviewSession) -> dict[str, Any]:
    """A session's review document as the API shows it, as a plain dict."""
    return dict(ReviewDocumentSerializer(session).data)


def session_representation(session: ReviewSession) -> dict[str, Any]:
    """A review session as the API shows it, as a plain dict."""
    return dict(ReviewSessionSerializer(session).data)


def review_representation(review: Review) -> dict[str, Any]:
    """A published review as the API shows it, as a plain dict."""
    return dict(ReviewSerializer(review).data)


def run_representation(run: EmulatorRun) -> dict[str, Any]:
    """A run's header as the API shows it, as a plain dict (the run socket's layout message)."""
    return dict(RunSerializer(run).data)
