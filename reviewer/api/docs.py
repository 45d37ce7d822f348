"""/api/docs/: design docs and their revisions."""

from __future__ import annotations

from typing import Any

from django.db.models import OuterRef, Prefetch, ProtectedError, QuerySet, Subquery
from django.db.models.functions import Length
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import permissions as drf_permissions
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from reviewer import permissions, selectors
from reviewer.api.serializers import (
    DesignDocSerializer,
    DesignDocSummarySerializer,
    DocRevisionSerializer,
    DocRevisionSummarySerializer,
)
from reviewer.errors import Conflict
from reviewer.models.review import DesignDoc, DocRevision, Finding, FindingStatus, ReviewSession
from reviewer.review import services


class DesignDocViewSet(viewsets.ModelViewSet):
    """Design docs you own or review. Every change of title or body is a new revision;
    the open findings on the doc move to it, and those that cannot be placed are
    listed in ``orphaned_findings``."""

    serializer_class = DesignDocSerializer
    permission_classes = [drf_permissions.IsAuthenticated, permissions.IsOwnerOrReadOnly]

    def get_queryset(self) -> QuerySet[DesignDoc]:
        # The latest revision number and the orphans come with a fixed number
        # of queries, not one or two per doc.
        user = self.request.user
        latest = DocRevision.objects.filter(doc=OuterRef("pk")).order_by("-number")
        orphans = Finding.objects.filter(status=FindingStatus.OPEN, orphaned=True).order_by("id")
        sessions = ReviewSession.objects.filter(
            pk__in=selectors.sessions_visible_to(user).values("pk")
        ).order_by("pk").prefetch_related(Prefetch("findings", queryset=orphans, to_attr="orphans"))
        return (
            selectors.docs_visible_to(user)
            .select_related("owner")
            .annotate(latest_revision_number=Subquery(latest.values("number")[:1]))
            .prefetch_related(Prefetch("sessions", queryset=sessions, to_attr="visible_sessions"))
        )

    def get_serializer_class(self) -> type[DesignDocSerializer]:
        # Lists leave bodies out: a page of large docs would be megabytes.
        return DesignDocSummarySerializer if self.action == "list" else super().get_serializer_class()

    def perform_create(self, serializer: DesignDocSerializer) -> None:
        data = serializer.validated_data
        serializer.instance = services.doc_create(
            owner=self.request.user, title=data["title"], body=data.get("body", "")
        )

    def perform_update(self, serializer: DesignDocSerializer) -> None:
        data = serializer.validated_data
        result = services.doc_revise(
            doc=serializer.instance,
            author=self.request.user,
            title=data.get("title"),
            body=data.get("body"),
            base_revision=data.get("base_revision"),
        )
        serializer.instance = result.revision.doc

    def perform_destroy(self, instance: DesignDoc) -> None:
        try:
            instance.delete()
        except ProtectedError:
            raise Conflict(
                "The doc has review sessions or findings; delete those first."
            ) from None

    @extend_schema(responses=DocRevisionSummarySerializer(many=True))
    @action(detail=True, methods=["get"], serializer_class=DocRevisionSummarySerializer)
    def revisions(self, request: Request, pk: Any = None) -> Response:
        """The doc's revisions, oldest first, without their bodies (read one revision for its text)."""
        doc = self.get_object()
        revisions = (doc.revisions.select_related("author").defer("body")
                     .annotate(body_chars=Length("body")).order_by("number"))
        page = self.paginate_queryset(revisions)
        return self.get_paginated_response(DocRevisionSummarySerializer(page, many=True).data)

    @extend_schema(responses=DocRevisionSerializer)
    @action(
        detail=True,
        methods=["get"],
        url_path=r"revisions/(?P<number>[0-9]+)",
        serializer_class=DocRevisionSerializer,
    )
    def revision(self, request: Request, pk: Any = None, number: str = "") -> Response:
        """One revision of the doc, by number (the target of exported annotations)."""
        doc = self.get_object()
        revision = get_object_or_404(doc.revisions.select_related("author"), number=int(number))
        return Response(DocRevisionSerializer(revision).data)
