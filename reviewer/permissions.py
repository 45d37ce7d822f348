"""Who may change review data, given that they may see it.

Who may *see* what is in :mod:`reviewer.selectors`; these predicates are asked
only about rows the user can already see.
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission

from reviewer.models.review import DesignDoc, Finding, FleetConfig, ReviewSession


def is_participant(user: Any, session: ReviewSession) -> bool:
    """The session's owner or one of its reviewers."""
    return session.is_participant(user)


def can_manage_session(user: Any, session: ReviewSession) -> bool:
    """The owner (and staff) change the session's settings and participants."""
    return bool(user.is_staff or session.owner_id == user.pk)


def can_add_finding(user: Any, session: ReviewSession) -> bool:
    """Participants add findings (staff too)."""
    return bool(user.is_staff or session.is_participant(user))


def can_reply(user: Any, session: ReviewSession) -> bool:
    """Participants and the doc's authors reply to findings (staff too)."""
    return bool(user.is_staff or session.is_participant(user) or session.is_author(user))


def can_set_finding_state(user: Any, session: ReviewSession) -> bool:
    """Resolve or reopen a published finding's thread: as on a code review, the
    session's reviewers (its owner included) and the doc's authors (staff too)."""
    return bool(user.is_staff or session.is_participant(user) or session.is_author(user))


def can_edit_finding(user: Any, finding: Finding) -> bool:
    """Only a finding's author changes it (and staff)."""
    return bool(user.is_staff or finding.author_id == user.pk)


def can_merge_findings(user: Any, finding: Finding, into: Finding) -> bool:
    """The session's owner (and staff) merge findings; so does the author of both."""
    if can_manage_session(user, finding.session):
        return True
    return finding.author_id == user.pk and into.author_id == user.pk


def can_steer_run(user: Any, run: Any) -> bool:
    """Who sends commands (faults, cancel) to a run or a sweep they can see.

    The participants of its session (owner and reviewers) and staff; a run
    outside any session, its starter and staff. The doc's authors watch runs
    but do not steer them.
    """
    if user.is_staff:
        return True
    if run.session_id is None:
        return bool(run.started_by_id == user.pk)
    return bool(run.session.is_participant(user))


def can_change_pass(user: Any, session: ReviewSession) -> bool:
    """Participants (and staff) move the session between passes; the doc's authors do not."""
    return bool(user.is_staff or session.is_participant(user))


def can_edit_owned(user: Any, obj: DesignDoc | FleetConfig) -> bool:
    """Docs and fleet configs are changed by their owner (and staff)."""
    return bool(user.is_staff or obj.owner_id == user.pk)


def can_share(user: Any, obj: DesignDoc | FleetConfig) -> bool:
    """Only the owner (and staff) open a session on a doc or put a fleet config in one.

    A session decides who sees its doc and fleet config, so a reviewer who
    could open their own session on them would share them with anyone and keep
    seeing them after the owner removed them.
    """
    return can_edit_owned(user, obj)


class IsOwnerOrReadOnly(BasePermission):
    """Read for anyone who can see the object; write for its owner and staff."""

    message = "Only the owner can change this."

    def has_object_permission(self, request: Any, view: Any, obj: Any) -> bool:
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return True
        return can_edit_owned(request.user, obj)
