"""Bounds on every size a scenario's author controls, and the reading of TOML text
within them.

A scenario is data from users (the web app takes it from anyone signed in), and
the emulator's work grows with its sizes: units per host, hosts, workers, models,
token counts, and how deep its values nest. Each bound sits well above any real
fleet (an NVL72 rack is 72 GPUs; the longest context windows are about ten
million tokens) and well below what would exhaust one process; going over one
is a ``ScenarioError`` naming the key and the fix, like any other mistake.
"""

from __future__ import annotations

import tomllib
from typing import Any

from emulator.scenario.errors import ScenarioError

__all__ = [
    "MAX_HOST_UNITS",
    "MAX_MODELS",
    "MAX_NESTING",
    "MAX_TOKENS",
    "MAX_WORKERS",
    "check_nesting",
    "loads_toml",
]

#: Units (GPUs) on one host, and so units one worker spans.
MAX_HOST_UNITS = 128
#: Workers in one scenario, over every host (the engine and the analysis hold each).
MAX_WORKERS = 20_000
#: Models in one scenario.
MAX_MODELS = 64
#: Tokens in one request's prompt or output, and in one batch's budget.
MAX_TOKENS = 10_000_000
#: Levels of tables and arrays in a scenario; real ones use four (hosts[0].workers[0]).
MAX_NESTING = 16


def check_nesting(data: Any, *, limit: int = MAX_NESTING, source: str = "") -> None:
    """Raise ``ScenarioError`` at the key path where ``data`` nests deeper than ``limit``.

    Walked without recursion, so a value nested thousands deep is refused, not a crash.
    """
    stack: list[tuple[Any, str, int]] = [(data, source, 0)]
    while stack:
        value, path, depth = stack.pop()
        if not isinstance(value, dict | list):
            continue
        if depth >= limit:
            raise ScenarioError(
                path or "scenario", f"nests tables and arrays more than {limit} deep",
                "a scenario's values are numbers, strings and short lists; flatten this value",
            )
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, child in items:
            if isinstance(child, dict | list):
                where = f"{path}[{key}]" if isinstance(value, list) else (f"{path}.{key}" if path else str(key))
                stack.append((child, where, depth + 1))


def loads_toml(text: str, *, source: str = "scenario") -> dict[str, Any]:
    """``tomllib.loads`` of user text within the bounds: ``ScenarioError`` for text that is
    not TOML, or nests too deep (Python's TOML reader recurses once per level)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(source, f"not valid TOML: {exc}") from None
    except RecursionError:
        raise ScenarioError(
            source, f"nests arrays or inline tables more than {MAX_NESTING} deep",
            "a scenario's values are numbers, strings and short lists; flatten the deep value",
        ) from None
    check_nesting(data)
    return data
