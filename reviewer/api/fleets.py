"""/api/fleets/: fleet configs (emulator scenarios) and their versions."""

from __future__ import annotations

from typing import Any

from django.db.models import JSONField, OuterRef, ProtectedError, QuerySet, Subquery
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import permissions as drf_permissions
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from reviewer import permissions, selectors
from reviewer.api.serializers import (
    FleetAcceptFigureSerializer,
    FleetCheckResultSerializer,
    FleetCheckSerializer,
    FleetConfigSerializer,
    FleetConfigVersionSerializer,
    TraceUploadSerializer,
    TraceUploadStatusSerializer,
)
from reviewer.errors import Conflict
from reviewer.fleets import traces as trace_services
from reviewer.fleets.editor import scenario_check
from reviewer.models.review import FleetConfig, FleetConfigVersion, TraceUpload
from reviewer.review import services


class FleetConfigViewSet(viewsets.ModelViewSet):
    """Fleet configs you own or that your sessions use. A changed scenario is a
    new version; errors name the scenario's key path and the fix."""

    serializer_class = FleetConfigSerializer
    # A TOML problem the model finds is about the toml field.
    error_default_field = "toml"
    permission_classes = [drf_permissions.IsAuthenticated, permissions.IsOwnerOrReadOnly]

    def get_queryset(self) -> QuerySet[FleetConfig]:
        # The latest version's number and id come with the list's one query.
        latest = FleetConfigVersion.objects.filter(config=OuterRef("pk")).order_by("-number")
        return (
            selectors.fleet_configs_visible_to(self.request.user)
            .select_related("owner")
            .annotate(latest_number=Subquery(latest.values("number")[:1]),
                      latest_id=Subquery(latest.values("pk")[:1]),
                      latest_provenance=Subquery(latest.values("provenance")[:1], output_field=JSONField()))
        )

    def perform_create(self, serializer: FleetConfigSerializer) -> None:
        data = serializer.validated_data
        serializer.instance = services.fleet_config_create(
            owner=self.request.user, name=data["name"], toml=data["toml"], doc=data.get("doc"),
            provenance=data.get("provenance"),
        )

    def perform_update(self, serializer: FleetConfigSerializer) -> None:
        data = serializer.validated_data
        serializer.instance = services.fleet_config_save(
            config=serializer.instance,
            author=self.request.user,
            name=data.get("name"),
            toml=data.get("toml"),
            doc=data.get("doc", services.UNCHANGED),
            provenance=data.get("provenance"),
        )

    def perform_destroy(self, instance: FleetConfig) -> None:
        try:
            instance.delete()
        except ProtectedError:
            raise Conflict(
                "Review sessions or emulator runs use this fleet config; remove them first."
            ) from None

    @extend_schema(request=FleetCheckSerializer, responses={200: FleetCheckResultSerializer})
    @action(detail=False, methods=["post"], url_path="check", serializer_class=FleetCheckSerializer)
    def check(self, request: Request) -> Response:
        """Check a scenario without saving it (the fleet editor calls this as you type):
        200 with ``valid``; a valid scenario comes back as JSON and TOML, an invalid one
        with the emulator's first error and its key path."""
        given = FleetCheckSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        return Response(scenario_check(toml=data.get("toml"), scenario=data.get("scenario"), edits=data.get("edits")))

    @extend_schema(request=FleetAcceptFigureSerializer, responses={200: FleetConfigSerializer})
    @action(detail=True, methods=["post"], url_path="accept-figure", serializer_class=FleetAcceptFigureSerializer)
    def accept_figure(self, request: Request, pk: Any = None) -> Response:
        """Write a figure the doc states into the config (a new version): the key set to
        the value, marked "from the doc" with the doc's words. 400 naming the key when
        it cannot be written or the emulator refuses it."""
        config = self.get_object()
        given = FleetAcceptFigureSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        services.fleet_config_accept_figure(config=config, author=request.user, key=data["key"],
                                            value=data["value"], quote=data["quote"])
        fresh = self.get_queryset().get(pk=config.pk)
        return Response(FleetConfigSerializer(fresh, context=self.get_serializer_context()).data)

    @extend_schema(responses=FleetConfigVersionSerializer(many=True))
    @action(detail=True, methods=["get"], serializer_class=FleetConfigVersionSerializer)
    def versions(self, request: Request, pk: Any = None) -> Response:
        """The config's versions, oldest first."""
        config = self.get_object()
        page = self.paginate_queryset(config.versions.select_related("author").order_by("number"))
        return self.get_paginated_response(FleetConfigVersionSerializer(page, many=True).data)

    @extend_schema(
        request={"multipart/form-data": TraceUploadSerializer},
        parameters=[OpenApiParameter("Location", str, OpenApiParameter.HEADER, response=[202],
                                     description="The upload's status URL.")],
        responses={
            200: FleetConfigSerializer,
            202: OpenApiResponse(TraceUploadStatusSerializer,
                                 description="A trace over TRACE_PARSE_INLINE_MAX_BYTES, stored and waiting for "
                                             "its check by a worker (Location: its status URL)."),
            400: OpenApiResponse(description='A bad trace: {"trace": ["<file> line <n>: <field> ...; <fix>"]}'),
            413: OpenApiResponse(description='Over UPLOAD_MAX_BYTES: {"detail": "...", "setting": "UPLOAD_MAX_BYTES"}'),
        },
    )
    # Not named ``trace``: DRF hands each HTTP method to the view's method of that
    # name, so an action called ``trace`` would answer HTTP TRACE, which the CSRF
    # check lets through as safe.
    @action(detail=True, methods=["post"], parser_classes=[MultiPartParser], serializer_class=TraceUploadSerializer,
            url_path="trace", url_name="trace")
    def upload_trace(self, request: Request, pk: Any = None) -> Response:
        """Upload a request trace for the config to replay: a new version whose
        ``traffic.trace`` is the stored file. A small trace is checked at once (200, the
        config); a bigger one is stored and checked by a worker (202, its status URL,
        which then says ``done`` with the version, or ``failed`` with the field and
        error). A bad trace is refused with the line and field at fault, and nothing is saved."""
        config = self.get_object()
        upload = TraceUploadSerializer(data=request.data)
        upload.is_valid(raise_exception=True)
        file = upload.validated_data["file"]
        if not trace_services.trace_parsed_in_request(file):
            pending = trace_services.trace_upload_start(config=config, author=request.user, upload=file)
            body = trace_services.trace_upload_representation(pending)
            return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["status_url"]})
        trace_services.fleet_config_trace_upload(config=config, author=request.user, upload=file)
        fresh = self.get_queryset().get(pk=config.pk)
        return Response(FleetConfigSerializer(fresh, context=self.get_serializer_context()).data)

    @extend_schema(responses={200: TraceUploadStatusSerializer})
    @action(detail=True, methods=["get"], url_path=r"trace/(?P<upload_id>[0-9]+)", serializer_class=None)
    def trace_status(self, request: Request, pk: Any = None, upload_id: Any = None) -> Response:
        """Where an uploaded trace's check by a worker stands: pending, done (the version
        that replays it) or failed (the field at fault and the error naming the fix)."""
        config = self.get_object()
        pending = get_object_or_404(TraceUpload.objects.select_related("version"), config=config, pk=upload_id)
        return Response(trace_services.trace_upload_representation(pending))
