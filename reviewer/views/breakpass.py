"""The break pass's advice for a session, checked with the emulator: which policies
give identical runs on its fleet config and the comparison whose run differs, with
the measured difference. Worked out once per fleet config version, by a worker
(``reviewer.fleets.break_advice``); until then the answer is 202 and the page asks
again."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from reviewer.fleets.break_advice import break_advice
from reviewer.views.pages import get_session_for_user

#: How long the page waits before asking again while the advice is worked out.
RETRY_AFTER_S = 2


@login_required
@require_GET
def session_break_advice(request: HttpRequest, session_id: int) -> JsonResponse:
    """``{"equivalent", "suggested", "measured"}`` for the session's fleet config, or 202
    ``{"pending": true}`` while a worker works it out."""
    session = get_session_for_user(request.user, session_id)
    fleet = session.fleet_config
    version = fleet.latest_version() if fleet is not None else None
    if version is None:
        return JsonResponse({"equivalent": None, "suggested": None, "measured": False})
    advice = break_advice(version)
    if advice is None:
        response = JsonResponse({"pending": True, "retry_after_s": RETRY_AFTER_S}, status=202)
        response["Retry-After"] = str(RETRY_AFTER_S)
        return response
    return JsonResponse(advice)
