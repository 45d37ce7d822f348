"""The import graph of our packages, read from the source rather than from ``sys.modules``.

A rule about layers holds only as the source says: an import inside a function is as
real a dependency as one at the top of a module, it is just taken later. So the layer
tests read every ``import`` and ``from ... import`` statement with ``ast``, wherever it
stands (module level, class body, function body, ``if TYPE_CHECKING`` block), resolve
relative imports, and check the edges.

    edges = import_edges(ROOT, "emulator")
    upward = [e for e in edges if e.source.startswith("emulator.scenario") and e.target.startswith("emulator.sim")]

Imports under ``if TYPE_CHECKING:`` are marked (``typing_only``): they are annotations,
not dependencies at run time, and a rule may choose to allow them.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ImportEdge:
    """One import statement's dependency of module ``source`` on module ``target``."""

    source: str  # the importing module, dotted (``reviewer.runs.services``)
    target: str  # the imported module, dotted; for ``from a import b``, ``a.b`` when that is a module, else ``a``
    path: Path  # the importing file
    line: int
    in_function: bool  # the statement sits inside a function or method body
    typing_only: bool  # the statement sits under ``if TYPE_CHECKING:``
    reason: str  # the comment on the statement's line or the line just above ('' if none)

    def __str__(self) -> str:
        where = " (inside a function)" if self.in_function else ""
        return f"{self.path}:{self.line}: {self.source} imports {self.target}{where}"


def module_name(root: Path, path: Path) -> str:
    """The dotted module name of ``path`` under ``root`` (a package's ``__init__``
    is the package)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _comment_near(lines: list[str], line: int) -> str:
    """The comment on source line ``line`` (1-based), or on the line above it; a run of
    import lines directly under one comment shares it."""
    here = lines[line - 1] if 0 < line <= len(lines) else ""
    if "#" in here:
        return here.split("#", 1)[1].strip()
    above = line - 2
    while above >= 0 and lines[above].strip().startswith(("from ", "import ")):
        above -= 1
    text = lines[above].strip() if above >= 0 else ""
    return text[1:].strip() if text.startswith("#") else ""


def _resolve(source: str, is_package: bool, level: int, module: str | None) -> str:
    """The absolute module a relative ``from`` import names."""
    if level == 0:
        return module or ""
    base = source.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def file_edges(root: Path, path: Path, modules: set[str] | None = None) -> list[ImportEdge]:
    """Every import statement of one file, as edges. ``modules`` (dotted names known to
    exist) lets ``from pkg import sub`` resolve to the submodule ``pkg.sub``."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text, filename=str(path))
    lines = text.splitlines()
    source = module_name(root, path)
    is_package = path.name == "__init__.py"
    out: list[ImportEdge] = []

    def visit(node: ast.AST, in_function: bool, typing_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                visit(child, True, typing_only)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    visit_stmt(stmt, in_function, True)
                for stmt in child.orelse:
                    visit_stmt(stmt, in_function, typing_only)
            else:
                visit_stmt(child, in_function, typing_only)

    def visit_stmt(stmt: ast.AST, in_function: bool, typing_only: bool) -> None:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                add(alias.name, stmt.lineno, in_function, typing_only)
        elif isinstance(stmt, ast.ImportFrom):
            base = _resolve(source, is_package, stmt.level, stmt.module)
            for alias in stmt.names:
                sub = f"{base}.{alias.name}" if base else alias.name
                add(sub if modules is not None and sub in modules else base, stmt.lineno, in_function, typing_only)
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            visit(stmt, True, typing_only)
        elif isinstance(stmt, ast.If) and _is_type_checking(stmt.test):
            visit(stmt, in_function, True)
        else:
            visit(stmt, in_function, typing_only)

    def add(target: str, line: int, in_function: bool, typing_only: bool) -> None:
        out.append(ImportEdge(source, target, path, line, in_function, typing_only, _comment_near(lines, line)))

    visit(tree, False, False)
    return out


def import_edges(root: Path, *packages: str) -> list[ImportEdge]:
    """Every import statement in the given top-level packages under ``root``."""
    files = [p for pkg in packages for p in sorted((root / pkg).rglob("*.py")) if "migrations" not in p.parts]
    modules = {module_name(root, p) for p in files}
    return [edge for p in files for edge in _cached_edges(root, p, modules)]


_PARSED: dict[tuple[Path, Path, int, int, frozenset[str]], list[ImportEdge]] = {}


def _cached_edges(root: Path, path: Path, modules: set[str]) -> list[ImportEdge]:
    """``file_edges``, read again only when the file changed (several rules read one tree)."""
    st = path.stat()
    key = (root, path, st.st_mtime_ns, st.st_size, frozenset(modules))
    if key not in _PARSED:
        _PARSED[key] = file_edges(root, path, modules)
    return _PARSED[key]


def within(name: str, prefix: str) -> bool:
    """``name`` is the module ``prefix`` or inside it."""
    return name == prefix or name.startswith(prefix + ".")
