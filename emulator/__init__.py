"""The emulator: a discrete-event simulation of an LLM inference serving system.

Pure Python (numpy only). It reads a scenario (TOML, see ``emulator.scenario``),
runs it (``emulator.sim.engine.Engine``) and reports frames and a summary. Nothing here
imports Django, Celery or Channels, so it runs alone: ``python -m emulator``.
"""

from __future__ import annotations

#: Default cap on the simulated requests of one run (fresh arrivals, times one plus
#: the retries a client may send). A scenario above it is refused by validation;
#: callers pass ``max_requests`` to load/validate to use another cap (None: no cap).
DEFAULT_REQUEST_BUDGET: int = 20_000_000

from emulator.scenario import Scenario, ScenarioError, load_scenario  # noqa: E402
from emulator.sim.engine import Engine  # noqa: E402
from emulator.sim.results import Frame, Summary  # noqa: E402

__all__ = [
    "DEFAULT_REQUEST_BUDGET",
    "Engine",
    "Frame",
    "Scenario",
    "ScenarioError",
    "Summary",
    "load_scenario",
]
