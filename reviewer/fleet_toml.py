"""Fleet configs' scenarios as TOML text, checked by the emulator's own validator.

Below the models (which validate every save with it) and the services (which
re-export it); errors are Django ``ValidationError``s, the models' convention.
"""

from __future__ import annotations

import tomllib
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError

from emulator.scenario import Scenario, ScenarioError


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
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValidationError(f"scenario: not valid TOML: {exc}") from None
    try:
        return Scenario.from_dict(data, max_requests=settings.RUN_REQUEST_BUDGET).to_dict()
    except ScenarioError as exc:
        raise ValidationError(str(exc)) from None


def scenario_dict_to_toml(data: dict[str, Any]) -> str:
    """TOML text for a scenario given as a dict (the JSON form); errors name the key."""
    try:
        return Scenario.from_dict(data, max_requests=settings.RUN_REQUEST_BUDGET).to_toml()
    except ScenarioError as exc:
        raise ValidationError(str(exc)) from None
