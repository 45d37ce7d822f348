"""The emulator stays a pure-Python package, usable without the web stack."""

import json
import subprocess
import sys


def test_it_imports_emulator_without_django_celery_or_channels() -> None:
    code = (
        "import json, sys, emulator\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'django', 'celery', 'channels', 'channels_redis', 'daphne', 'reviewer', 'kombu'})\n"
        "print(json.dumps(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []
