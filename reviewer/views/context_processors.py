"""Template context every page gets: the signed-in user's unread notification count."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from reviewer import selectors


def inbox(request: HttpRequest) -> dict[str, Any]:
    """``inbox_unread`` for the top bar (None when nobody is signed in)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"inbox_unread": None}
    return {"inbox_unread": selectors.unread_count(user)}
