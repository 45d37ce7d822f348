"""The break pass's advice for a session, checked with the emulator: which policies
give identical runs on its fleet config and the comparison whose run differs, with
the measured difference. Computed once per fleet config version and kept in the
cache: it runs the scenario a few times."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from reviewer.views.pages import get_session_for_user

CACHE_S = 24 * 3600


@login_required
@require_GET
def session_break_advice(request: HttpRequest, session_id: int) -> JsonResponse:
    """``{"equivalent", "suggested", "measured"}`` for the session's fleet config."""
    from emulator.sim.policies import POLICY_REGISTRY
    from reviewer.scenario_view import measured_comparison

    session = get_session_for_user(request.user, session_id)
    fleet = session.fleet_config
    if fleet is None:
        return JsonResponse({"equivalent": None, "suggested": None, "measured": False})
    version = fleet.latest_version()
    key = f"break-advice:{fleet.pk}:{version.pk if version else 0}"
    advice = cache.get(key)
    if advice is None:
        advice = measured_comparison(fleet.scenario, list(POLICY_REGISTRY))
        cache.set(key, advice, CACHE_S)
    return JsonResponse(advice)
