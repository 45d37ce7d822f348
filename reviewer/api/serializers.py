"""How review data looks in the API (and in live events, which reuse it)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from reviewer import selectors
from reviewer.markdown import render_markdown
from reviewer.models.review import (
    DesignDoc,
    DocRevision,
    Finding,
    FindingReply,
    FleetConfig,
    FleetConfigVersion,
    ReviewPass,
    ReviewSession,
)


def _username(user: Any) -> str | None:
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
    """A user given by username."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(slug_field="username", queryset=get_user_model().objects.all(), **kwargs)


# --- docs ------------------------------------------------------------------


class OrphanedFindingSerializer(serializers.ModelSerializer):
    """A finding whose quote is no longer in the doc."""

    class Meta:
        model = Finding
        fields = ["id", "session", "title", "anchor_exact"]


class DocRevisionSerializer(serializers.ModelSerializer):
    """One saved state of a doc."""

    author = serializers.SerializerMethodField()

    class Meta:
        model = DocRevision
        fields = ["number", "title", "body", "author", "created_at"]

    def get_author(self, obj: DocRevision) -> str | None:
        return _username(obj.author)


class DesignDocSerializer(serializers.ModelSerializer):
    """A design doc; writing ``title`` or ``body`` makes a new revision."""

    owner = serializers.SerializerMethodField()
    body_html = serializers.SerializerMethodField()
    revision = serializers.SerializerMethodField()
    base_revision = serializers.IntegerField(
        write_only=True,
        required=False,
        min_value=0,
        help_text="The revision your edit started from; a newer one answers 409.",
    )
    orphaned_findings = serializers.SerializerMethodField()

    class Meta:
        model = DesignDoc
        fields = [
            "id", "title", "body", "body_html", "owner", "revision", "base_revision",
            "orphaned_findings", "created_at", "updated_at",
        ]

    def get_owner(self, obj: DesignDoc) -> str:
        return obj.owner.get_username()

    def get_body_html(self, obj: DesignDoc) -> str:
        return render_markdown(obj.body)

    def get_revision(self, obj: DesignDoc) -> int | None:
        if hasattr(obj, "latest_revision_number"):  # annotated by the API's query
            return obj.latest_revision_number
        latest = obj.latest_revision()
        return latest.number if latest else None

    @extend_schema_field(OrphanedFindingSerializer(many=True))
    def get_orphaned_findings(self, obj: DesignDoc) -> list[dict[str, Any]]:
        if hasattr(obj, "visible_sessions"):  # prefetched by the API's query, sessions in id order
            found = [f for session in obj.visible_sessions for f in session.orphans]
            return OrphanedFindingSerializer(found, many=True).data
        qs = selectors.orphaned_findings(obj)
        request = self.context.get("request")
        if request is not None:
            qs = qs.filter(session__in=selectors.sessions_visible_to(request.user))
        return OrphanedFindingSerializer(qs, many=True).data


# --- fleet configs ---------------------------------------------------------


class FleetConfigVersionSerializer(serializers.ModelSerializer):
    """One saved state of a fleet config."""

    author = serializers.SerializerMethodField()

    class Meta:
        model = FleetConfigVersion
        fields = ["id", "number", "toml", "scenario", "author", "created_at"]

    def get_author(self, obj: FleetConfigVersion) -> str | None:
        return _username(obj.author)


class FleetConfigSerializer(serializers.ModelSerializer):
    """A fleet config; give the scenario as ``toml`` text or as a ``scenario`` object."""

    owner = serializers.SerializerMethodField()
    doc = VisibleToRequestUser(selectors.docs_visible_to, required=False, allow_null=True)
    toml = serializers.CharField(required=False, trim_whitespace=False, allow_blank=True)
    scenario = serializers.JSONField(
        required=False, help_text="The scenario as JSON; used when no toml is given."
    )
    version = serializers.SerializerMethodField()
    version_id = serializers.SerializerMethodField()

    class Meta:
        model = FleetConfig
        fields = [
            "id", "name", "doc", "toml", "scenario", "owner", "version", "version_id",
            "created_at", "updated_at",
        ]

    def get_owner(self, obj: FleetConfig) -> str:
        return obj.owner.get_username()

    def get_version(self, obj: FleetConfig) -> int | None:
        if hasattr(obj, "latest_number"):  # annotated by the API's query
            return obj.latest_number
        latest = obj.latest_version()
        return latest.number if latest else None

    def get_version_id(self, obj: FleetConfig) -> int | None:
        if hasattr(obj, "latest_id"):
            return obj.latest_id
        latest = obj.latest_version()
        return latest.pk if latest else None

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        from django.core.exceptions import ValidationError

        from reviewer.services.review import scenario_dict_to_toml, validate_scenario_toml

        scenario = attrs.pop("scenario", None)
        if "toml" not in attrs and scenario is not None:
            if not isinstance(scenario, dict):
                raise serializers.ValidationError({"scenario": ["Give the scenario as an object."]})
            try:
                attrs["toml"] = scenario_dict_to_toml(scenario)
            except ValidationError as exc:
                raise serializers.ValidationError({"scenario": exc.messages}) from None
        if self.instance is None and "toml" not in attrs:
            raise serializers.ValidationError({"toml": ["Give the scenario as toml text or as a scenario object."]})
        if "toml" in attrs:
            try:
                validate_scenario_toml(attrs["toml"])
            except ValidationError as exc:
                raise serializers.ValidationError({"toml": exc.messages}) from None
        return attrs


