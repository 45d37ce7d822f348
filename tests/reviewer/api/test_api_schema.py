"""The OpenAPI schema and its browsable page, served with local assets."""

from __future__ import annotations

import json
import re
from typing import Any

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


def _served_schema(client: Any) -> dict[str, Any]:
    return json.loads(client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").content)


def _operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(path, method, op) for path, item in schema["paths"].items() for method, op in item.items()]


def test_the_schema_generator_validates_without_a_warning(tmp_path: Any) -> None:
    from django.core.management import call_command

    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    assert out.read_text().startswith("openapi: 3.")


def test_every_operation_documents_its_error_answers(client: Any) -> None:
    schema = _served_schema(client)
    assert schema["components"]["schemas"]["Error"]["properties"]["detail"] == {"type": "string"}
    for path, method, op in _operations(schema):
        responses = op["responses"]
        assert "429" in responses and "Retry-After" in responses["429"]["headers"], (method, path)
        if path != "/api/context.jsonld":
            assert {"401", "403"} <= set(responses), (method, path)
        if "{" in path:
            assert "404" in responses, (method, path)
        if "requestBody" in op:
            assert {"400", "413"} <= set(responses), (method, path)
        for code, response in responses.items():
            if code.startswith("4"):
                assert "application/json" in response["content"], (method, path, code)


def test_request_bodies_are_json_but_the_trace_upload_is_multipart(client: Any) -> None:
    schema = _served_schema(client)
    for path, method, op in _operations(schema):
        if "requestBody" in op:
            expected = ["multipart/form-data"] if path == "/api/fleets/{id}/trace/" else ["application/json"]
            assert list(op["requestBody"]["content"]) == expected, (method, path)


def test_the_schema_says_what_the_fields_refuse(client: Any) -> None:
    components = _served_schema(client)["components"]["schemas"]
    title = components["FindingRequest"]["properties"]["title"]
    assert title["minLength"] == 1 and re.search(title["pattern"], " x ") and not re.search(title["pattern"], " \xa0 ")
    assert not re.search(title["pattern"], "a\x00b")
    assert components["FindingsReorderRequest"]["properties"]["ids"]["minItems"] == 1
    value = components["FleetAcceptFigureRequest"]["properties"]["value"]
    assert "null" not in json.dumps(value) and {"type": "number"} in value["anyOf"]
    assert components["Run"]["properties"]["speed"]["oneOf"] == [
        {"type": "integer", "enum": [1, 10, 100]}, {"type": "string", "enum": ["max"]}]


def test_list_pages_are_declared_from_1(client: Any) -> None:
    schema = _served_schema(client)
    page = next(p for p in schema["paths"]["/api/docs/"]["get"]["parameters"] if p["name"] == "page")
    assert page["schema"] == {"type": "integer", "minimum": 1}


@pytest.mark.parametrize("text", ["", "   ", "[traffic]"])
def test_a_field_that_takes_blank_text_takes_it_in_the_schema_too(client: Any, text: str) -> None:
    import jsonschema_rs

    toml = _served_schema(client)["components"]["schemas"]["FleetCheckRequest"]["properties"]["toml"]
    assert jsonschema_rs.validator_for(toml).is_valid(text), toml
    assert not jsonschema_rs.validator_for(toml).is_valid("a\x00b")
