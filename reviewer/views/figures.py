"""Read-only figures the session page asks for: the numbers pass and the placement
solver, computed by the emulator from the session's fleet config, and plotly.js
served from the plotly package.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, JsonResponse
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_GET, require_http_methods

from emulator.analysis import numbers
from emulator.analysis import record as emulator_record
from emulator.analysis.placement.scenario import layout_config_name
from emulator.scenario import Scenario, ScenarioError
from reviewer.fleets.analysis_record import stored_placement, stored_record
from reviewer.fleets.numbers_report import numbers_report
from reviewer.fleets.provenance import _subtree, input_figures
from reviewer.views.pages import get_session_for_user, int_or_none

#: How long the page waits before asking again while a worker works the figures out.
RETRY_AFTER_S = 2
#: The most hosts ``placement.json?hosts=N`` solves for (each N is solved and stored once per version).
MAX_PLACEMENT_HOSTS = 64


def _fleet_for_session(user: Any, session_id: int) -> Any:
    """The session's fleet config; 404 when it has none."""
    session = get_session_for_user(user, session_id)
    if session.fleet_config is None:
        raise Http404("This session has no fleet config.")
    return session.fleet_config


def _scenario_for_session(user: Any, session_id: int) -> Any:
    """The emulator Scenario of the session's fleet config; 404 when it has none."""

    return Scenario.from_dict(_fleet_for_session(user, session_id).scenario)


def _stale_scenario(exc: Exception) -> JsonResponse:
    """409 for a fleet config saved before the emulator's current rules: name the key and the fix."""
    return JsonResponse(
        {"error": f"The fleet config's saved scenario no longer validates ({exc}); "
                  f"fix that key in the fleet config and save it again."},
        status=409,
    )


@login_required
@require_GET
def session_numbers(request: HttpRequest, session_id: int) -> JsonResponse:
    """The numbers pass of the session's fleet config, read from its stored analysis."""

    fleet = _fleet_for_session(request.user, session_id)
    try:
        Scenario.from_dict(fleet.scenario)
    except ScenarioError as exc:
        return _stale_scenario(exc)
    version = fleet.latest_version()
    record = stored_record(version) if version is not None else None
    if version is not None and record is None:
        # A docs worker works it out; the page shows a spinner and asks again.
        response = JsonResponse({"pending": True, "retry_after_s": RETRY_AFTER_S}, status=202)
        response["Retry-After"] = str(RETRY_AFTER_S)
        return response
    if record is not None and "refused" in record:
        return JsonResponse({"error": record["refused"]}, status=422)
    if record is None:  # a config saved without a version: worked out here, not stored

        report = numbers.compute(Scenario.from_dict(fleet.scenario)).to_dict()
    else:
        report = record["numbers"]
    payload = numbers_report(report, fleet.provenance, fleet.scenario, _written(fleet))
    payload["doc_figures"] = _doc_figures(record, fleet)
    # A quantity the doc states twice with two values is a question for its authors.
    payload["findings"] = [*payload["findings"], *((record or {}).get("doc_conflicts") or [])]
    payload["can_edit_fleet"] = fleet.owner_id == request.user.pk
    return JsonResponse(payload)


def _doc_figures(record: dict[str, Any] | None, fleet: Any) -> list[dict[str, Any]]:
    """The figures the doc states (from the stored record), each with the config's value
    for its key and how that key is marked, so the page can offer to accept it."""

    if not record or not record.get("doc_figures"):
        return []
    written = input_figures(_written(fleet) or {})
    marks = fleet.provenance
    out = []
    for figure in record["doc_figures"]:
        key = figure.get("key")
        current = None if key is None else written.get(key, _subtree(fleet.scenario, key))
        mark = marks.get(key) if key else None
        out.append({**figure, "current": current, "marked": mark["source"] if mark else None})
    return out


def _written(fleet: Any) -> dict[str, Any] | None:
    """The fleet config's TOML as written (keys at their default included), or None."""

    try:
        return tomllib.loads(fleet.toml)
    except tomllib.TOMLDecodeError:
        return None


@login_required
@require_GET
def session_placement(request: HttpRequest, session_id: int) -> JsonResponse:
    """The placement solver's ranked layouts for the session's fleet, read from the
    fleet config version's stored answer (a docs worker solves it; 202 meanwhile).

    The host count and size come from the fleet config; ``?hosts=N`` asks
    about a different number of hosts, solved once per version and N. Each ranked
    layout carries the host groups that would make it a fleet config (``host_groups``).
    """

    fleet = _fleet_for_session(request.user, session_id)
    try:
        scenario = Scenario.from_dict(fleet.scenario)
    except ScenarioError as exc:
        return _stale_scenario(exc)
    requested = int_or_none(request.GET.get("hosts"))
    if requested is not None and not 1 <= requested <= MAX_PLACEMENT_HOSTS:
        return JsonResponse({"error": f"hosts: give a whole number from 1 to {MAX_PLACEMENT_HOSTS}."}, status=400)
    if requested == len(scenario.expanded_hosts()):
        requested = None  # the fleet as configured: the version's own record answers
    version = fleet.latest_version()
    if version is None:  # a config saved without a version: worked out here, not stored
        result: dict[str, Any] | None = emulator_record.placement_answer(scenario, requested)
    else:
        result = stored_placement(version, requested)
    if result is None:
        # A docs worker solves it; the page shows a spinner and asks again.
        response = JsonResponse({"pending": True, "retry_after_s": RETRY_AFTER_S}, status=202)
        response["Retry-After"] = str(RETRY_AFTER_S)
        return response
    if "refused" in result:
        return JsonResponse({"error": result["refused"]}, status=422)
    if "error" in result:
        return JsonResponse({"error": result["error"]}, status=400)
    # The name of the config each ranked layout makes, so "use this layout" can make
    # one without the browser knowing the TOML grammar.
    result = {**result, "ranked": [
        {**entry, "config_name": layout_config_name(fleet.name, result["current_label"], entry["label"])}
        for entry in result["ranked"]]}
    return JsonResponse(result)


@require_http_methods(["GET", "HEAD"])
@cache_control(max_age=86400, public=True)
def plotly_js(request: HttpRequest) -> FileResponse:
    """plotly.min.js from the installed plotly package: no CDN, works offline."""
    # plotly is heavy; loaded only when its script is served
    import plotly

    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not path.exists():
        raise Http404("plotly.min.js is missing from the plotly package; reinstall plotly.")
    return FileResponse(path.open("rb"), content_type="text/javascript")
