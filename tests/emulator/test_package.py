"""The emulator package stands alone: no web stack on import, typed, data files shipped."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources


def test_importing_emulator_loads_no_django_celery_or_channels() -> None:
    code = (
        "import json, sys, emulator, emulator.cli, emulator.sim.engine\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'django', 'celery', 'channels', 'channels_redis', 'daphne', 'kombu', 'reviewer'})\n"
        "print(json.dumps(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(out.stdout) == []


def test_it_ships_its_presets_and_type_marker_as_package_data() -> None:
    files = {p.name for p in resources.files("emulator").iterdir()}
    assert "py.typed" in files
    presets = {p.name for p in resources.files("emulator.scenario.presets").iterdir()}
    assert {"doc-as-written.toml", "peak-sized.toml", "retry-storm.toml"} <= presets
