"""The user's token page: create, replace and revoke the API token scripts use."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from review_data_fixtures import *  # noqa: F403

pytestmark = pytest.mark.django_db


def test_it_asks_anonymous_visitors_to_sign_in(client):
    response = client.get("/account/tokens/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_a_user_creates_a_token_that_the_api_accepts(client, people, open_review):
    client.force_login(people["reviewer"])
    assert "You have no token." in client.get("/account/tokens/").content.decode()
    page = client.post("/account/tokens/", {"action": "create"})
    assert page.status_code == 200
    key = Token.objects.get(user=people["reviewer"]).key
    assert key in page.content.decode()
    # Shown once: a later visit shows only the start of the key.
    later = client.get("/account/tokens/").content.decode()
    assert key not in later and key[:6] in later
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get(f"/api/sessions/{open_review.pk}/").status_code == 200


def test_replacing_a_token_retires_the_old_one(client, people):
    client.force_login(people["owner"])
    client.post("/account/tokens/", {"action": "create"})
    old = Token.objects.get(user=people["owner"]).key
    client.post("/account/tokens/", {"action": "create"})
    new = Token.objects.get(user=people["owner"]).key
    assert new != old
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {old}")
    assert api.get("/api/sessions/").status_code == 401


def test_revoking_a_token_locks_scripts_out(client, people):
    client.force_login(people["owner"])
    client.post("/account/tokens/", {"action": "create"})
    key = Token.objects.get(user=people["owner"]).key
    response = client.post("/account/tokens/", {"action": "revoke"})
    assert response.status_code == 302
    assert not Token.objects.filter(user=people["owner"]).exists()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/sessions/").status_code == 401


def test_a_user_only_touches_their_own_token(client, people):
    Token.objects.create(user=people["reviewer"])
    client.force_login(people["owner"])
    client.post("/account/tokens/", {"action": "revoke"})
    assert Token.objects.filter(user=people["reviewer"]).exists()
