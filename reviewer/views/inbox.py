"""The inbox page: the signed-in user's notifications and their e-mail setting."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from reviewer import selectors
from reviewer.models.collaboration import EmailMode
from reviewer.representations import notification_url
from reviewer.review.notifications import email_mode

INBOX_PAGE_ITEMS = 100


@login_required
@require_GET
def inbox_page(request: HttpRequest) -> HttpResponse:
    """The user's latest notifications, unread first marked, and how they are e-mailed."""
    items = list(selectors.notifications_for(request.user)[:INBOX_PAGE_ITEMS])
    for item in items:
        item.url = notification_url(item)  # type: ignore[attr-defined]
    context = {
        "items": items,
        "email_mode": email_mode(request.user),
        "email_modes": list(EmailMode),
        "has_email": bool(request.user.email),
    }
    return render(request, "reviewer/inbox.html", context)
