"""Hostile bodies: values nested thousands deep and numbers too big for the emulator
get a 400 in JSON naming the field (the check endpoint's ``{"valid": false}``), never
a 500 with an HTML page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from review_data_fixtures import *  # noqa: F403
from review_data_fixtures import SMALL_SCENARIO

pytestmark = pytest.mark.django_db

DEEP_TOML = "x = " + "[" * 900 + "]" * 900 + "\n"
DEEP_JSON = b'{"name": "deep", "toml": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"


def _json_error(response: Any, field: str) -> str:
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    body = response.json()
    assert field in body, body
    return " ".join(body[field]) if isinstance(body[field], list) else str(body[field])


@pytest.mark.parametrize("url", ["/api/fleets/", "/api/runs/"])
def test_it_refuses_toml_nested_900_deep_with_a_400_on_the_field(api_as, url):
    field = "toml" if url == "/api/fleets/" else "scenario"
    body = {"name": "deep", "toml": DEEP_TOML} if field == "toml" else {"scenario": DEEP_TOML}
    response = api_as("owner").post(url, body, format="json")
    assert response.status_code == 400
    assert "more than 16 deep" in _json_error(response, field)


def test_the_check_endpoint_reports_toml_nested_900_deep_as_invalid(api_as):
    response = api_as("owner").post("/api/fleets/check/", {"toml": DEEP_TOML}, format="json")
    assert response.status_code == 200
    data = response.json()
    assert data["valid"] is False and "more than 16 deep" in data["error"]["message"]


def test_a_scenario_object_nested_deep_is_refused_at_its_key_path(api_as):
    deep: Any = 1
    for _ in range(20):  # over the scenario's 16 levels, under the body's 32
        deep = [deep]
    scenario = {"name": "deep", "traffic": {"qps": deep}}
    response = api_as("owner").post("/api/fleets/", {"name": "deep", "scenario": scenario}, format="json")
    assert response.status_code == 400
    assert "traffic.qps" in _json_error(response, "scenario")


@pytest.mark.parametrize("url", ["/api/fleets/", "/api/runs/", "/api/fleets/check/"])
def test_a_json_body_nested_100000_deep_gets_a_json_400(api_as, url):
    response = api_as("owner").generic("POST", url, DEEP_JSON, content_type="application/json")
    assert response.status_code == 400
    assert "nested" in _json_error(response, "detail")


def test_a_json_body_nested_past_the_limit_but_parseable_gets_a_json_400(api_as):
    body = b'{"name": "deep", "scenario": ' + b"[" * 500 + b"]" * 500 + b"}"
    response = api_as("owner").generic("POST", "/api/fleets/", body, content_type="application/json")
    assert response.status_code == 400
    assert "scenario is nested more than 32 levels deep" in _json_error(response, "detail")


@pytest.fixture
def trace_dir(settings: Any, tmp_path: Path) -> Path:
    settings.TRACE_UPLOAD_DIR = tmp_path / "traces"
    return settings.TRACE_UPLOAD_DIR


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"arrival_s": 0, "prompt_tokens": 1e20, "output_tokens": 10}', "over the limit"),
        ('{"arrival_s": 0, "prompt_tokens": 100, "output_tokens": 99999999999999999999999}', "over the limit"),
        ('{"arrival_s": 0, "prompt_tokens": ' + "[" * 100_000 + "]" * 100_000 + ', "output_tokens": 1}', "nests"),
    ],
)
def test_a_trace_row_too_big_or_too_deep_gets_a_400_on_the_trace_field(api_as, review_fleet, trace_dir, line, message):
    upload = SimpleUploadedFile("t.jsonl", (line + "\n").encode())
    response = api_as("owner").post(f"/api/fleets/{review_fleet.pk}/trace/", {"file": upload}, format="multipart")
    assert response.status_code == 400
    text = _json_error(response, "trace")
    assert "line 1" in text and message in text, text


def test_a_csv_trace_row_too_big_gets_a_400_on_the_trace_field(api_as, review_fleet, trace_dir):
    csv = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:00.5000000,100000000000000000000,20\n"
    upload = SimpleUploadedFile("t.csv", csv.encode())
    response = api_as("owner").post(f"/api/fleets/{review_fleet.pk}/trace/", {"file": upload}, format="multipart")
    assert response.status_code == 400
    assert "over the limit" in _json_error(response, "trace")


def test_a_small_scenario_still_saves(api_as):
    # The bounds leave real scenarios alone.
    response = api_as("owner").post("/api/fleets/", {"name": "ok", "toml": SMALL_SCENARIO}, format="json")
    assert response.status_code == 201, json.dumps(response.json())[:300]


def test_a_host_of_a_billion_units_is_refused_at_its_key_path(api_as):
    toml = SMALL_SCENARIO.replace("units = 10", "units = 1000000000", 1)
    assert toml != SMALL_SCENARIO
    response = api_as("owner").post("/api/fleets/", {"name": "huge", "toml": toml}, format="json")
    assert response.status_code == 400
    assert "hosts[0].units: 1,000,000,000 is over the limit of 128" in _json_error(response, "toml")
