"""No module of the packages grows past about 500 lines without saying why.

A module that long says, in its docstring, in a paragraph starting "Kept as one
module:", why it is not split; the rest stay short enough to read in one sitting.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 500
REASON = "Kept as one module:"


def long_modules_without_reason(root: Path, packages: tuple[str, ...] = ("reviewer", "emulator")) -> list[str]:
    """The modules over ``LIMIT`` lines whose docstring gives no reason, with their length."""
    out = []
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            text = path.read_text(encoding="utf-8")
            lines = text.count("\n") + 1
            if lines > LIMIT and REASON not in (ast.get_docstring(ast.parse(text)) or ""):
                out.append(f"{path.relative_to(root)}: {lines} lines")
    return out


def test_every_long_module_says_why_it_is_one_module() -> None:
    assert long_modules_without_reason(ROOT) == []


@pytest.mark.parametrize(("docstring", "flagged"), [
    ('"""A long module."""', True),
    ('"""A long module.\n\nKept as one module: its parts share one table."""', False),
])
def test_a_long_module_is_flagged_unless_its_docstring_gives_the_reason(
        tmp_path: Path, docstring: str, flagged: bool) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "long.py").write_text(docstring + "\n" + "X = 1\n" * LIMIT)
    (tmp_path / "pkg" / "short.py").write_text('"""Short."""\nX = 1\n')
    assert long_modules_without_reason(tmp_path, ("pkg",)) == (
        [f"pkg/long.py: {LIMIT + docstring.count(chr(10)) + 2} lines"] if flagged else [])
