"""The OpenAPI schema and its browsable page, served with local assets."""

from __future__ import annotations

import json
import re

import pytest
from review_data_fixtures import *  # noqa: F403

pytestmark = pytest.mark.django_db

PATHS = ["/api/docs/", "/api/docs/{id}/", "/api/fleets/", "/api/fleets/{id}/", "/api/sessions/",
         "/api/sessions/{id}/", "/api/sessions/{session_pk}/findings/", "/api/findings/{id}/",
         "/api/sessions/{id}/export.json", "/api/sessions/{id}/export.csv", "/api/sessions/{id}/export.md",
         "/api/sessions/{id}/export.jsonld", "/api/sessions/{id}/document/", "/api/sessions/{id}/diff/",
         "/api/sessions/{session_pk}/findings/duplicates/", "/api/findings/{id}/merge/",
         "/api/sessions/{session_pk}/reviews/",
         "/api/sessions/{session_pk}/turn/", "/api/findings/{id}/state/", "/api/notifications/",
         "/api/notifications/unread/", "/api/notifications/{id}/read/", "/api/notifications/read-all/",
         "/api/notifications/settings/"]


def test_the_schema_lists_every_review_endpoint(client):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    schema = json.loads(response.content)
    assert schema["openapi"].startswith("3.")
    for path in PATHS:
        assert path in schema["paths"], path
    finding = schema["components"]["schemas"]["Finding"]["properties"]
    assert {"pass", "severity", "version", "anchor_exact", "anchor_start"} <= set(finding)
    assert {"draft", "verdict", "state", "state_reason", "fixed_revision"} <= set(finding)
    assert {"tokenAuth", "cookieAuth"} <= set(schema["components"]["securitySchemes"])


def test_the_browsable_docs_page_loads_its_assets_locally(client, people):
    client.force_login(people["owner"])
    response = client.get("/api/schema/docs/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "swagger-ui" in page.lower()
    sources = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert sources and all(not s.startswith(("http://", "https://", "//")) for s in sources), sources
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in page


def test_api_docs_stays_the_design_doc_collection(api_as, review_doc):
    data = api_as("owner").get("/api/docs/").json()
    assert [d["title"] for d in data["results"]] == ["Chat serving"]


def test_the_schema_declares_the_fleet_configs_provenance_as_returned_not_write_only(api_as, review_fleet):
    import json

    schema = json.loads(api_as("owner").get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").content)
    field = schema["components"]["schemas"]["FleetConfig"]["properties"]["provenance"]
    assert not field.get("writeOnly"), field
    assert "provenance" in api_as("owner").get(f"/api/fleets/{review_fleet.pk}/").json()
