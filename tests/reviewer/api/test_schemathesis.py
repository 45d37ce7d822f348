"""Property-based API testing: every operation in /api/schema/, fed generated input, answers
as the schema says.

Each operation gets generated requests, valid and invalid, as the owner of a
session with a finding and a run (by token), as one of its reviewers and as an
anonymous caller. Every answer is checked by schemathesis: no 5xx, a status
code, content type, headers and body the schema documents for that operation,
valid input accepted and invalid input refused.

Half the generated ids are swapped for the ids of the test's own rows (the doc,
fleet config, session, finding, run and trace upload the path names), so requests reach the
views' validation and answers as well as the 404s of ids nobody can see.

The app is called in process (WSGI) inside the test's database transaction.
Examples are bounded and derandomized so the run is short and repeatable;
API_FUZZ_EXAMPLES=N runs N random examples per operation instead.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.validators import ProhibitNullCharactersValidator
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from django.test import Client
from hypothesis import HealthCheck, Phase, settings
from rest_framework import fields as drf_fields
from rest_framework import relations as drf_relations
from rest_framework import serializers as drf_serializers
from rest_framework.authtoken.models import Token
from review_data_fixtures import *  # noqa: F403
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

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


# --- valid input the API refuses -------------------------------------------
#
# The schema says which values are well formed; it cannot say which ids exist
# or which TOML text is a scenario the emulator runs. So a 400 for valid input
# fails the test when DRF's field validation gave it (a type, blank, null,
# length, choice or range the schema promised), and passes when the view's own
# rules did (a reference to a row you cannot see, a scenario the emulator refuses).

def _field_messages() -> list[re.Pattern[str]]:
    """DRF's own field-validation messages, as patterns over the message text."""
    classes: list[type] = [drf_serializers.Serializer, drf_serializers.ListSerializer]
    for module in (drf_fields, drf_relations):
        classes += [c for c in vars(module).values() if isinstance(c, type) and issubclass(c, drf_fields.Field)]
    messages = [drf_fields.ProhibitSurrogateCharactersValidator.message, ProhibitNullCharactersValidator.message]
    for cls in classes:
        for key, message in getattr(cls, "default_error_messages", {}).items():
            if key != "does_not_exist":  # an id the schema cannot know exists
                messages.append(message)
    patterns = set()
    for message in messages:
        text = re.escape(str(message))
        patterns.add(re.sub(r"\\\{[a-z_]+\\\}", ".*", text))
    return [re.compile(p) for p in sorted(patterns)]


FIELD_MESSAGES = _field_messages()


def _messages(body: Any) -> Iterator[str]:
    if isinstance(body, str):
        yield body
    elif isinstance(body, dict):
        for value in body.values():
            yield from _messages(value)
    elif isinstance(body, list):
        for value in body:
            yield from _messages(value)


def field_validation_refused(response: Any) -> list[str]:
    """The messages of a 400 that DRF's field validation wrote (none: the view's own rules)."""
    try:
        body = json.loads(response.content)
    except ValueError:
        return ["(not JSON) " + response.text[:200]]
    if isinstance(body, dict) and isinstance(body.get("detail"), str) and body["detail"].startswith("JSON parse"):
        return [body["detail"]]
    return [m for m in _messages(body) if any(p.fullmatch(m) for p in FIELD_MESSAGES)]


def positive_data_acceptance_by_fields(ctx: Any, response: Any, case: Any) -> bool | None:
    """schemathesis' positive_data_acceptance, except for 400s from the view's own rules."""
    try:
        return positive_data_acceptance(ctx, response, case)
    except AssertionError:
        if response.status_code == 400 and not field_validation_refused(response):
            return None
        if _empty_file_lost_in_transport(case, response):
            return None
        raise


def _empty_file_lost_in_transport(case: Any, response: Any) -> bool:
    """An empty file part as the in-process (werkzeug) transport encodes it: with no line break
    before the closing boundary, which a multipart parser reads as no file. A browser's empty
    file arrives (and is answered: "has no requests"); see test_api_traces."""
    body = case.body if isinstance(case.body, dict) else {}
    empty = any(isinstance(v, bytes | bytearray) and not v or getattr(v, "data", None) == b"" for v in body.values())
    return case.media_type == "multipart/form-data" and empty and b"No file was submitted." in response.content


# --- invalid input the API takes ---------------------------------------------
#
# DRF's CharField reads a JSON number as its digits (``"title": 7`` is the text
# "7"), as it always has, and so does a list of text. A body that is valid once
# such numbers are read as text is therefore not expected to be refused; every
# other invalid input must be.

