"""``manage.py check --deploy`` with production settings from the environment."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# What docs/operations.md tells an operator to set behind a TLS proxy.
PRODUCTION_ENV = {
    "DEBUG": "0",
    "SECURE_SSL_REDIRECT": "1",
    "SESSION_COOKIE_SECURE": "1",
    "CSRF_COOKIE_SECURE": "1",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "1",
    "SECURE_HSTS_PRELOAD": "1",
    "SECURE_PROXY_SSL_HEADER": "1",
    "ALLOWED_HOSTS": "review.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://review.example.com",
}


def _check_deploy(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATA_DIR": str(tmp_path), "SECRET_KEY": secrets.token_urlsafe(50), **extra}
    return subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_it_passes_check_deploy_with_the_documented_production_settings(tmp_path: Path) -> None:
    done = _check_deploy(tmp_path, **PRODUCTION_ENV)
    assert done.returncode == 0, done.stderr
    assert "no issues" in done.stdout


def test_it_fails_check_deploy_without_them(tmp_path: Path) -> None:
    done = _check_deploy(tmp_path, DEBUG="0")
    assert done.returncode != 0
    assert "SECURE_HSTS_SECONDS" in done.stderr
