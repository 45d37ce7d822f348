"""The layers, read from the source: dependencies point down, wherever an import stands.

The floors, top to bottom:

- the entry points: the REST API (``reviewer.api``), the pages (``reviewer.views``,
  ``reviewer.urls``), the websocket consumers and routing, the admin, the ASGI
  application and the management commands;
- the services below them (``reviewer.runs``, ``reviewer.review``, ``reviewer.fleets``,
  ``reviewer.exports``, ``reviewer.text``, ``reviewer.ops``, selectors, representations)
  and the Celery tasks, which take ids and call a service;
- the models, and the emulator, which knows nothing of the web.

Each rule is checked over every import statement of the source (top of a module,
inside a function, in a class body) by :mod:`import_graph`, so an import taken late
still counts, and each rule is shown to fail on a copy of the tree with one upward
import planted in it.
"""

from __future__ import annotations

import shutil
from collections import defaultdict, deque
from pathlib import Path

import pytest
from import_graph import ImportEdge, import_edges, within

ROOT = Path(__file__).resolve().parents[1]

#: The top floor: what the outside world calls.
ENTRY = ("reviewer.api", "reviewer.views", "reviewer.urls", "reviewer.realtime.consumers",
         "reviewer.realtime.inbox_consumer", "reviewer.realtime.routing", "reviewer.admin",
         "reviewer.asgi", "reviewer.management")
#: What the emulator may not know of.
WEB = ("django", "reviewer", "celery", "kombu", "channels", "channels_redis", "daphne", "rest_framework",
       "redis", "plotly")


def _is_entry(module: str) -> bool:
    return any(within(module, e) for e in ENTRY)


def _graph(edges: list[ImportEdge]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for e in edges:
        if not e.typing_only:
            graph[e.source].add(e.target)
    return graph


def _chain(graph: dict[str, set[str]], start: str, bad: str) -> list[str] | None:
    """The import chain from ``start`` to a module inside ``bad``, or None."""
    before: dict[str, str | None] = {start: None}
    todo = deque([start])
    while todo:
        here = todo.popleft()
        if within(here, bad):
            chain = [here]
            while (prev := before[chain[-1]]) is not None:
                chain.append(prev)
            return chain[::-1]
        for there in graph.get(here, ()):
            if there not in before:
                before[there] = here
                todo.append(there)
    return None


def below_the_api_loading_it(root: Path) -> list[str]:
    """Chains by which a module below the entry points (a model, a service, a task)
    loads the REST API."""
    edges = import_edges(root, "reviewer")
    graph = _graph(edges)
    sources = sorted({e.source for e in edges if not _is_entry(e.source)})
    found = [_chain(graph, s, "reviewer.api") for s in sources]
    return [" -> ".join(c) for c in found if c]


def tasks_imported(root: Path) -> list[str]:
    """Imports of the Celery tasks module by the application: services send tasks by
    name through ``reviewer.runs.broker`` instead."""
    return [str(e) for e in import_edges(root, "reviewer")
            if within(e.target, "reviewer.tasks") and e.source != "reviewer.tasks"]


def web_in_the_emulator(root: Path) -> list[str]:
    """Imports of the web stack (or of the web app) by the emulator."""
    return [str(e) for e in import_edges(root, "emulator") if e.target.split(".")[0] in WEB]


def late_imports_without_reason(root: Path) -> list[str]:
    """Imports inside a function with no comment saying why they are not at the top."""
    return [str(e) for e in import_edges(root, "reviewer", "emulator") if e.in_function and not e.reason]


RULES = [below_the_api_loading_it, tasks_imported, web_in_the_emulator, late_imports_without_reason]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.__name__)
def test_the_tree_keeps_the_rule(rule: object) -> None:
    assert rule(ROOT) == []  # type: ignore[operator]


def test_the_rules_read_the_whole_tree() -> None:
    edges = import_edges(ROOT, "reviewer", "emulator")
    sources = {e.source for e in edges}
    assert {"reviewer.models.runs", "reviewer.runs.services", "reviewer.tasks", "emulator.sim.engine"} <= sources
    assert len(edges) > 1000


@pytest.fixture(scope="module")
def tree_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the two packages' sources, to plant imports in."""
    root = tmp_path_factory.mktemp("tree")
    for package in ("reviewer", "emulator"):
        shutil.copytree(ROOT / package, root / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.toml", "*.csv", "*.json", "*.jsonl",
                                                      "*.html", "*.js", "*.css", "*.md"))
    return root


def _plant(root: Path, path: str, code: str) -> str:
    """Append ``code`` to the file at ``path``; return what the file held before."""
    target = root / path
    before = target.read_text(encoding="utf-8")
    target.write_text(before + "\n\n" + code, encoding="utf-8")
    return before


@pytest.mark.parametrize(("rule", "path", "code", "names"), [
    (below_the_api_loading_it, "reviewer/models/runs.py",
     "def _later():\n    # a reason does not make it right\n    from reviewer.api import serializers\n",
     "reviewer.models.runs -> reviewer.api.serializers"),
    (below_the_api_loading_it, "reviewer/models/fields.py",  # through an entry point that loads the API
     "from reviewer.realtime import consumers  # noqa\n",
     "reviewer.models.fields -> reviewer.realtime.consumers -> reviewer.api.errors"),
    (tasks_imported, "reviewer/runs/services.py",
     "def _send():\n    from reviewer import tasks  # send it directly\n", "reviewer/runs/services.py"),
    (web_in_the_emulator, "emulator/sim/engine.py",
     "def _settings():\n    from django.conf import settings  # read the budget\n", "emulator/sim/engine.py"),
    (late_imports_without_reason, "emulator/analysis/nnls.py",
     "def _late():\n    import json\n\n    return json\n", "emulator/analysis/nnls.py"),
])
def test_each_rule_fails_on_a_planted_import(tree_copy: Path, rule: object, path: str, code: str,
                                             names: str) -> None:
    before = _plant(tree_copy, path, code)
    try:
        found = rule(tree_copy)  # type: ignore[operator]
    finally:
        (tree_copy / path).write_text(before, encoding="utf-8")
    assert found, f"{rule} missed the import planted in {path}"
    assert any(names in f for f in found), found
    assert rule(tree_copy) == []  # type: ignore[operator]
