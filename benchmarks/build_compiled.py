"""Build an optional compiled copy of the simulation's hot modules with mypyc.

    python benchmarks/build_compiled.py [--out build/compiled]

Copies the ``emulator`` package to ``--out`` and compiles there, with mypyc (it comes
with mypy), the worker models (``emulator/sim/workers/``), the event core
(``events.py``) and the dispatchers' request path (``books.py``, ``intake.py``,
``router.py``, ``dispatcher.py``): the same typed source, turned into C
extensions beside the copied ``.py`` files. Nothing in the repository changes and
nothing needs the build: the app and the tests import the source tree. A benchmark run
with ``--build compiled`` puts ``--out`` first on ``sys.path``; the results are
identical, only faster. Needs a C compiler and the Python headers; takes a minute or
two.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "build" / "compiled"
#: The compiled modules, relative to the package's parent.
MODULES = (
    "emulator/sim/workers",
    "emulator/sim/events.py",
    "emulator/sim/books.py",
    "emulator/sim/intake.py",
    "emulator/sim/router.py",
    "emulator/sim/dispatcher.py",
)


def compiled_modules(out: Path) -> list[str]:
    """The source files the build compiles (relative to ``out``)."""
    files: list[str] = []
    for m in MODULES:
        path = out / m
        files += sorted(str(p.relative_to(out)) for p in path.glob("*.py")) if path.is_dir() else [m]
    return files


def build(out: Path) -> None:
    """Copy the package to ``out`` and compile the hot modules there."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    shutil.copytree(
        ROOT / "emulator", out / "emulator", ignore=shutil.ignore_patterns("__pycache__", "*.so")
    )
    shutil.copy(ROOT / "pyproject.toml", out / "pyproject.toml")  # mypy's settings
    files = compiled_modules(out)
    print(f"compiling {len(files)} modules into {out} ...", flush=True)
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "mypyc", *files], cwd=out, capture_output=True, text=True
    )
    if result.returncode != 0:
        sys.stderr.write(result.stdout[-4000:] + result.stderr[-4000:])
        raise SystemExit(f"mypyc failed (exit {result.returncode}); the source tree is unchanged")
    built = sorted(p.name for p in (out / "emulator").rglob("*.so"))
    print(f"built {len(built)} extensions in {time.perf_counter() - started:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the build goes")
    args = parser.parse_args()
    build(args.out.resolve())


if __name__ == "__main__":
    main()
