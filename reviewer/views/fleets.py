"""Fleet config forms on the pages (the API at /api/fleets/ does the same)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from reviewer import permissions, selectors
from reviewer.errors import ServiceError
from reviewer.fleets import traces


@login_required
@require_POST
def fleet_trace_upload(request: HttpRequest, fleet_id: int) -> HttpResponse:
    """Upload a request trace for a fleet config its owner edits; the outcome as a message."""
    config = get_object_or_404(selectors.fleet_configs_visible_to(request.user), pk=fleet_id)
    upload = request.FILES.get("file")
    if not permissions.can_edit_owned(request.user, config):
        messages.error(request, f"{config.name}: only its owner may upload a trace.")
    elif upload is None:
        messages.error(request, "trace: choose a trace file to upload.")
    else:
        try:
            if traces.trace_parsed_in_request(upload):
                traces.fleet_config_trace_upload(config=config, author=request.user, upload=upload)
            else:
                # A big trace takes seconds to read: a docs worker checks it (the page's
                # script follows its status URL; without it, the home page lists it pending).
                traces.trace_upload_start(config=config, author=request.user, upload=upload)
        except ServiceError as exc:
            messages.error(request, exc.message)
        else:
            if traces.trace_parsed_in_request(upload):
                messages.success(request, f"{config.name}: a new version replays {upload.name}.")
            else:
                messages.info(request, f"{config.name}: {upload.name} is stored and being checked; "
                                       "a new version replays it once it passes (reload to see).")
    return redirect("home")
