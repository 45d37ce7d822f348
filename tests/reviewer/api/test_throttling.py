"""Login lockout (django-axes) and API throttles, with their settings."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client
from review_data_fixtures import *  # noqa: F403

pytestmark = pytest.mark.django_db


def _login(client: Client, username: str, password: str) -> Any:
    return client.post("/accounts/login/", {"username": username, "password": password})


def test_it_locks_a_username_out_after_repeated_wrong_passwords(people: dict, settings: Any) -> None:
    settings.AXES_FAILURE_LIMIT = 5
    attacker = Client()
    for _ in range(4):
        assert _login(attacker, "owner", "guess").status_code == 200  # the form again, with an error
    assert _login(attacker, "owner", "guess").status_code == 429  # the fifth locks the account out
    locked = _login(attacker, "owner", "owner")
    assert locked.status_code == 429
    assert "_auth_user_id" not in attacker.session
    # Other accounts are not locked by it (from another address: the attacker's
    # address is locked out as well, see test_password_reset.py).
    other = Client(REMOTE_ADDR="10.0.0.2")
    assert _login(other, "reviewer", "reviewer").status_code == 302
    assert other.session["_auth_user_id"] == str(people["reviewer"].pk)


def test_it_lets_a_user_in_after_fewer_wrong_passwords_than_the_limit(people: dict, settings: Any) -> None:
    settings.AXES_FAILURE_LIMIT = 5
    client = Client()
    for _ in range(4):
        _login(client, "owner", "guess")
    assert _login(client, "owner", "owner").status_code == 302


def test_it_throttles_a_users_api_calls_past_the_burst_rate(api_as: Any, settings: Any) -> None:
    cache.clear()
    settings.API_THROTTLE_BURST = "5/min"
    client = api_as("owner")
    assert [client.get("/api/sessions/").status_code for _ in range(5)] == [200] * 5
    refused = client.get("/api/sessions/")
    assert refused.status_code == 429
    assert "Retry-After" in refused
    # Another user has their own allowance.
    assert api_as("reviewer").get("/api/sessions/").status_code == 200
    cache.clear()


def test_it_throttles_a_users_api_calls_past_the_sustained_rate(api_as: Any, settings: Any) -> None:
    cache.clear()
    settings.API_THROTTLE_SUSTAINED = "3/hour"
    client = api_as("owner")
    assert [client.get("/api/docs/").status_code for _ in range(4)] == [200, 200, 200, 429]
    cache.clear()
