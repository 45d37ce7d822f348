"""Password reset, hardened: throttled per address and per account, links built only
from a host the site serves, and a reset revokes the account's API tokens."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from rest_framework.authtoken.models import Token

# Requests per window: an address asks for a few resets, an account gets a few e-mails.
RESET_PER_ADDRESS = 5
RESET_PER_ACCOUNT = 3
RESET_WINDOW_S = 3600


def _over(key: str, limit: int) -> bool:
    """Count one more request under ``key``; True when it is over ``limit`` in the window."""
    cache.add(key, 0, RESET_WINDOW_S)
    try:
        count = cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, RESET_WINDOW_S)
        count = 1
    return count > limit


def _host_is_served(request: HttpRequest) -> bool:
    """The Host header, port included, is one ALLOWED_HOSTS names (a bare name allows no other port
    than the default one), so a forged port never goes into the link."""
    host = request.get_host()  # already checked against ALLOWED_HOSTS, port left out
    if ":" not in host.rsplit("]", 1)[-1]:
        return True
    return host in settings.ALLOWED_HOSTS or "*" in settings.ALLOWED_HOSTS


class ThrottledPasswordResetView(auth_views.PasswordResetView):
    """The reset form; past the limits it answers as if sent and sends nothing."""

    def form_valid(self, form: Any) -> HttpResponse:
        email = form.cleaned_data["email"].strip().lower()
        address = self.request.META.get("REMOTE_ADDR", "")
        over_address = _over(f"pwreset:addr:{address}", RESET_PER_ADDRESS)
        over_account = _over(f"pwreset:email:{email}", RESET_PER_ACCOUNT)
        if over_address or over_account or not _host_is_served(self.request):
            # The same answer as a sent e-mail: the form tells nothing about accounts or limits.
            return redirect(self.get_success_url())
        return super().form_valid(form)


class TokenRevokingPasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    """Setting a new password through a reset link revokes the account's API tokens."""

    def form_valid(self, form: Any) -> HttpResponse:
        response = super().form_valid(form)
        Token.objects.filter(user=form.user).delete()
        return response
