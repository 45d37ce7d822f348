"""A fleet's analysis (numbers.json) is worked out by a docs worker, never by the web
request: the page gets 202 until the stored record exists, then the figures."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

SMALL = """
name = "small"
duration_s = 10
[traffic]
qps = 40
[models.small]
share = 1.0
worker_units = 2
tokens = 500
[dispatcher]
max_batch_tokens = 5000
close_after_s = 0.2
policy = "pull"
[worker]
batch_s = 0.5
[[hosts]]
count = 2
units = 10
workers = ["small@0", "small@2"]
"""


def _session(django_user_model: Any) -> tuple[Any, Any]:
    from reviewer.review import services

    owner = django_user_model.objects.create_user("owner")
    doc = services.doc_create(owner=owner, title="Doc", body="Text.")
    fleet = services.fleet_config_create(owner=owner, name="small", toml=SMALL, doc=doc)
    return owner, services.session_create(owner=owner, doc=doc, fleet_config=fleet)


def test_the_web_request_does_not_compute_and_answers_202_until_the_record_is_stored(
        django_user_model: Any, settings: Any, monkeypatch: Any) -> None:
    from emulator.analysis import record as emulator_record
    from reviewer.fleets import analysis_record as service
    from reviewer.models import FleetConfigVersion
    from reviewer.tasks import fleet_analysis

    settings.ANALYSIS_IN_BACKGROUND = True
    sent: list[int] = []
    monkeypatch.setattr(service, "_send_task", sent.append)
    computed: list[Any] = []
    real = emulator_record.fleet_record
    monkeypatch.setattr(emulator_record, "fleet_record", lambda *a, **k: computed.append(1) or real(*a, **k))
    owner, session = _session(django_user_model)
    client = Client()
    client.force_login(owner)
    url = f"/sessions/{session.pk}/numbers.json"
    version = session.fleet_config.latest_version()

    first = client.get(url)
    assert first.status_code == 202 and first.json()["pending"] is True and first["Retry-After"] == "2"
    assert client.get(url).status_code == 202
    assert computed == [], "the web request worked the analysis out"
    assert sent == [version.pk], "asked once, not once per poll"
    # An ask nobody answered for a minute is sent again.
    stale = (version.created_at - timedelta(minutes=5)).isoformat()
    FleetConfigVersion.objects.filter(pk=version.pk).update(analysis={"asked_at": stale})
    assert client.get(url).status_code == 202 and sent == [version.pk, version.pk]

    assert fleet_analysis.apply(args=[version.pk]).get() is True  # what the docs worker runs (eager)
    assert computed == [1]
    answer = client.get(url)
    assert answer.status_code == 200 and answer.json()["figures"]
    assert computed == [1] and len(sent) == 2


def test_a_fleet_over_the_memory_limit_is_refused_and_the_page_stops_waiting(
        django_user_model: Any, settings: Any, monkeypatch: Any) -> None:
    from emulator.analysis import record as emulator_record
    from reviewer.tasks import fleet_analysis

    settings.ANALYSIS_IN_BACKGROUND = True
    settings.ANALYSIS_MEMORY_LIMIT_MB = 64
    owner, session = _session(django_user_model)
    version = session.fleet_config.latest_version()

    def greedy(*args: Any, **kwargs: Any) -> Any:
        return bytearray(512 * 1024 * 1024)  # over the limit: MemoryError in the worker

    monkeypatch.setattr(emulator_record, "fleet_record", greedy)
    assert fleet_analysis.apply(args=[version.pk]).get() is False
    client = Client()
    client.force_login(owner)
    answer = client.get(f"/sessions/{session.pk}/numbers.json")
    assert answer.status_code == 422 and "more than 64 MB" in answer.json()["error"]
