"""Docs and fleet configs as the API shows and takes them, and the API's request bodies.

Findings, replies, sessions, runs and sweeps, which live events and exports
show too, are in :mod:`reviewer.representations`.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from reviewer import selectors
from reviewer.fleets.traces import uploaded_trace_name
from reviewer.models.review import (
    DesignDoc,
    DocRevision,
    Finding,
    FleetConfig,
    FleetConfigVersion,
)
from reviewer.representations import VisibleToRequestUser, username_or_none
from reviewer.review.services import scenario_dict_to_toml, validate_scenario_toml
from reviewer.text.markdown import render_markdown

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
        return username_or_none(obj.author)


class DocRevisionSummarySerializer(DocRevisionSerializer):
    """A revision in a list: its size instead of its body (read one revision for the text)."""

    chars = serializers.SerializerMethodField()

    class Meta(DocRevisionSerializer.Meta):
        fields = ["number", "title", "chars", "author", "created_at"]

    def get_chars(self, obj: DocRevision) -> int:
        return int(getattr(obj, "body_chars", None) or len(obj.body))


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
    reanchoring = serializers.SerializerMethodField(
        help_text="Moving the open findings onto the latest revision: status (pending, done, superseded), "
                  "done and total findings. While pending, findings not moved yet have anchor_pending."
    )

    class Meta:
        model = DesignDoc
        fields = [
            "id", "title", "body", "body_html", "owner", "revision", "base_revision",
            "orphaned_findings", "reanchoring", "created_at", "updated_at",
        ]

    @extend_schema_field(serializers.DictField())
    def get_reanchoring(self, obj: DesignDoc) -> dict[str, Any]:
        return selectors.doc_reanchoring(obj)

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
        fields = ["id", "number", "toml", "scenario", "provenance", "author", "created_at"]

    def get_author(self, obj: FleetConfigVersion) -> str | None:
        return username_or_none(obj.author)


class _ProvenanceField(serializers.JSONField):
    """A fleet config's provenance marks: those of its latest version, annotated by the
    API's list query (``latest_provenance``), else read."""

    def get_attribute(self, instance: FleetConfig) -> Any:
        if hasattr(instance, "latest_provenance"):
            return instance.latest_provenance or {}
        return instance.provenance


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
    trace = serializers.SerializerMethodField(
        help_text="The file name of the uploaded request trace the scenario replays, or null."
    )
    # Read and written: answers carry the latest version's marks.
    provenance = _ProvenanceField(
        required=False,
        help_text='Where each figure comes from, by key path: {"traffic.qps": {"source": "doc", "quote": '
                  '"..."}, "worker.decode_seq_s": {"source": "measured", "note": "..."}, "worker.mbu": '
                  '{"source": "assumed"}}; unlisted figures are unmarked. Left out '
                  "on a save, the marks of the keys the new scenario still has are kept.",
    )

    class Meta:
        model = FleetConfig
        fields = [
            "id", "name", "doc", "toml", "scenario", "owner", "version", "version_id",
            "trace", "provenance", "created_at", "updated_at",
        ]

    def get_owner(self, obj: FleetConfig) -> str:
        return obj.owner.get_username()

    def to_representation(self, instance: FleetConfig) -> dict[str, Any]:
        data = super().to_representation(instance)
        request = self.context.get("request")
        if data.get("doc") is not None and request is not None:
            # A doc the reader no longer sees is not named (see selectors.linked_doc).
            doc = selectors.linked_doc(instance, request.user)
            data["doc"] = doc.pk if doc is not None else None
        return data

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

    def get_trace(self, obj: FleetConfig) -> str | None:
        return uploaded_trace_name(obj)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
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


class TraceUploadSerializer(serializers.Serializer):
    """A request trace for a fleet config, sent as multipart form data."""

    file = serializers.FileField(
        allow_empty_file=True,
        help_text="An Azure LLM inference trace CSV (TIMESTAMP, ContextTokens, GeneratedTokens) "
        "or JSONL (arrival_s, prompt_tokens, output_tokens, optional model); at most "
        "UPLOAD_MAX_BYTES (64 MB unless set).",
    )


class TraceUploadStatusSerializer(serializers.Serializer):
    """Where an uploaded trace's check stands (``reviewer.fleets.traces.trace_upload_representation``)."""

    id = serializers.IntegerField()
    config = serializers.IntegerField()
    name = serializers.CharField()
    size = serializers.IntegerField()
    status = serializers.ChoiceField(choices=["pending", "done", "failed"])
    field = serializers.CharField(allow_null=True, help_text='The field at fault when failed, e.g. "trace".')
    error = serializers.CharField(allow_null=True, help_text="The one-line error naming the fix, when failed.")
    version = serializers.IntegerField(allow_null=True, help_text="The config version that replays it, when done.")
    status_url = serializers.CharField()
    created_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


# --- findings --------------------------------------------------------------


class FindingsReorderSerializer(serializers.Serializer):
    """The rank pass: the order of one bucket's findings."""

    severity = serializers.ChoiceField(choices=["fix_now", "clarify", "mention"])
    ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=2**63 - 1), allow_empty=False, max_length=1000
    )


class DesignDocSummarySerializer(DesignDocSerializer):
    """A doc in a list: everything but its body and its rendering (read the doc for those)."""

    class Meta(DesignDocSerializer.Meta):
        fields = ["id", "title", "owner", "revision", "orphaned_findings", "created_at", "updated_at"]


class FleetCheckSerializer(serializers.Serializer):
    """A scenario to check without saving: ``toml`` text, or a ``scenario`` object."""

    toml = serializers.CharField(required=False, trim_whitespace=False, allow_blank=True)
    scenario = serializers.JSONField(required=False, help_text="The scenario as JSON; used when no toml is given.")
    edits = serializers.JSONField(
        required=False,
        help_text='Changes to apply to toml first, keeping its comments: a list of {"op": "set", "path": '
                  '"traffic.qps", "value": 40}, {"op": "unset", "path": ...}, {"op": "add", "path": "hosts", '
                  '"values": {...}}, {"op": "remove", "path": "hosts[1]"} or {"op": "rename", "path": '
                  '"models.chat", "to": "assistant"}.')


class FleetAcceptFigureSerializer(serializers.Serializer):
    """A figure the doc states, to write into the fleet config with "from the doc" provenance."""

    key = serializers.CharField(max_length=200, help_text='The config key it fits, e.g. "traffic.peak_qps".')
    value = serializers.JSONField(help_text="Its value in the key's unit: a number or a name.")
    quote = serializers.CharField(max_length=1000, help_text="The doc's words it is read from (its sentence).")


class FleetCheckErrorSerializer(serializers.Serializer):
    path = serializers.CharField(help_text='The key path at fault, e.g. "hosts[0].workers[1]"; "" for the whole text.')
    message = serializers.CharField(help_text="The emulator's one-line message, with its fix.")


class FleetCheckResultSerializer(serializers.Serializer):
    """The check's outcome: when valid, the scenario's JSON and TOML forms; else the first error."""

    valid = serializers.BooleanField()
    toml = serializers.CharField(allow_null=True)
    scenario = serializers.JSONField(allow_null=True)
    error = FleetCheckErrorSerializer(allow_null=True)
    form = serializers.JSONField(allow_null=True, required=False,
                                 help_text="The editor's form of the scenario as written: its key groups, each key "
                                           "with its label, unit, value, the value used when left out, and choices.")
