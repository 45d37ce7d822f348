"""Shipped scenarios, each reproducing one finding of a review of the canonical doc.

``PRESETS`` maps a preset's name to a one-line description; ``load_preset(name)``
reads ``emulator/presets/<name>.toml`` (package data) into a validated Scenario.
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from emulator.scenario import Scenario

PRESETS: dict[str, str] = {
    "doc-as-written": "the doc's system as written on the Part 2 hosts (2 big / 2 big / 5 small) "
    "at its average 1k QPS: a queue that grows without bound, dispatcher and host failures",
}


def load_preset(name: str, max_requests: int | None | object = ...) -> Scenario:
    """Load the preset ``name`` as a validated Scenario (ScenarioError if unknown)."""
    from emulator.scenario import ScenarioError, load_scenario

    if name not in PRESETS:
        raise ScenarioError(
            name, "is not a scenario file or a preset", f"presets are {', '.join(PRESETS)}"
        )
    text = resources.files(__name__).joinpath(f"{name}.toml").read_text(encoding="utf-8")
    return load_scenario(text, max_requests=max_requests)
