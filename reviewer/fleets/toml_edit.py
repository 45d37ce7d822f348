"""Set one key of a fleet config's TOML text, keeping its comments and layout.

Accepting a figure the doc states writes one key (``traffic.peak_qps``,
``models.chat.arch.model``, ``hosts[0].count``); rewriting the whole file through a
TOML writer would drop the reviewer's comments, so the key's line is replaced in
place (its trailing comment kept), or added at the end of its table, or its table
added at the end of the file. The result is read back to check the key holds the
value, so a file this cannot edit is refused, never changed wrongly.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

import tomli_w

__all__ = ["TomlEditError", "set_key"]

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


class TomlEditError(ValueError):
    """The key cannot be written into this text; the message names the key and the fix."""


def _split(path: str) -> tuple[str, int | None, str]:
    """``models.chat.tokens`` -> (``models.chat``, None, ``tokens``); ``hosts[1].count``
    -> (``hosts``, 1, ``count``); a top-level key has the table ``""``."""
    match = re.fullmatch(r"(?:(.+?)(?:\[(\d+)\])?\.)?([A-Za-z0-9_-]+)", path)
    if match is None:
        raise TomlEditError(f"{path}: not a key path this can write; edit the TOML by hand")
    table, index, key = match.groups()
    return table or "", None if index is None else int(index), key


def _value_text(value: Any) -> str:
    return tomli_w.dumps({"v": value}).split("=", 1)[1].strip()


def _get(data: Any, path: str) -> Any:
    node = data
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        node = node[int(part[1:-1])] if part.startswith("[") else node[part]
    return node


def set_key(text: str, path: str, value: Any) -> str:
    """``text`` with the key at ``path`` set to ``value`` (a number, string or bool)."""
    table, index, key = _split(path)
    lines = text.splitlines()
    # Where each table's body runs: (start, end) line indices after its header.
    bodies: list[tuple[str, bool, int, int]] = []
    start, name, array = 0, "", False
    for i, line in enumerate(lines):
        m = _HEADER.match(line)
        if m and not line.lstrip().startswith("#"):
            bodies.append((name, array, start, i))
            name, array, start = m.group(2).replace(" ", ""), m.group(1) == "[[", i + 1
    bodies.append((name, array, start, len(lines)))
    if index is None:
        candidates = [b for b in bodies if b[0] == table and not b[1]]
    else:
        arrays = [b for b in bodies if b[0] == table and b[1]]
        candidates = [arrays[index]] if index < len(arrays) else []
        if not candidates:
            raise TomlEditError(f"{path}: the config has no {table}[{index}]; add that table in the editor first")
    new_line = f"{key} = {_value_text(value)}"
    if candidates:
        _, _, lo, hi = candidates[0]
        pattern = re.compile(rf"^(\s*){re.escape(key)}\s*=\s*([^#]*?)(\s*#.*)?$")
        for i in range(lo, hi):
            m = pattern.match(lines[i])
            if m:
                lines[i] = f"{m.group(1)}{new_line}{m.group(3) or ''}"
                break
        else:
            last = max([i for i in range(lo, hi) if lines[i].strip() and not lines[i].lstrip().startswith("#")],
                       default=lo - 1)
            lines.insert(last + 1, new_line)
    else:
        lines += ["", f"[{table}]", new_line]
    out = "\n".join(lines) + "\n"
    try:
        written = _get(tomllib.loads(out), path)
    except (tomllib.TOMLDecodeError, KeyError, IndexError, TypeError):
        written = None
    if written != value:
        raise TomlEditError(f"{path}: could not be written into this TOML; set it in the fleet editor")
    return out
