"""Live checking of a fleet config being edited: the scenario as TOML or as its JSON
form, checked by the emulator's own validator, the first problem given by key path.

The page's form and raw TOML both go through :func:`scenario_check`: a valid form
comes back as canonical TOML (and a valid TOML as the form's JSON), so the two
views of one scenario stay in step. Nothing is saved here; saving makes a new
version through :func:`reviewer.review.services.fleet_config_save`.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from emulator.scenario import Scenario, ScenarioError
from emulator.scenario.limits import loads_toml
from reviewer.errors import Invalid
from reviewer.fleets.scenario_toml import trace_path_problem

__all__ = ["scenario_check"]


def _problem(path: str, message: str) -> dict[str, Any]:
    return {"valid": False, "toml": None, "scenario": None, "error": {"path": path, "message": message}}


def scenario_check(*, toml: str | None = None, scenario: Any = None) -> dict[str, Any]:
    """Check a scenario given as ``toml`` text or as a ``scenario`` object.

    Returns ``{"valid", "toml", "scenario", "error"}``: when valid, the scenario's
    JSON form and its TOML (the text given, or canonical TOML made from the object);
    otherwise ``error`` is ``{"path", "message"}``, the key path at fault (``""``
    for the document as a whole) and the emulator's one-line message with its fix.
    """

    if toml is None and scenario is None:
        raise Invalid("toml", "toml: give the scenario as toml text or as a scenario object")
    if toml is not None:
        if not toml.strip():
            return _problem("", "scenario: empty; write a scenario in the emulator's TOML format")
        try:
            data = loads_toml(toml)
        except ScenarioError as exc:
            return _problem(exc.path if exc.path != "scenario" else "", str(exc))
    elif isinstance(scenario, dict):
        data = scenario
    else:
        raise Invalid("scenario", "scenario: give the scenario as an object")
    problem = trace_path_problem(data)
    if problem:
        return _problem("traffic.trace", problem)
    try:
        checked = Scenario.from_dict(data, max_requests=settings.RUN_REQUEST_BUDGET)
    except ScenarioError as exc:
        return _problem(exc.path, str(exc))
    return {"valid": True, "toml": toml if toml is not None else checked.to_toml(),
            "scenario": checked.to_dict(), "error": None}
