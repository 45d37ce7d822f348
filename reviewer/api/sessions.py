"""/api/sessions/: review sessions and their participants."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, ProtectedError, Q, QuerySet
from rest_framework import viewsets
from rest_framework.exceptions import PermissionDenied, ValidationError

from reviewer import permissions, selectors
from reviewer.errors import Conflict
from reviewer.models.review import ReviewSession
from reviewer.representations import ReviewSessionSerializer
from reviewer.review import services


def finding_count_annotations() -> dict[str, Count]:
    """Counts of a session's findings not dropped, per bucket and orphaned, for one list query.

    Distinct, because the visibility filter joins the reviewers and would repeat each finding.
    """
    live = ~Q(findings__status="dropped") & Q(findings__published_at__isnull=False)
    counts = {
        f"findings_{severity}": Count("findings", filter=live & Q(findings__severity=severity), distinct=True)
        for severity in ("fix_now", "clarify", "mention")
    }
    counts["findings_orphaned"] = Count("findings", filter=live & Q(findings__orphaned=True), distinct=True)
    return counts


def _same(session: ReviewSession, name: str, value: Any) -> bool:
    """Whether ``value`` is what the session already holds for field ``name``."""
    if name in ("reviewers", "authors"):
        return {u.pk for u in value} == set(getattr(session, name).values_list("pk", flat=True))
    return getattr(session, name) == value


class ReviewSessionViewSet(viewsets.ModelViewSet):
    """Review sessions you take part in (staff see all). Participants move the
    session between passes (``current_pass``); the owner changes the rest and the
    participants. Someone else's session answers 404."""

    serializer_class = ReviewSessionSerializer

    def get_queryset(self) -> QuerySet[ReviewSession]:
        return (
            selectors.sessions_visible_to(self.request.user)
            .select_related("owner", "doc", "fleet_config")
            .prefetch_related("reviewers", "authors")
            .annotate(**finding_count_annotations())
            # Aggregating queries drop Meta.ordering; pages need a fixed order.
            .order_by("-updated_at", "-id")
        )

    def _check_shareable(self, data: dict[str, Any]) -> None:
        """Refuse a doc or fleet config the user sees only as someone else's reviewer."""
        user = self.request.user
        if "doc" in data and not permissions.can_share(user, data["doc"]):
            raise PermissionDenied("Only the doc's owner opens review sessions on it.")
        fleet = data.get("fleet_config")
        if fleet is not None and not permissions.can_share(user, fleet):
            raise PermissionDenied("Only the fleet config's owner puts it in a review session.")

    def perform_create(self, serializer: ReviewSessionSerializer) -> None:
        data = serializer.validated_data
        self._check_shareable(data)
        serializer.instance = services.session_create(
            owner=self.request.user,
            doc=data["doc"],
            fleet_config=data.get("fleet_config"),
            title=data.get("title", ""),
            reviewers=data.get("reviewers", []),
            authors=data.get("authors", []),
            file_directly=data.get("file_directly", False),
        )

    def perform_update(self, serializer: ReviewSessionSerializer) -> None:
        session = serializer.instance
        data = serializer.validated_data
        if not permissions.can_manage_session(self.request.user, session):
            # Reviewers move the session between passes; the rest is the owner's.
            changed = {name for name, value in data.items() if not _same(session, name, value)}
            if changed - {"current_pass"}:
                raise PermissionDenied(
                    "Only the session's owner changes its title, status, fleet config and participants."
                )
            if changed and not permissions.can_change_pass(self.request.user, session):
                raise PermissionDenied("Only the session's owner and reviewers move it to another pass.")
        if "doc" in data and data["doc"] != session.doc:

            raise ValidationError({"doc": ["A session's doc cannot be changed; open a new session."]})
        if "fleet_config" in data and data["fleet_config"] != session.fleet_config:
            self._check_shareable({"fleet_config": data["fleet_config"]})
        serializer.instance = services.session_update(
            session=session,
            title=data.get("title"),
            fleet_config=data.get("fleet_config", services.UNCHANGED),
            current_pass=data.get("current_pass"),
            status=data.get("status"),
            reviewers=data.get("reviewers"),
            authors=data.get("authors"),
            file_directly=data.get("file_directly"),
        )

    def perform_destroy(self, instance: ReviewSession) -> None:
        if not permissions.can_manage_session(self.request.user, instance):
            raise PermissionDenied("Only the session's owner deletes it.")
        try:
            services.session_delete(session=instance)
        except ProtectedError:
            raise Conflict("Emulator runs refer to this session; delete them first.") from None
