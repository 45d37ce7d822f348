"""``docs/architecture.md`` names only what exists.

Every code name the document gives in backticks is looked up in the tree: a path
(``reviewer/runs/broker.py``, ``emulator/sim/``; ``runs/`` in the web app's part) must be a
file or folder of the repository or of one of the packages, a dotted name
under ``reviewer`` or ``emulator`` a module or something a module defines, a call
(``offer(batch)``) a function or method defined in the packages, and a bare identifier
a name the packages' source uses. Code blocks are examples and are not read.
"""

from __future__ import annotations

import builtins
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = ("reviewer", "emulator")
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def inline_names(markdown: str) -> list[str]:
    """The backticked spans of the prose (fenced code blocks left out)."""
    prose = re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M)
    return re.findall(r"`([^`\n]+)`", prose)


@cache
def _sources() -> dict[Path, str]:
    return {p: p.read_text(encoding="utf-8") for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


@cache
def _words() -> frozenset[str]:
    return frozenset(w for text in _sources().values() for w in re.findall(IDENT, text))


def _defines(text: str, name: str) -> bool:
    return re.search(rf"^\s*(?:async\s+)?(?:def|class)\s+{name}\b|^\s*{name}\s*[:=]|"
                     rf"^\s*(?:from\s+\S+\s+)?import\s+.*\b{name}\b", text, re.M) is not None


def _module_file(dotted: str) -> Path | None:
    base = ROOT.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def problem(name: str) -> str | None:
    """Why ``name`` does not resolve, or None when it does (or is not a code name)."""
    name = name.strip()
    if re.fullmatch(r"[\w./-]+/[\w./-]*", name):  # a path
        found = any((base / name.rstrip("/")).exists() for base in (ROOT, *(ROOT / p for p in PACKAGES)))
        return None if found else f"no file or folder {name}"
    call = re.fullmatch(rf"({IDENT}(?:\.{IDENT})*)\(.*\)", name)
    if call:
        name = call.group(1)
        last = name.rsplit(".", 1)[-1]
        if "." not in name or name.split(".")[0] not in PACKAGES:
            found = hasattr(builtins, last) or any(
                re.search(rf"^\s*(?:async\s+)?(?:def|class)\s+{last}\b|^\s*{last}\s*=", t, re.M)
                for t in _sources().values())
            return None if found else f"no function {last}"
    if re.fullmatch(rf"{IDENT}(?:\.{IDENT})+", name) and name.split(".")[0] in PACKAGES:
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            module = _module_file(".".join(parts[:cut]))
            if module is None:
                continue
            rest = parts[cut:]
            if not rest or _defines(module.read_text(encoding="utf-8"), rest[0]):
                return None
            return f"{'.'.join(parts[:cut])} defines no {rest[0]}"
        return f"no module {name}"
    if re.fullmatch(IDENT, name) and not name.islower() or re.fullmatch(rf"{IDENT}_{IDENT}", name or ""):
        return None if name in _words() else f"no name {name} in the source"
    return None


def test_every_code_name_in_the_architecture_doc_exists() -> None:
    names = inline_names(DOC.read_text(encoding="utf-8"))
    assert len(names) > 50
    assert [f"{n}: {why}" for n in names if (why := problem(n))] == []


@pytest.mark.parametrize("name", [
    "reviewer/runs/dispatch.py", "emulator/sim/nowhere/", "runs/nowhere.py", "reviewer.runs.services.no_such_service",
    "reviewer.nowhere", "batch_finished(w)", "NO_SUCH_SETTING", "runs_no_such_thing",
])
def test_a_name_that_does_not_exist_is_caught(name: str) -> None:
    assert problem(name)


@pytest.mark.parametrize("name", [
    "reviewer/runs/broker.py", "emulator/sim/", "reviewer.runs.broker.send_task_after_commit",
    "emulator.analysis.record", "offer(batch)", "EventKind(name, priority)", "runs/broker.py", "UPLOAD_MAX_BYTES", "fleet_config_save", "python -m emulator",
])
def test_a_name_that_exists_is_found(name: str) -> None:
    assert problem(name) is None
