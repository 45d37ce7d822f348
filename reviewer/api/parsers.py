"""The API's JSON parser: DRF's, within a bound on how deep a body nests.

Python's JSON reader recurses once per level, so a body nested a hundred
thousand deep raises ``RecursionError``, which DRF's parser does not catch (a
500); one nested a few hundred deep parses, then breaks whatever walks it next.
No request of this API nests more than a few levels (a scenario object uses
four), so a deeper body is a 400 that says so.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

#: Levels of objects and arrays a request body may use.
MAX_BODY_NESTING = 32


def too_deep_at(data: Any, limit: int) -> str | None:
    """The key path (``scenario.hosts[0]``) where ``data`` nests objects and arrays more
    than ``limit`` deep, or None (walked without recursion)."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if depth > limit:
            return path
        if isinstance(value, dict):
            stack.extend((child, f"{path}.{key}" if path else str(key), depth + 1) for key, child in value.items())
        elif isinstance(value, list):
            stack.extend((child, f"{path}[{i}]", depth + 1) for i, child in enumerate(value))
    return None


class BoundedJSONParser(JSONParser):
    """JSON bodies nested at most ``MAX_BODY_NESTING`` deep; deeper ones are a ParseError (400)."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise _too_deep("the body") from None
        path = too_deep_at(data, MAX_BODY_NESTING)
        if path is not None:
            # The field at the top of the path: the one the sender should flatten.
            raise _too_deep(path.split(".")[0].split("[")[0] or "the body")
        return data


def _too_deep(where: str) -> ParseError:
    return ParseError(f"JSON parse error - {where} is nested more than {MAX_BODY_NESTING} levels "
                      "deep; send objects and arrays at most that deep")
