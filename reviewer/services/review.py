"""Review workflows: docs, fleet configs, sessions and findings."""

from __future__ import annotations

import tomllib
from typing import Any

from django.core.exceptions import ValidationError


def validate_scenario_toml(text: str) -> dict[str, Any]:
    """Parse and validate a scenario given as TOML; return it as a JSON-safe dict.

    Raises ``ValidationError`` whose message names the key and the fix.
    """
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValidationError(f"TOML syntax: {exc}") from None
