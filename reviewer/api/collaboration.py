"""Publishing reviews, the author's side of findings, and the inbox.

/api/sessions/<id>/reviews/, /api/sessions/<id>/turn/, /api/findings/<id>/state/
and /api/notifications/...; what they do is in :mod:`reviewer.review.publishing`
and :mod:`reviewer.review.notifications`.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_view,
    inline_serializer,
)
from rest_framework import generics, serializers
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from reviewer import permissions, selectors
from reviewer.models.collaboration import EmailMode, FindingState, Notification, Review, Verdict
from reviewer.models.review import ReviewSession
from reviewer.representations import FindingSerializer, NotificationSerializer, ReviewSerializer
from reviewer.review import notifications, publishing


def _session_for(request: Request, session_pk: int) -> ReviewSession:
    """The session if the user may see it; 404 otherwise (outsiders learn nothing)."""
    return get_object_or_404(selectors.sessions_visible_to(request.user), pk=session_pk)


class PublishSerializer(serializers.Serializer):
    """Publish every draft of yours in the session, with a verdict."""

    verdict = serializers.ChoiceField(choices=Verdict.choices)
    summary = serializers.CharField(required=False, allow_blank=True, max_length=publishing.SUMMARY_MAX_CHARS,
                                    trim_whitespace=False, help_text="Markdown; optional.")


class FindingStateSerializer(serializers.Serializer):
    """A finding's new state, set by the doc's authors (or ``reopened`` by its reviewer)."""

    state = serializers.ChoiceField(choices=FindingState.choices)
    fixed_revision = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=2**31 - 1,
        help_text="With state fixed: the number of the doc revision that fixes it.",
    )
    reason = serializers.CharField(required=False, allow_blank=True, max_length=publishing.REASON_MAX_CHARS,
                                   help_text="Required with state wont_fix.")


class TurnSerializer(serializers.Serializer):
    """Whose turn it is in a session."""

    turn = serializers.ChoiceField(choices=["reviewers", "authors", "both", "nobody"])
    reviewers_with_drafts = serializers.ListField(child=serializers.CharField())
    authors = serializers.ListField(child=serializers.CharField(),
                                    help_text="The authors, when a published fix_now finding waits for them.")
    unanswered_fix_now = serializers.IntegerField()


class NotificationSettingSerializer(serializers.Serializer):
    """How you are e-mailed about notifications."""

    email = serializers.ChoiceField(choices=EmailMode.choices)


class SessionReviewList(generics.ListCreateAPIView):
    """A session's published reviews, oldest first. POST publishes every draft finding and
    reply of yours in the session at once, with a verdict and an optional summary."""

    serializer_class = ReviewSerializer

    def get_queryset(self) -> QuerySet[Review]:
        session = _session_for(self.request, self.kwargs["session_pk"])
        return session.reviews.select_related("reviewer").order_by("created_at", "id")

    @extend_schema(request=PublishSerializer, responses={201: ReviewSerializer})
    def post(self, request: Request, session_pk: int) -> Response:
        session = _session_for(request, session_pk)
        if not permissions.can_add_finding(request.user, session):
            raise PermissionDenied("Only the session's reviewers publish reviews.")
        body = PublishSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        review = publishing.review_publish(
            session=session, reviewer=request.user, verdict=body.validated_data["verdict"],
            summary=body.validated_data.get("summary", ""),
        )
        return Response(ReviewSerializer(review).data, status=201)


class SessionTurn(APIView):
    """Whose turn it is: reviewers holding unpublished drafts, and the authors while a
    published fix_now finding is open with no answer from them."""

    @extend_schema(responses=TurnSerializer)
    def get(self, request: Request, session_pk: int) -> Response:
        return Response(selectors.session_turn(_session_for(request, session_pk)))


class FindingStateView(APIView):
    """Set a published finding's state: the doc's authors mark it ``open``, ``fixed``
    (optionally with ``fixed_revision``) or ``wont_fix`` (with a ``reason``); its
    reviewer marks it ``reopened``. The reviewer is notified."""

    @extend_schema(request=FindingStateSerializer, responses=FindingSerializer)
    def post(self, request: Request, pk: int) -> Response:
        finding = get_object_or_404(selectors.findings_visible_to(request.user), pk=pk)
        body = FindingStateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        finding = publishing.finding_set_state(
            finding=finding, user=request.user, state=data["state"],
            fixed_revision=data.get("fixed_revision"), reason=data.get("reason", ""),
        )
        return Response(FindingSerializer(finding, context={"request": request}).data)


@extend_schema_view(get=extend_schema(parameters=[
    OpenApiParameter("unread", OpenApiTypes.STR, enum=["", "true", "false"],
                     description="Only unread (true) or read (false) items; empty: all."),
]))
class NotificationList(generics.ListAPIView):
    """Your inbox, newest first. Nobody else's items are ever listed."""

    serializer_class = NotificationSerializer

    def get_queryset(self) -> QuerySet[Notification]:
        qs = selectors.notifications_for(self.request.user)
        unread = self.request.query_params.get("unread")
        if unread == "true":
            qs = qs.filter(read_at__isnull=True)
        elif unread == "false":
            qs = qs.filter(read_at__isnull=False)
        elif unread not in (None, ""):

            raise ValidationError({"unread": ["Use true or false."]})
        return qs


UNREAD = inline_serializer("UnreadCount", {"unread": serializers.IntegerField()})


class NotificationUnread(APIView):
    """How many of your notifications are unread (the top bar's count)."""

    @extend_schema(responses=UNREAD)
    def get(self, request: Request) -> Response:
        return Response({"unread": selectors.unread_count(request.user)})


class NotificationRead(APIView):
    """Mark one of your notifications read; anyone else's answers 404."""

    @extend_schema(request=None, responses=UNREAD)
    def post(self, request: Request, pk: int) -> Response:
        item = get_object_or_404(selectors.notifications_for(request.user), pk=pk)
        notifications.mark_read(user=request.user, notification=item)
        return Response({"unread": selectors.unread_count(request.user)})


class NotificationReadAll(APIView):
    """Mark all your notifications read."""

    @extend_schema(request=None, responses=UNREAD)
    def post(self, request: Request) -> Response:
        notifications.mark_read(user=request.user)
        return Response({"unread": 0})


class NotificationSettings(APIView):
    """How you are e-mailed: ``instant``, ``daily`` (one digest a day) or ``off``."""

    @extend_schema(responses=NotificationSettingSerializer)
    def get(self, request: Request) -> Response:
        return Response({"email": notifications.email_mode(request.user)})

    @extend_schema(request=NotificationSettingSerializer, responses=NotificationSettingSerializer)
    def put(self, request: Request) -> Response:
        body = NotificationSettingSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        setting = notifications.email_mode_set(user=request.user, email=body.validated_data["email"])
        return Response({"email": setting.email})


urlpatterns: list[Any] = [
    path("sessions/<int:session_pk>/reviews/", SessionReviewList.as_view(), name="api-session-reviews"),
    path("sessions/<int:session_pk>/turn/", SessionTurn.as_view(), name="api-session-turn"),
    path("findings/<int:pk>/state/", FindingStateView.as_view(), name="api-finding-state"),
    path("notifications/", NotificationList.as_view(), name="api-notifications"),
    path("notifications/unread/", NotificationUnread.as_view(), name="api-notifications-unread"),
    path("notifications/read-all/", NotificationReadAll.as_view(), name="api-notifications-read-all"),
    path("notifications/settings/", NotificationSettings.as_view(), name="api-notification-settings"),
    path("notifications/<int:pk>/read/", NotificationRead.as_view(), name="api-notification-read"),
]
