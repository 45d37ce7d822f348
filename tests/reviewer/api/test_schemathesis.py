"""Property-based API testing: every operation in /api/schema/, fed generated input, never answers 5xx.

The app is called in process (WSGI) inside the test's database transaction,
authenticated with a token of a user who owns a session with findings, so
generated ids hit real rows as well as missing ones. Examples are bounded
per operation to keep the run short.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from django.test import Client
from hypothesis import HealthCheck, Phase, settings
from rest_framework.authtoken.models import Token
from review_data_fixtures import *  # noqa: F403

from reviewer.review import services


def _schema_document() -> dict[str, Any]:
    """The OpenAPI document as served at /api/schema/ (no database needed to build it)."""
    # Collection runs before the test setup adds "testserver" to ALLOWED_HOSTS.
    response = Client(HTTP_HOST="localhost").get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200, response.content[:500]
    return json.loads(response.content)


# Loaded when the module is collected: schemathesis makes one test per operation.
schema = schemathesis.openapi.from_dict(_schema_document())
schema.app = get_wsgi_application()


@pytest.fixture
def _keep_the_test_connection() -> Iterator[None]:
    """Stop Django closing the database connection after each in-process request.

    A real WSGI server closes connections between requests; here that would
    close the test's transaction. Django's own test client does the same.
    """
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def token_header(_keep_the_test_connection: None, db: Any, people: dict[str, Any], open_review: Any) -> dict[str, str]:
    """A token of the session's owner; the session has a finding, so generated ids can hit rows."""
    services.finding_create(session=open_review, author=people["owner"], review_pass="trace",
                            title="Push to busy workers", anchor_exact="round-robin")
    token = Token.objects.create(user=people["owner"])
    return {"Authorization": f"Token {token.key}"}


@schema.parametrize()
# Generated examples only: schemathesis' coverage phase (explicit boundary
# cases) sends several hundred requests per write operation, minutes in all.
@settings(max_examples=12, deadline=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck))
def test_no_generated_request_gets_a_server_error(case: Any, token_header: dict[str, str]) -> None:
    response = case.call(headers=token_header)
    assert response.status_code < 500, (
        f"{case.method} {case.formatted_path} -> {response.status_code}\n"
        f"query={case.query} body={case.body!r}\n{response.text[:2000]}"
    )
