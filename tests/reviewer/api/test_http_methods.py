"""Methods the API does not offer answer 405: HTTP TRACE (which Django's CSRF check
lets through as a safe method) never reaches an action, whatever the action's name."""

from __future__ import annotations

import pytest
from review_data_fixtures import *  # noqa: F403

from reviewer.models import FleetConfigVersion

pytestmark = pytest.mark.django_db


def _csrf_client(people):
    from rest_framework.test import APIClient

    client = APIClient(enforce_csrf_checks=True)
    client.force_login(people["owner"])
    return client


@pytest.mark.parametrize("path", ["/api/fleets/check/", "/api/fleets/{fleet}/trace/", "/api/fleets/{fleet}/"])
def test_it_answers_trace_with_405_and_changes_nothing(people, review_fleet, path):
    versions = FleetConfigVersion.objects.count()
    response = _csrf_client(people).generic("TRACE", path.format(fleet=review_fleet.pk))
    assert response.status_code == 405
    assert FleetConfigVersion.objects.count() == versions
