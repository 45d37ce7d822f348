"""Operations: JSON logs on request, Sentry when SENTRY_DSN is set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _python(tmp_path: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("SENTRY_DSN", "LOG_FORMAT")}
    full = {**clean, "DATA_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "reviewer.settings", **env}
    return subprocess.run([sys.executable, "-c", "import django; django.setup(); " + code], cwd=ROOT, env=full,
                          capture_output=True, text=True, timeout=60)


def test_it_writes_one_json_object_per_log_line_when_asked(tmp_path: Path) -> None:
    done = _python(tmp_path, "import logging; logging.getLogger('reviewer.test').warning('queue %s grew', 3)",
                   LOG_FORMAT="json")
    assert done.returncode == 0, done.stderr
    line = json.loads(done.stderr.strip().splitlines()[-1])
    assert (line["level"], line["logger"], line["message"]) == ("WARNING", "reviewer.test", "queue 3 grew")
    assert "time" in line


def test_it_writes_plain_text_logs_by_default(tmp_path: Path) -> None:
    done = _python(tmp_path, "import logging; logging.getLogger('reviewer.test').warning('plain')")
    assert done.stderr.strip().splitlines()[-1] == "plain"


def test_it_reports_to_sentry_only_when_a_dsn_is_set(tmp_path: Path) -> None:
    code = "import sentry_sdk; c = sentry_sdk.get_client(); print(c.is_active(), c.dsn)"
    with_dsn = _python(tmp_path, code, SENTRY_DSN="https://public@sentry.example.invalid/7")
    assert with_dsn.stdout.split() == ["True", "https://public@sentry.example.invalid/7"], with_dsn.stderr
    assert _python(tmp_path, code).stdout.split()[0] == "False"
