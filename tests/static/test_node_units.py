"""The browser code's pure modules, unit-tested under ``node --test``.

The tests beside this file (``*.test.mjs``, laid out like ``static/``) import the
modules the pages load, unchanged: ES modules with no bundler, the ones without DOM
or plotly at import time (``// @ts-check`` at their top, and type-checked by ``tsc``).
Node and tsc come from Debian's ``nodejs`` and ``node-typescript`` packages
(``./dev test`` installs them when missing).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def test_the_pure_browser_modules_pass_their_node_tests() -> None:
    node = shutil.which("node")
    assert node, "node is missing: install Debian's nodejs package (./dev test does)"
    files = sorted(str(p.relative_to(ROOT)) for p in HERE.rglob("*.test.mjs"))
    assert len(files) >= 3
    out = subprocess.run([node, "--test", *files], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "# fail 0" in out.stdout


def test_every_module_marked_pure_has_a_node_test() -> None:
    marked = {p.relative_to(ROOT / "static").with_suffix("") for p in (ROOT / "static").rglob("*.js")
              if p.read_text(encoding="utf-8").startswith("// @ts-check")}
    tested = {p.relative_to(HERE).with_suffix("").with_suffix("") for p in HERE.rglob("*.test.mjs")}
    assert marked, "no module is marked // @ts-check"
    assert marked <= tested, marked - tested


def test_the_modules_marked_ts_check_type_check() -> None:
    tsc = shutil.which("tsc")
    assert tsc, "tsc is missing: install Debian's node-typescript package (./dev test does)"
    marked = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "static").rglob("*.js")
                    if p.read_text(encoding="utf-8").startswith("// @ts-check"))
    out = subprocess.run([tsc, "--noEmit", "--allowJs", "--checkJs", "--target", "es2022", "--module", "es2022",
                          "--lib", "es2022,dom", *marked], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
