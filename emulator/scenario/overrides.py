"""``KEY=VALUE`` overrides by dotted path, as given to ``--set`` on the command line."""

from __future__ import annotations

import copy
import re
import tomllib
from typing import Any

from emulator.scenario import ScenarioError

_SEGMENT = re.compile(r"^([A-Za-z0-9_-]+)((?:\[\d+\])*)$")


def parse_value(text: str) -> Any:
    """A TOML value (``10000``, ``true``, ``"pull"``, ``[1, 2]``); a bare word stays a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text.strip()
    except RecursionError:
        # Python's TOML reader recurses once per level of nesting.
        raise ScenarioError(text[:40], "nests arrays or inline tables too deep",
                            "give a number, a string or a short list") from None


def _steps(path: str) -> list[str | int]:
    """``hosts[0].count`` -> ``["hosts", 0, "count"]``."""
    steps: list[str | int] = []
    for segment in path.split("."):
        match = _SEGMENT.match(segment)
        if not match:
            raise ScenarioError(
                path, "is not a key path", "write it like traffic.qps or hosts[0].count"
            )
        steps.append(match.group(1))
        steps.extend(int(i) for i in re.findall(r"\[(\d+)\]", match.group(2)))
    return steps


def _spell(steps: list[str | int]) -> str:
    out = ""
    for step in steps:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else step)
    return out


def apply_overrides(data: dict[str, Any], overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Return a copy of a scenario dict with each ``KEY=VALUE`` applied in order."""
    data = copy.deepcopy(data)
    for item in overrides:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ScenarioError(item, "is not KEY=VALUE", "write it like traffic.qps=10000")
        steps = _steps(key)
        node: Any = data
        for depth, step in enumerate(steps[:-1]):
            node = _child(node, step, steps[: depth + 1])
        last = steps[-1]
        if isinstance(last, int):
            if not isinstance(node, list) or last >= len(node):
                raise ScenarioError(
                    _spell(steps),
                    "no such list item",
                    f"{_spell(steps[:-1])} has {len(node) if isinstance(node, list) else 0} items",
                )
            node[last] = parse_value(value)
        elif isinstance(node, dict):
            node[last] = parse_value(value)
        else:
            raise ScenarioError(_spell(steps), f"{_spell(steps[:-1])} is not a table")
    return data


def _child(node: Any, step: str | int, steps: list[str | int]) -> Any:
    if isinstance(step, int):
        if isinstance(node, list) and step < len(node):
            return node[step]
        count = len(node) if isinstance(node, list) else 0
        raise ScenarioError(
            _spell(steps), "no such list item", f"{_spell(steps[:-1])} has {count} items"
        )
    if isinstance(node, dict):
        if step not in node:
            # A whole missing table (e.g. [gateway]) is created; unknown keys are then
            # reported by validation with the list of known ones.
            node[step] = {}
        return node[step]
    raise ScenarioError(_spell(steps), f"{_spell(steps[:-1])} is not a table")