# --- sessions --------------------------------------------------------------


class ReviewSessionSerializer(serializers.ModelSerializer):
    """A review session; ``reviewers`` are usernames."""

    owner = serializers.SerializerMethodField()
    doc = VisibleToRequestUser(selectors.docs_visible_to)
    fleet_config = VisibleToRequestUser(selectors.fleet_configs_visible_to, required=False, allow_null=True)
    reviewers = UsernameField(many=True, required=False)
    finding_counts = serializers.SerializerMethodField()

    class Meta:
        model = ReviewSession
        fields = [
            "id", "title", "doc", "fleet_config", "owner", "reviewers", "current_pass", "status",
            "finding_counts", "created_at", "updated_at",
        ]

    def get_owner(self, obj: ReviewSession) -> str:
        return obj.owner.get_username()

    def get_finding_counts(self, obj: ReviewSession) -> dict[str, int]:
        names = ("fix_now", "clarify", "mention", "orphaned")
        if hasattr(obj, "findings_orphaned"):  # annotated by the list's query
            return {name: getattr(obj, f"findings_{name}") for name in names}
        counts = dict.fromkeys(names, 0)
        for severity, orphaned in obj.findings.exclude(status="dropped").values_list("severity", "orphaned"):
            counts[severity] += 1
            counts["orphaned"] += int(orphaned)
        return counts


# --- findings --------------------------------------------------------------


class FindingReplySerializer(serializers.ModelSerializer):
    """A reply in a finding's thread."""

    author = serializers.SerializerMethodField()
    body_html = serializers.SerializerMethodField()

    class Meta:
        model = FindingReply
        fields = ["id", "finding", "author", "body", "body_html", "created_at"]
        read_only_fields = ["finding"]

    def get_author(self, obj: FindingReply) -> str:
        return obj.author.get_username()

    def get_body_html(self, obj: FindingReply) -> str:
        return render_markdown(obj.body)


class FindingSerializer(serializers.ModelSerializer):
    """A finding. ``pass`` is the review pass; writes must carry the current ``version``.

    The anchor may be given as a quote (``anchor_exact``, with optional
    ``anchor_prefix``/``anchor_suffix`` to pick among repeats), as offsets
    (``anchor_start``/``anchor_end``), or both; it is taken on the doc's latest
    revision and answered with all five filled in.
    """

    author = serializers.SerializerMethodField()
    body_html = serializers.SerializerMethodField()
    revision = serializers.SerializerMethodField()
    reply_count = serializers.SerializerMethodField()
    version = serializers.IntegerField(
        required=False, min_value=1, help_text="Required on update: the version you read."
    )
    position = serializers.IntegerField(required=False, min_value=0, max_value=1_000_000)
    anchor_start = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=10_000_000)
    anchor_end = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=10_000_000)
    evidence_run_id = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=2**63 - 1
    )
    evidence_t_from_s = serializers.FloatField(required=False, allow_null=True, min_value=0, max_value=1e9)
    evidence_t_to_s = serializers.FloatField(required=False, allow_null=True, min_value=0, max_value=1e9)

    class Meta:
        model = Finding
        fields = [
            "id", "session", "author", "title", "body", "body_html", "severity", "position",
            "status", "anchor_exact", "anchor_prefix", "anchor_suffix", "anchor_start",
            "anchor_end", "revision", "orphaned", "trace_hop", "evidence_run_id",
            "evidence_t_from_s", "evidence_t_to_s", "evidence_metric", "reply_count",
            "created_at", "updated_at", "version",
        ]
        read_only_fields = ["session", "orphaned"]
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

    def get_reply_count(self, obj: Finding) -> int:
        # Lists annotate the count; a single finding counts its replies.
        annotated = getattr(obj, "reply_total", None)
        return obj.replies.count() if annotated is None else annotated


class FindingsReorderSerializer(serializers.Serializer):
    """The rank pass: the order of one bucket's findings."""

    severity = serializers.ChoiceField(choices=["fix_now", "clarify", "mention"])
    ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=2**63 - 1), allow_empty=False, max_length=1000
    )


def finding_representation(finding: Finding) -> dict[str, Any]:
    """The API representation of a finding as a plain dict (for live events and exports)."""
    data = dict(FindingSerializer(finding).data)
    return data
