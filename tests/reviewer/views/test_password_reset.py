"""Password reset and sign-in limits: resets throttled per address and per account,
links only for a served host and port, tokens revoked by a reset, and a per-address
login lockout beside the per-account one."""

from __future__ import annotations

import re

import pytest
from django.core import mail
from django.core.cache import cache
from django.test import Client
from rest_framework.authtoken.models import Token
from review_data_fixtures import *  # noqa: F403

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh(people):
    cache.clear()
    for name, user in people.items():
        user.email = f"{name}@example.test"
        user.save(update_fields=["email"])


def test_it_sends_no_more_than_a_few_reset_emails_in_a_row():
    client = Client()
    for _ in range(22):
        assert client.post("/accounts/password_reset/", {"email": "owner@example.test"}).status_code == 302
    assert 1 <= len(mail.outbox) <= 3


def test_it_throttles_resets_per_address_over_many_accounts(people):
    client = Client()
    for name in ["owner", "reviewer", "outsider", "staff"] * 3:
        client.post("/accounts/password_reset/", {"email": f"{name}@example.test"})
    assert 1 <= len(mail.outbox) <= 5


@pytest.mark.parametrize("host", ["localhost:6666", "evil.example"])
def test_it_puts_no_forged_host_or_port_into_the_link(settings, host):
    settings.ALLOWED_HOSTS = ["localhost", "testserver"]
    Client(HTTP_HOST=host).post("/accounts/password_reset/", {"email": "owner@example.test"})
    assert all(host not in message.body for message in mail.outbox)


def test_a_reset_revokes_the_accounts_api_tokens(people):
    Token.objects.create(user=people["owner"])
    client = Client()
    client.post("/accounts/password_reset/", {"email": "owner@example.test"})
    link = re.search(r"http://testserver(/accounts/reset/\S+/)", mail.outbox[0].body).group(1)
    form = client.get(link, follow=True)
    new = {"new_password1": "a fresh long passphrase 42", "new_password2": "a fresh long passphrase 42"}
    assert client.post(form.redirect_chain[-1][0], new).status_code == 302
    assert not Token.objects.filter(user=people["owner"]).exists()


def test_it_locks_out_an_address_spraying_one_password_over_many_usernames(settings, people, django_user_model):
    settings.AXES_ENABLED = True
    names = [f"user{i}" for i in range(8)]
    for name in names:
        django_user_model.objects.create_user(name, password=f"{name}-secret")
    client = Client(REMOTE_ADDR="10.0.0.9")
    for name in names[:-1]:
        client.post("/accounts/login/", {"username": name, "password": "Spring2026!"})
    response = client.post("/accounts/login/", {"username": names[-1], "password": f"{names[-1]}-secret"})
    assert response.status_code in (403, 429) or "_auth_user_id" not in client.session
