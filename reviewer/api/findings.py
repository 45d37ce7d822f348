"""Findings: /api/sessions/<id>/findings/, /api/findings/<id>/ and replies."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Q, QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import generics
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from reviewer import permissions, selectors
from reviewer.api.serializers import FindingsReorderSerializer
from reviewer.models.review import (
    Finding,
    FindingReply,
    FindingStatus,
    ReviewPass,
    ReviewSession,
    Severity,
)
from reviewer.representations import FindingReplySerializer, FindingSerializer
from reviewer.review import services
from reviewer.review.duplicates import duplicates_in_session
from reviewer.text.anchoring import Selection

# The model's field, as the API calls it, in error answers.
RENAME = {"review_pass": "pass"}

# An empty value is no filter (``?pass=`` lists every pass), as a form sends an unset choice.
FILTERS = [
    OpenApiParameter("pass", OpenApiTypes.STR, enum=["", *ReviewPass.values],
                     description="Only this pass (empty: every pass)."),
    OpenApiParameter("severity", OpenApiTypes.STR, enum=["", *Severity.values],
                     description="Only this bucket (empty: every bucket)."),
    OpenApiParameter("status", OpenApiTypes.STR, enum=["", *FindingStatus.values],
                     description="Only this status (empty: every status)."),
    OpenApiParameter("author", OpenApiTypes.STR, description="Only findings by this username."),
    OpenApiParameter("orphaned", OpenApiTypes.STR, enum=["", "true", "false"],
                     description="Only findings whose quote is (true) or is not (false) in the latest revision."),
]


def _session_for(request: Request, session_pk: int) -> ReviewSession:
    """The session if the user may see it; 404 otherwise (outsiders learn nothing)."""
    return get_object_or_404(selectors.sessions_visible_to(request.user), pk=session_pk)


def _choice_filter(params: Any, name: str, allowed: list[str]) -> str | None:
    value = params.get(name)
    if value is None or value == "":
        return None
    if value not in allowed:
        raise ValidationError({name: [f"Unknown value {value!r}; use one of {', '.join(allowed)}."]})
    return value


def _finding_fields(data: dict[str, Any]) -> dict[str, Any]:
    """Validated serializer data as the services' keyword arguments."""
    fields = {k: v for k, v in data.items() if k not in {"version"}}
    if "selection" in fields:
        fields["selection"] = Selection(**fields["selection"])
    return fields


@extend_schema_view(get=extend_schema(parameters=FILTERS))
class SessionFindingList(generics.ListCreateAPIView):
    """A session's findings in report order (fix now, clarify, mention; then position).
    Participants add findings; the doc's latest revision is where the quote is anchored.
    A new finding is a draft (``draft: true``) seen by its author alone until they
    publish their review, unless the session files directly (``file_directly``)."""

    serializer_class = FindingSerializer
    error_field_names = RENAME

    def get_queryset(self) -> QuerySet[Finding]:
        session = _session_for(self.request, self.kwargs["session_pk"])
        # Counted in the list's one query, not once per finding; drafts are their author's alone.
        user = self.request.user
        seen = Q(replies__published_at__isnull=False) | Q(replies__author=user)
        qs = selectors.published_or_own(session.findings.all(), user).select_related(
            "author", "revision", "publication"
        ).annotate(reply_total=Count("replies", filter=seen))
        params = self.request.query_params
        if (value := _choice_filter(params, "pass", ReviewPass.values)) is not None:
            qs = qs.filter(review_pass=value)
        if (value := _choice_filter(params, "severity", Severity.values)) is not None:
            qs = qs.filter(severity=value)
        if (value := _choice_filter(params, "status", FindingStatus.values)) is not None:
            qs = qs.filter(status=value)
        if params.get("author"):
            qs = qs.filter(author__username=params["author"])
        if (value := _choice_filter(params, "orphaned", ["true", "false"])) is not None:
            qs = qs.filter(orphaned=value == "true")
        return selectors.findings_in_report_order(qs)

    def get_serializer_context(self) -> dict[str, Any]:
        context = super().get_serializer_context()
        if self.request.method == "GET":
            # Near-duplicates worked out once for the page, not once per finding.
            context["duplicates"] = duplicates_in_session(self.kwargs["session_pk"])
        return context

    def perform_create(self, serializer: FindingSerializer) -> None:
        session = _session_for(self.request, self.kwargs["session_pk"])
        if not permissions.can_add_finding(self.request.user, session):
            raise PermissionDenied("Only the session's participants add findings.")
        serializer.instance = services.finding_create(
            session=session, author=self.request.user, **_finding_fields(serializer.validated_data)
        )


