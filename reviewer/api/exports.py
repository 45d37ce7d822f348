"""Exports of a session's findings, and the JSON-LD context they use.

One view serves every format of :mod:`reviewer.exports.registry`, with a renderer per
format chosen by the URL's suffix (``export.md``, ``export.csv`` ...), as DRF intends;
a refusal (a session the user cannot see) is answered in JSON whatever the format.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from reviewer import selectors
from reviewer.exports.registry import FORMATS, ExportFormat
from reviewer.exports.web_annotations import context_document


class ExportRenderer(BaseRenderer):
    """Renders a session (the view's data) in one export format."""

    export: ExportFormat

    def render(self, data: Any, accepted_media_type: str | None = None,
               renderer_context: dict[str, Any] | None = None) -> bytes:
        context = renderer_context or {}
        request, response = context["request"], context["response"]
        response["Content-Disposition"] = f'inline; filename="review-{data.pk}.{self.format}"'
        return self.export.render(data, request.build_absolute_uri).encode("utf-8")


def renderer_for(export: ExportFormat) -> type[ExportRenderer]:
    """The renderer class of one export format."""
    attrs = {"export": export, "format": export.suffix, "media_type": export.media_type, "charset": export.charset}
    return type(f"{export.suffix.title()}ExportRenderer", (ExportRenderer,), attrs)


RENDERERS: dict[str, type[ExportRenderer]] = {f.suffix: renderer_for(f) for f in FORMATS}


class SessionExport(APIView):
    """The session's findings in one export format (the URL's suffix)."""

    renderer_classes = list(RENDERERS.values())

    @extend_schema(
        description=" ".join(f"`export.{f.suffix}`: {f.description}" for f in FORMATS),
        responses={(200, f.media_type): (OpenApiTypes.OBJECT if f.json else OpenApiResponse(response=OpenApiTypes.STR))
                   for f in FORMATS},
    )
    def get(self, request: Request, pk: int, format: str) -> Response:
        return Response(get_object_or_404(selectors.sessions_visible_to(request.user), pk=pk))

    def perform_content_negotiation(self, request: Request, force: bool = False) -> tuple[BaseRenderer, str]:
        """The format is the URL's, whatever the Accept header asks for."""
        renderer = RENDERERS[self.kwargs["format"]]()
        return renderer, renderer.media_type

    def handle_exception(self, exc: Exception) -> Response:
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return super().handle_exception(exc)


class AnnotationContext(APIView):
    """The JSON-LD @context of our terms (pass, severity, rank ...) used by the exports."""

    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]

    @extend_schema(responses={(200, "application/ld+json"): OpenApiTypes.OBJECT})
    def get(self, request: Request) -> HttpResponse:
        data = context_document(request.build_absolute_uri(request.path))
        return HttpResponse(json.dumps(data, indent=2), content_type="application/ld+json")
