"""Who may see and change review data.

Sessions are visible to their participants (the owner and the reviewers) and
to staff; anything else answers 404, so outsiders cannot even learn that a
session exists. Docs and fleet configs are visible to their owner, to the
participants of sessions that use them, and to staff.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet
from rest_framework.permissions import BasePermission

from reviewer.models.review import DesignDoc, Finding, FleetConfig, ReviewSession


def sessions_visible_to(user: Any) -> QuerySet[ReviewSession]:
    """Review sessions ``user`` takes part in (all of them for staff)."""
    qs = ReviewSession.objects.all()
    if not getattr(user, "is_authenticated", False):
        return qs.none()
    if user.is_staff:
        return qs
    return qs.filter(Q(owner=user) | Q(reviewers=user)).distinct()


def _owned_or_in_a_session(qs: QuerySet[Any], user: Any) -> QuerySet[Any]:
    """Rows of ``qs`` (docs or fleet configs) that ``user`` owns or meets in a session."""
    if not getattr(user, "is_authenticated", False):
        return qs.none()
    if user.is_staff:
        return qs
    return qs.filter(
        Q(owner=user) | Q(sessions__owner=user) | Q(sessions__reviewers=user)
    ).distinct()


def docs_visible_to(user: Any) -> QuerySet[DesignDoc]:
    """Docs ``user`` owns or reviews in a session (all of them for staff)."""
    return _owned_or_in_a_session(DesignDoc.objects.all(), user)


def fleet_configs_visible_to(user: Any) -> QuerySet[FleetConfig]:
    """Fleet configs ``user`` owns or that a session of theirs uses (all for staff)."""
    return _owned_or_in_a_session(FleetConfig.objects.all(), user)


def findings_visible_to(user: Any) -> QuerySet[Finding]:
    """Findings of the sessions ``user`` may see."""
    return Finding.objects.filter(session__in=sessions_visible_to(user))


def is_participant(user: Any, session: ReviewSession) -> bool:
    """The session's owner or one of its reviewers."""
    return session.is_participant(user)


def can_manage_session(user: Any, session: ReviewSession) -> bool:
    """The owner (and staff) change the session's settings and participants."""
    return bool(user.is_staff or session.owner_id == user.pk)


def can_add_finding(user: Any, session: ReviewSession) -> bool:
    """Participants add findings (staff too)."""
    return bool(user.is_staff or session.is_participant(user))


def can_edit_finding(user: Any, finding: Finding) -> bool:
    """Only a finding's author changes it (and staff)."""
    return bool(user.is_staff or finding.author_id == user.pk)


def can_edit_owned(user: Any, obj: DesignDoc | FleetConfig) -> bool:
    """Docs and fleet configs are changed by their owner (and staff)."""
    return bool(user.is_staff or obj.owner_id == user.pk)


class IsOwnerOrReadOnly(BasePermission):
    """Read for anyone who can see the object; write for its owner and staff."""

    message = "Only the owner can change this."

    def has_object_permission(self, request: Any, view: Any, obj: Any) -> bool:
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return True
        return can_edit_owned(request.user, obj)