class SessionFindingReorder(APIView):
    """The rank pass: put one bucket's findings in order (the session's owner)."""

    @extend_schema(request=FindingsReorderSerializer, responses=FindingSerializer(many=True))
    def post(self, request: Request, session_pk: int) -> Response:
        session = _session_for(request, session_pk)
        if not permissions.can_manage_session(request.user, session):
            raise PermissionDenied("Only the session's owner ranks its findings.")
        body = FindingsReorderSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        ordered = services.findings_reorder(
            session=session, severity=body.validated_data["severity"], ordered_ids=body.validated_data["ids"],
            user=request.user,
        )
        return Response(FindingSerializer(ordered, many=True, context={"request": request}).data)


@extend_schema_view(
    delete=extend_schema(
        parameters=[OpenApiParameter("version", OpenApiTypes.INT, description="Refuse (409) unless current.")]
    )
)
class FindingDetail(generics.RetrieveUpdateDestroyAPIView):
    """One finding. Only its author changes or deletes it; an update must carry the
    ``version`` it was read at, and a stale one answers 409 with the current version."""

    serializer_class = FindingSerializer
    error_field_names = RENAME

    def get_queryset(self) -> QuerySet[Finding]:
        return selectors.findings_visible_to(self.request.user).select_related("author", "revision", "publication")

    def perform_update(self, serializer: FindingSerializer) -> None:
        finding = serializer.instance
        if not permissions.can_edit_finding(self.request.user, finding):
            raise PermissionDenied("Only the finding's author changes it.")
        data = dict(serializer.validated_data)
        if "version" not in data:
            raise ValidationError({"version": ["Send the version you read; it guards against overwriting."]})
        version = data.pop("version")
        serializer.instance = services.finding_update(finding=finding, version=version, **_finding_fields(data))

    def perform_destroy(self, instance: Finding) -> None:
        if not permissions.can_edit_finding(self.request.user, instance):
            raise PermissionDenied("Only the finding's author deletes it.")
        raw = self.request.query_params.get("version")
        version = None
        if raw not in (None, ""):
            try:
                version = int(raw)
            except ValueError:
                raise ValidationError({"version": ["A whole number."]}) from None
        services.finding_delete(finding=instance, version=version)


class FindingReplyList(generics.ListCreateAPIView):
    """A finding's discussion thread, oldest first. Participants and the doc's authors
    reply; a reviewer's reply is a draft, seen by them alone, until they publish their review."""

    serializer_class = FindingReplySerializer

    def _finding(self) -> Finding:
        return get_object_or_404(selectors.findings_visible_to(self.request.user), pk=self.kwargs["pk"])

    def get_queryset(self) -> QuerySet[FindingReply]:
        replies = self._finding().replies.select_related("author").order_by("created_at", "id")
        return selectors.published_or_own(replies, self.request.user)

    def perform_create(self, serializer: FindingReplySerializer) -> None:
        finding = self._finding()
        if not permissions.can_reply(self.request.user, finding.session):
            raise PermissionDenied("Only the session's participants and the doc's authors reply.")
        serializer.instance = services.reply_create(
            finding=finding, author=self.request.user, body=serializer.validated_data["body"]
        )


__all__ = ["FindingDetail", "FindingReplyList", "SessionFindingList", "SessionFindingReorder"]
