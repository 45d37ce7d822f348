"""The import-graph reader sees every import the source has, wherever it stands."""

from __future__ import annotations

from pathlib import Path

from import_graph import import_edges, within


def _package(tmp_path: Path) -> Path:
    pkg = tmp_path / "pkg"
    (pkg / "low").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low" / "__init__.py").write_text("")
    (pkg / "low" / "base.py").write_text("X = 1\n")
    (pkg / "high.py").write_text(
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "from .low import base\n"
        "if TYPE_CHECKING:\n"
        "    from pkg.low.base import X\n"
        "def late():\n"
        "    # the low layer is heavy to import\n"
        "    import pkg.low.base\n"
        "    from . import low  # a package, not a module file\n"
    )
    return tmp_path


def test_it_reads_top_level_relative_typing_and_function_imports(tmp_path: Path) -> None:
    edges = [e for e in import_edges(_package(tmp_path), "pkg") if within(e.target, "pkg")]
    seen = {(e.target, e.line, e.in_function, e.typing_only) for e in edges}
    assert seen == {
        ("pkg.low.base", 3, False, False),
        ("pkg.low.base", 5, False, True),
        ("pkg.low.base", 8, True, False),
        ("pkg.low", 9, True, False),
    }


def test_it_reads_the_reason_given_beside_an_import(tmp_path: Path) -> None:
    edges = {e.line: e for e in import_edges(_package(tmp_path), "pkg")}
    assert edges[8].reason == "the low layer is heavy to import"
    assert edges[9].reason == "a package, not a module file"
    assert edges[3].reason == ""


def test_a_run_of_imports_under_one_comment_shares_its_reason(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(
        "def late():\n"
        "    # both are heavy\n"
        "    import json\n"
        "    import csv\n"
        "\n"
        "    import sqlite3\n"
    )
    reasons = {e.target: e.reason for e in import_edges(tmp_path, "pkg")}
    assert reasons == {"json": "both are heavy", "csv": "both are heavy", "sqlite3": ""}
