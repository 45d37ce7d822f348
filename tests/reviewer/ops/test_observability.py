"""Operations: JSON logs on request, Sentry when SENTRY_DSN is set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


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


@pytest.mark.django_db
def test_it_serves_prometheus_metrics_to_staff_and_token_holders(settings, django_user_model, redis_url) -> None:
    from django.test import Client
    from django.utils import timezone

    from reviewer.models import EmulatorRun

    settings.METRICS_TOKEN = "s3cret"
    owner = django_user_model.objects.create_user("owner")
    EmulatorRun.objects.create(started_by=owner, scenario={"duration_s": 5}, seed=1, status="queued",
                               enqueued_at=timezone.now())
    EmulatorRun.objects.create(started_by=owner, scenario={"duration_s": 5}, seed=1, status="done")
    Client().get("/healthz")  # a request for the request counters
    assert Client().get("/metrics").status_code == 403
    assert Client(HTTP_AUTHORIZATION="Bearer wrong").get("/metrics").status_code == 403
    response = Client(HTTP_AUTHORIZATION="Bearer s3cret").get("/metrics")
    assert response.status_code == 200
    text = response.content.decode()
    assert 'reviewer_runs{status="queued"} 1.0' in text and 'reviewer_runs{status="done"} 1.0' in text
    assert "reviewer_run_queue_length 1.0" in text
    assert "reviewer_celery_workers" in text and "reviewer_broker_queue_length" in text
    assert "django_http_requests_total_by_view_transport_method_total" in text
    staff = Client()
    staff.force_login(django_user_model.objects.create_user("ops", is_staff=True))
    assert staff.get("/metrics").status_code == 200
