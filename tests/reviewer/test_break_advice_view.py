"""The break pass's measured advice, served per session and kept per fleet version."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client

pytestmark = pytest.mark.django_db

PRESET_DIR = Path(__file__).resolve().parents[2] / "emulator" / "scenario" / "presets"


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_it_serves_the_measured_advice_to_participants_only(django_user_model: Any) -> None:
    from reviewer.services import review as services

    cache.clear()
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
