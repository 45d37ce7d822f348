"""The user's own API token page: create (or replace) and revoke the token scripts use."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods
from rest_framework.authtoken.models import Token


@login_required
@require_http_methods(["GET", "POST"])
def tokens_page(request: HttpRequest) -> HttpResponse:
    """Show the user's token (masked); POST ``action=create`` makes a new one, ``revoke`` deletes it.

    A new key is shown in full once, in the response that created it; later
    visits show only its start, so a key left on screen is not readable later.
    """
    new_key = None
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "create":
            with transaction.atomic():
                Token.objects.filter(user=request.user).delete()
                new_key = Token.objects.create(user=request.user).key
        elif action == "revoke":
            deleted, _ = Token.objects.filter(user=request.user).delete()
            messages.info(request, "Token revoked." if deleted else "There was no token to revoke.")
            return redirect("tokens")
        else:
            messages.error(request, "Unknown action: use the Create or Revoke buttons.")
            return redirect("tokens")
    token = Token.objects.filter(user=request.user).first()
    return render(
        request,
        "reviewer/tokens.html",
        {
            "token": token,
            "masked": f"{token.key[:6]}…" if token else None,
            "new_key": new_key,
            "api_root": request.build_absolute_uri("/api/"),
        },
    )
