"""Exports of a session's findings, and the JSON-LD context they use."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.views import APIView

from reviewer import selectors
from reviewer.exports import formats as exports
from reviewer.models.review import ReviewSession


def _session(request: Request, pk: int) -> ReviewSession:
    return get_object_or_404(selectors.sessions_visible_to(request.user), pk=pk)


def _attachment(body: str, content_type: str, filename: str) -> HttpResponse:
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'inline; filename="{filename}"'
    return response


class ExportJSON(APIView):
    """The session's findings, with replies, as JSON."""

    @extend_schema(responses={(200, "application/json"): OpenApiTypes.OBJECT})
    def get(self, request: Request, pk: int) -> HttpResponse:
        session = _session(request, pk)
        body = json.dumps(exports.export_json(session), indent=2, ensure_ascii=False)
        return _attachment(body, "application/json", f"review-{pk}.json")


class ExportCSV(APIView):
    """The session's findings as CSV, one row per finding."""

    @extend_schema(responses={(200, "text/csv"): OpenApiResponse(response=OpenApiTypes.STR)})
    def get(self, request: Request, pk: int) -> HttpResponse:
        session = _session(request, pk)
        return _attachment(exports.export_csv(session), "text/csv; charset=utf-8", f"review-{pk}.csv")


class ExportMarkdown(APIView):
    """The review report in Markdown: restatement, numbers headline, then the buckets."""

    @extend_schema(responses={(200, "text/markdown"): OpenApiResponse(response=OpenApiTypes.STR)})
    def get(self, request: Request, pk: int) -> HttpResponse:
        session = _session(request, pk)
        return _attachment(exports.export_markdown(session), "text/markdown; charset=utf-8", f"review-{pk}.md")


class ExportJSONLD(APIView):
    """The findings as W3C Web Annotations (one per finding, motivation "assessing")."""

    @extend_schema(responses={(200, "application/ld+json"): OpenApiTypes.OBJECT})
    def get(self, request: Request, pk: int) -> HttpResponse:
        session = _session(request, pk)
        data = exports.export_jsonld(session, request.build_absolute_uri)
        body = json.dumps(data, indent=2, ensure_ascii=False)
        return _attachment(body, "application/ld+json", f"review-{pk}.jsonld")


class AnnotationContext(APIView):
    """The JSON-LD @context of our terms (pass, severity, rank ...) used by the exports."""

    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]

    @extend_schema(responses={(200, "application/ld+json"): OpenApiTypes.OBJECT})
    def get(self, request: Request) -> HttpResponse:
        data = exports.context_document(request.build_absolute_uri(request.path))
        return HttpResponse(json.dumps(data, indent=2), content_type="application/ld+json")
