"""Dependencies point down: models and services never load the API, nor do the exports.

Like the emulator's purity test, each check imports the modules in a fresh
interpreter and looks at ``sys.modules``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _api_modules_loaded_by(*modules: str) -> list[str]:
    code = (
        "import json, sys, django\n"
        "django.setup()\n"
        f"import {', '.join(modules)}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m == 'reviewer.api' or m.startswith('reviewer.api.'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "DJANGO_SETTINGS_MODULE": "reviewer.settings"})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("modules", [
    ("reviewer.models",),
    ("reviewer.review.services", "reviewer.review.findings", "reviewer.runs.services",
     "reviewer.runs.sweeps", "reviewer.runs.player"),
    ("reviewer.exports.formats",),
    ("reviewer.tasks", "reviewer.selectors", "reviewer.representations"),
])
def test_it_loads_no_api_module_when_importing(modules: tuple[str, ...]) -> None:
    assert _api_modules_loaded_by(*modules) == []


def test_it_would_notice_an_api_module_being_loaded() -> None:
    # The check itself can fail: importing the API shows up.
    assert "reviewer.api.serializers" in _api_modules_loaded_by("reviewer.api.serializers")
