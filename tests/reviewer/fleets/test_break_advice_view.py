"""The break pass's measured advice, served per session and kept per fleet version.

With ``BREAK_ADVICE_IN_BACKGROUND`` a docs worker works it out; the tests here
turn it off (conftest) except where they say so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

PRESET_DIR = Path(__file__).resolve().parents[3] / "emulator" / "scenario" / "presets"


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_it_serves_the_measured_advice_to_participants_only(django_user_model: Any) -> None:
    from reviewer.review import services

    owner = django_user_model.objects.create_user("owner")
    outsider = django_user_model.objects.create_user("outsider")
    doc = services.doc_create(owner=owner, title="Doc", body="Text.")
    toml = (PRESET_DIR / "low-traffic-no-close.toml").read_text()
    fleet = services.fleet_config_create(owner=owner, name="quiet", toml=toml, doc=doc)
    session = services.session_create(owner=owner, doc=doc, fleet_config=fleet)
    url = f"/sessions/{session.pk}/break-advice.json"

    answer = _client(owner).get(url)
    assert answer.status_code == 200
    advice = answer.json()
    assert advice["measured"] is True and len(advice["equivalent"]["policies"]) == 3
    assert _client(outsider).get(url).status_code == 404
    page = _client(owner).get(f"/sessions/{session.pk}/").content.decode()
    assert url in page  # the page's config names where to ask


def _quiet_session(django_user_model: Any) -> tuple[Any, Any]:
    from reviewer.review import services

    owner = django_user_model.objects.create_user("owner")
    doc = services.doc_create(owner=owner, title="Doc", body="Text.")
    toml = (PRESET_DIR / "low-traffic-no-close.toml").read_text()
    fleet = services.fleet_config_create(owner=owner, name="quiet", toml=toml, doc=doc)
    return owner, services.session_create(owner=owner, doc=doc, fleet_config=fleet)


def test_a_worker_works_it_out_while_the_page_asks_again(django_user_model: Any, settings: Any, monkeypatch: Any) -> None:
    from datetime import timedelta

    from reviewer.fleets import break_advice as service
    from reviewer.models import FleetConfigVersion
    from reviewer.tasks import break_advice as task

    settings.BREAK_ADVICE_IN_BACKGROUND = True
    sent: list[int] = []
    monkeypatch.setattr(service, "_send_task", sent.append)
    owner, session = _quiet_session(django_user_model)
    client, url = _client(owner), f"/sessions/{session.pk}/break-advice.json"
    version = session.fleet_config.latest_version()

    first = client.get(url)
    assert first.status_code == 202 and first.json()["pending"] is True and first["Retry-After"] == "2"
    assert client.get(url).status_code == 202
    assert sent == [version.pk], "asked once, not once per poll"
    # An ask nobody answered for a minute (no docs worker yet, a lost task) is sent again.
    FleetConfigVersion.objects.filter(pk=version.pk).update(
        break_advice_asked_at=version.created_at - timedelta(minutes=5))
    assert client.get(url).status_code == 202 and sent == [version.pk, version.pk]

    assert task.run(version.pk) is True  # what the docs worker runs
    answer = client.get(url)
    assert answer.status_code == 200 and answer.json()["measured"] is True
    assert FleetConfigVersion.objects.get(pk=version.pk).break_advice == answer.json()
    assert len(sent) == 2


def test_the_advice_is_kept_per_version_and_worked_out_again_for_a_new_one(django_user_model: Any) -> None:
    from reviewer.models import FleetConfigVersion
    from reviewer.review import services

    owner, session = _quiet_session(django_user_model)
    url = f"/sessions/{session.pk}/break-advice.json"
    first = _client(owner).get(url).json()
    fleet = session.fleet_config
    services.fleet_config_save(config=fleet, author=owner, toml=fleet.toml.replace("seed = 1", "seed = 2"))
    assert fleet.versions.count() == 2
    assert _client(owner).get(url).json()["measured"] is True
    stored = list(FleetConfigVersion.objects.filter(config=fleet).order_by("number").values_list("break_advice", flat=True))
    assert stored[0] == first and stored[1] is not None