def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _numbers_as_text(body: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    read = dict(body)
    for key in keys:
        value = read[key]
        read[key] = [str(v) if _is_number(v) else v for v in value] if isinstance(value, list) else str(value)
    return read


def valid_once_numbers_are_read_as_text(case: Any) -> bool:
    """Whether the case's JSON body meets the schema once some of its numbers are read as text."""
    from itertools import combinations

    from schemathesis.core.jsonschema import make_validator

    body = case.body
    if not isinstance(body, dict) or case.media_type != "application/json":
        return False
    keys = [k for k, v in body.items()
            if _is_number(v) or (isinstance(v, list) and any(_is_number(item) for item in v))]
    if not keys or len(keys) > 6:
        return False
    alternative = case.operation.get_body_for_media_type(case.media_type)
    validator = make_validator(alternative.optimized_schema, case.operation.schema.adapter.jsonschema_validator_cls)
    return any(validator.is_valid(_numbers_as_text(body, chosen))
               for size in range(1, len(keys) + 1) for chosen in combinations(keys, size))


def negative_data_rejection_but_numbers_as_text(ctx: Any, response: Any, case: Any) -> bool | None:
    """schemathesis' negative_data_rejection, except for numbers sent where text is asked;
    413 (a body over the upload limit, which an overlong text can make) is a refusal too."""
    try:
        return negative_data_rejection(ctx, response, case)
    except AssertionError:
        if response.status_code == 413 or valid_once_numbers_are_read_as_text(case):
            return None
        raise


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    positive_data_acceptance_by_fields,
    negative_data_rejection_but_numbers_as_text,
]


def test_the_field_messages_tell_schema_refusals_from_the_views_rules() -> None:
    class Response:
        def __init__(self, body: Any) -> None:
            self.content = json.dumps(body).encode()
            self.text = self.content.decode()

    assert field_validation_refused(Response({"title": ["This field may not be blank."]}))
    assert field_validation_refused(Response({"overrides": {"3": ["Null characters are not allowed."]}}))
    assert field_validation_refused(Response({"seed": ["Ensure this value is less than or equal to 9."]}))
    assert field_validation_refused(Response({"detail": "JSON parse error - Expecting value"}))
    assert not field_validation_refused(Response({"doc": ['Invalid pk "5" - object does not exist.']}))
    assert not field_validation_refused(Response({"toml": ["traffic.qps: give a number above 0"]}))


# --- the app, its rows and the callers ----------------------------------------


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
def rows(_keep_the_test_connection: None, db: Any, people: dict[str, Any], open_review: Any) -> dict[str, int]:
    """The ids a path can name: the session's doc, fleet config, the session, a finding, a run
    and a failed trace upload."""
    from reviewer.models import EmulatorRun
    from reviewer.models.review import TraceUpload

    finding = services.finding_create(session=open_review, author=people["owner"], review_pass="trace",
                                      title="Push to busy workers", anchor_exact="round-robin")
    run = EmulatorRun.objects.create(session=open_review, started_by=people["owner"],
                                     scenario=open_review.fleet_config.scenario, seed=1, status="done")
    upload = TraceUpload.objects.create(config=open_review.fleet_config, author=people["owner"], name="day.jsonl",
                                        path="missing/day.jsonl", status="failed", error_field="trace",
                                        error="trace: day.jsonl line 2: prompt_tokens: give a whole number")
    return {"docs": open_review.doc_id, "fleets": open_review.fleet_config_id, "sessions": open_review.pk,
            "findings": finding.pk, "runs": run.pk, "upload_id": upload.pk}


def _real_ids(case: Any, rows: dict[str, int]) -> None:
    """Swap the path's generated ids for the test's rows, for half the cases (even ids).

    Only whole numbers are swapped, for whole numbers: a case stays as valid or
    as invalid as schemathesis made it.
    """
    params = case.path_parameters or {}
    collection = case.path.split("/")[2]
    for name, value in params.items():
        if isinstance(value, int) and not isinstance(value, bool) and value % 2 == 0:
            if name == "number":
                params[name] = 1
            elif name == "upload_id":
                params[name] = rows["upload_id"]
            elif name in {"id", "session_pk"} and collection in rows:
                params[name] = rows[collection]


def _token_header(user: Any) -> dict[str, str]:
    return {"Authorization": f"Token {Token.objects.create(user=user).key}"}


@pytest.fixture
def callers(rows: dict[str, int], people: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The roles each request is sent as: the session's owner and one of its reviewers (a
    reviewer reads the session but may not manage it nor edit the owner's doc: 403s), by
    token, and an anonymous caller (401s)."""
    return {"owner": _token_header(people["owner"]), "reviewer": _token_header(people["reviewer"]),
            "anonymous": {}}


# Generated examples only: schemathesis' coverage phase (explicit boundary
# cases) sends several hundred requests per write operation, minutes in all.
# API_FUZZ_EXAMPLES=50 runs that many random examples per operation instead.
DEEPER = int(os.environ.get("API_FUZZ_EXAMPLES", "0"))


@schema.parametrize()
# One test per operation, every role per example: the rows are made once per operation.
@settings(deadline=None, derandomize=not DEEPER, database=None, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck), max_examples=DEEPER or 6)
def test_every_operation_answers_each_role_as_the_schema_says(
    case: Any, rows: dict[str, int], callers: dict[str, dict[str, str]]
) -> None:
    _real_ids(case, rows)
    for role, headers in callers.items():
        response = case.call(headers=headers)
        try:
            case.validate_response(response, checks=CHECKS, headers=headers)
        except Exception as exc:
            exc.add_note(f"Sent as: {role}")
            raise
