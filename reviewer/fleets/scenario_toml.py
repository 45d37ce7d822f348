"""Fleet configs' scenarios as TOML text, checked by the emulator's own validator.

Below the models (which validate every save with it) and the services (which
re-export it); errors are Django ``ValidationError``s, the models' convention.
"""

from __future__ import annotations

import json
import os
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError

from emulator.scenario import Scenario, ScenarioError
from emulator.scenario.limits import loads_toml
from emulator.scenario.traces import NAMED_TRACES


def trace_path_problem(data: Any) -> str | None:
    """Why the scenario's ``traffic.trace`` may not be used on this server, or None.

    The emulator reads any path it is given, and its errors quote the file's
    lines; on a server that would let a user read its files (the secret key
    among them). So a scenario given to the web app replays a named trace or a
    trace uploaded to a fleet config (a file in ``TRACE_UPLOAD_DIR``), nothing else.
    """

    traffic = data.get("traffic") if isinstance(data, dict) else None
    trace = traffic.get("trace") if isinstance(traffic, dict) else None
    if trace is None or (isinstance(trace, str) and trace in NAMED_TRACES):
        return None
    if isinstance(trace, str):
        root = os.path.realpath(settings.TRACE_UPLOAD_DIR)
        if os.path.isabs(trace) and os.path.realpath(trace).startswith(root + os.sep):
            return None
    return (f"traffic.trace: {json.dumps(trace)} is not a trace this server replays; use a named "
            f"trace ({', '.join(NAMED_TRACES)}) or upload a trace to the fleet config")


def validate_scenario_toml(text: str) -> dict[str, Any]:
    """Validate a scenario given as TOML with the emulator; return it as a JSON-safe dict.

    Raises ``ValidationError`` whose message is the emulator's one-line error,
    naming the key path and the fix.
    """
    if not text or not text.strip():
        raise ValidationError("scenario: empty; paste a scenario in the emulator's TOML format")
    # Parsed here rather than by load_scenario, which would also take a file
    # path or a preset name: user input is only ever TOML text.
    try:
        data = loads_toml(text)
    except ScenarioError as exc:
        raise ValidationError(str(exc)) from None
    problem = trace_path_problem(data)
    if problem:
        raise ValidationError(problem)
    try:
        return Scenario.from_dict(data, max_requests=settings.RUN_REQUEST_BUDGET).to_dict()
    except ScenarioError as exc:
        raise ValidationError(str(exc)) from None


def scenario_dict_to_toml(data: dict[str, Any]) -> str:
    """TOML text for a scenario given as a dict (the JSON form); errors name the key."""
    problem = trace_path_problem(data)
    if problem:
        raise ValidationError(problem)
    try:
        return Scenario.from_dict(data, max_requests=settings.RUN_REQUEST_BUDGET).to_toml()
    except ScenarioError as exc:
        raise ValidationError(str(exc)) from None
