"""The review document, the revision diff and near-duplicate findings:

- /api/sessions/<id>/document/: the session's opening, strengths and restatement;
- /api/sessions/<id>/diff/?from=&to=: two revisions of the doc with the findings on each;
- /api/sessions/<id>/findings/duplicates/: groups of near-duplicate findings;
- /api/findings/<id>/merge/: fold a finding into another, keeping both threads.

A session the user may not see answers 404 on all of them.
"""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from reviewer import permissions, selectors
from reviewer.models.review import Finding, ReviewSession
from reviewer.representations import FindingSerializer, ReviewDocumentSerializer
from reviewer.review import revision_diff
from reviewer.review.document import review_document_update
from reviewer.review.duplicates import duplicate_groups
from reviewer.review.merge import finding_merge


def _session_for(request: Request, pk: int) -> ReviewSession:
    """The session if the user may see it; 404 otherwise (outsiders learn nothing)."""
    return get_object_or_404(selectors.sessions_visible_to(request.user), pk=pk)


class ReviewDocumentView(APIView):
    """The session's review document: the opening (the verdict in a sentence and the
    things to fix now), what the doc gets right, and the restatement. Participants
    change it; a change must carry the ``version`` it was read at (409 with the
    current version otherwise), and viewers of the session hear of it live."""

    error_field_names = {"document_version": "version"}

    @extend_schema(responses=ReviewDocumentSerializer)
    def get(self, request: Request, pk: int) -> Response:
        return Response(ReviewDocumentSerializer(_session_for(request, pk)).data)

    @extend_schema(request=ReviewDocumentSerializer, responses=ReviewDocumentSerializer)
    def patch(self, request: Request, pk: int) -> Response:
        session = _session_for(request, pk)
        if not permissions.can_add_finding(request.user, session):
            raise PermissionDenied("Only the session's participants write its review document.")
        body = ReviewDocumentSerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        if "document_version" not in data:
            raise serializers.ValidationError({"version": ["Send the version you read; it guards against overwriting."]})
        session = review_document_update(
            session=session,
            author=request.user,
            version=data["document_version"],
            opening=data.get("opening"),
            strengths=data.get("strengths"),
            restatement=data.get("restatement"),
        )
        return Response(ReviewDocumentSerializer(session).data)


DIFF_PARAMETERS = [
    OpenApiParameter("from", OpenApiTypes.INT, description=(
        "The older revision's number. Left out: the revision that was the doc's latest when you last "
        "filed a finding or reply in the session (\"changes since my last review\").")),
    OpenApiParameter("to", OpenApiTypes.INT, description="The newer revision's number. Left out: the latest."),
]


class SessionDiff(APIView):
    """Two revisions of the session's doc compared sentence by sentence, with each
    finding placed on each side: ``anchored`` on the revision it was made on or moved
    to, ``re-anchored`` when its quote was found in the other one, absent when not.
    Unchanged runs are folded (``skip`` rows). Long docs are compared up to
    DIFF_MAX_CHARS / DIFF_MAX_SEGMENTS and the answer says so in ``notices``."""

    @extend_schema(parameters=DIFF_PARAMETERS, responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, pk: int) -> Response:
        session = _session_for(request, pk)
        old, new, how = revision_diff.resolve_revisions(
            session, request.user, request.query_params.get("from"), request.query_params.get("to")
        )
        return Response(revision_diff.session_diff(session, old, new, how_from=how, viewer=request.user))


class SessionDuplicates(APIView):
    """Groups of near-duplicate findings in the session: the same pass and either the
    same quote or the same title and text. Findings already merged are left out."""

    @extend_schema(responses=inline_serializer("DuplicateGroups", {
        "groups": serializers.ListField(child=serializers.ListField(child=serializers.IntegerField())),
    }))
    def get(self, request: Request, session_pk: int) -> Response:
        session = _session_for(request, session_pk)
        return Response({"groups": duplicate_groups(session)})


class FindingMergeSerializer(serializers.Serializer):
    """Merge this finding into ``into``; ``version`` (optional) guards against a stale read."""

    into = serializers.IntegerField(min_value=1, max_value=2**63 - 1, help_text="The finding that survives.")
    version = serializers.IntegerField(required=False, min_value=1, max_value=2**31 - 1,
                                       help_text="This finding's version as you read it.")


class FindingMerge(APIView):
    """Merge a near-duplicate into another finding of the same session. The finding is
    kept, marked ``merged_into``, with its evidence; its replies move under the
    surviving finding. The session's owner, or the author of both findings, merges."""

    @extend_schema(request=FindingMergeSerializer, responses=FindingSerializer)
    def post(self, request: Request, pk: int) -> Response:
        visible = selectors.findings_visible_to(request.user)
        finding = get_object_or_404(visible.select_related("session"), pk=pk)
        body = FindingMergeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        into = visible.filter(pk=body.validated_data["into"], session_id=finding.session_id).first()
        if into is None:
            raise serializers.ValidationError({"into": ["Name another finding of the same session."]})
        if not permissions.can_merge_findings(request.user, finding, into):
            raise PermissionDenied("Only the session's owner, or the author of both findings, merges them.")
        survivor = finding_merge(finding=finding, into=into, version=body.validated_data.get("version"))
        return Response(FindingSerializer(Finding.objects.select_related("author", "revision").get(pk=survivor.pk),
                                          context={"request": request}).data)


__all__: list[Any] = ["FindingMerge", "ReviewDocumentView", "SessionDiff", "SessionDuplicates"]
