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

__all__ = ["TomlEditError", "add_table", "remove_key", "remove_table", "set_key"]

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
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return "[" + ", ".join(_value_text(v) for v in value) + "]"  # one line, as people write it
    return tomli_w.dumps({"v": value}).split("=", 1)[1].strip()


def _get(data: Any, path: str) -> Any:
    node = data
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        node = node[int(part[1:-1])] if part.startswith("[") else node[part]
    return node


def _bodies(lines: list[str]) -> list[tuple[str, bool, int, int]]:
    """Each table's name, whether it is an array table, and the (start, end) line
    indices of its body (after its header); the top level first, named ``""``."""
    bodies: list[tuple[str, bool, int, int]] = []
    start, name, array = 0, "", False
    for i, line in enumerate(lines):
        m = _HEADER.match(line)
        if m and not line.lstrip().startswith("#"):
            bodies.append((name, array, start, i))
            name, array, start = m.group(2).replace(" ", ""), m.group(1) == "[[", i + 1
    bodies.append((name, array, start, len(lines)))
    return bodies


def _table_body(lines: list[str], path: str, table: str, index: int | None) -> list[tuple[str, bool, int, int]]:
    bodies = _bodies(lines)
    if index is None:
        return [b for b in bodies if b[0] == table and not b[1]]
    arrays = [b for b in bodies if b[0] == table and b[1]]
    if index >= len(arrays):
        raise TomlEditError(f"{path}: the config has no {table}[{index}]; add that table in the editor first")
    return [arrays[index]]


def _loads(out: str, path: str) -> dict[str, Any]:
    try:
        return tomllib.loads(out)
    except tomllib.TOMLDecodeError:
        raise TomlEditError(f"{path}: could not be changed in this TOML; edit it in the TOML pane") from None


def remove_key(text: str, path: str) -> str:
    """``text`` without the key at ``path`` (the emulator's default then stands); the
    text unchanged when the key is not written. Comments on other lines are kept."""
    table, index, key = _split(path)
    lines = text.splitlines()
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
    for _, _, lo, hi in _table_body(lines, path, table, index):
        for i in range(lo, hi):
            if pattern.match(lines[i]):
                del lines[i]
                break
    out = "\n".join(lines) + "\n"
    try:
        _get(_loads(out, path), path)
    except (KeyError, IndexError, TypeError):
        return out
    raise TomlEditError(f"{path}: could not be removed from this TOML; delete it in the TOML pane")


def add_table(text: str, table: str, values: dict[str, Any]) -> str:
    """``text`` with a new ``[[table]]`` (a host group, a fault, a KV tier) or ``[table]`` (a
    model: ``models.NAME``) of ``values`` added at its end."""
    array = table in ("hosts", "faults", "worker.kv_tiers")
    header = f"[[{table}]]" if array else f"[{table}]"
    if not array and any(b[0] == table and not b[1] for b in _bodies(text.splitlines())):
        raise TomlEditError(f"{table}: the config has that table already; give it another name")
    if not all(isinstance(k, str) and re.fullmatch(r"[A-Za-z0-9_-]+", k) for k in values):
        raise TomlEditError(f"{table}: its keys must be plain names; add it in the TOML pane")
    body = "\n".join(f"{k} = {_value_text(v)}" for k, v in values.items())
    out = text.rstrip("\n") + f"\n\n{header}\n{body}\n"
    data = _loads(out, table)
    try:
        written = _get(data, table)
    except (KeyError, IndexError, TypeError):
        written = None
    if (written[-1] if array and isinstance(written, list) else written) != values:
        raise TomlEditError(f"{table}: could not be added to this TOML; add it in the TOML pane")
    return out


def remove_table(text: str, path: str) -> str:
    """``text`` without the table at ``path`` (``hosts[1]``, ``faults[0]``,
    ``models.big``, ``autoscaler``) and the tables below it, comments in them
    included; the lines of every other table are kept as written."""
    m = re.fullmatch(r"([A-Za-z0-9_.-]+?)(?:\[(\d+)\])?", path)
    if m is None:
        raise TomlEditError(f"{path}: not a table path this can remove; edit the TOML by hand")
    table, index = m.group(1), None if m.group(2) is None else int(m.group(2))
    lines = text.splitlines()
    bodies = _bodies(lines)
    drop: list[tuple[int, int]] = []
    if index is not None:
        arrays = [b for b in bodies if b[0] == table and b[1]]
        if index >= len(arrays):
            raise TomlEditError(f"{path}: the config has no {table}[{index}]")
        drop.append((arrays[index][2] - 1, arrays[index][3]))
    else:
        drop += [(lo - 1, hi) for name, _, lo, hi in bodies if name == table or name.startswith(f"{table}.")]
    keep = [line for i, line in enumerate(lines) if not any(lo <= i < hi for lo, hi in drop)]
    out = "\n".join(keep).rstrip("\n") + "\n"
    data = _loads(out, path)
    before = tomllib.loads(text)
    try:
        if index is not None:
            expected = list(_get(before, table))
            del expected[index]
            if list(_get(data, table)) != expected:
                raise TomlEditError(f"{path}: could not be removed from this TOML; delete it in the TOML pane")
        else:
            _get(data, table)
            raise TomlEditError(f"{path}: could not be removed from this TOML; delete it in the TOML pane")
    except (KeyError, IndexError, TypeError):
        pass
    return out


def set_key(text: str, path: str, value: Any) -> str:
    """``text`` with the key at ``path`` set to ``value`` (a number, string, bool or list)."""
    table, index, key = _split(path)
    lines = text.splitlines()
    candidates = _table_body(lines, path, table, index)
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
