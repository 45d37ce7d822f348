"""The OpenAPI schema as the API behaves: request bodies, string rules and error answers.

drf-spectacular describes each view from its serializers; three things it
leaves out are added here, so a client generated from /api/schema/ (and a
property-based test fed from it) sends what the API takes and expects what it
answers:

- Request bodies are JSON. The API still reads form posts (the browsable API
  sends them), but forms cannot carry nulls, lists or objects, so the schema
  offers JSON only; uploads keep their multipart body.
- Text fields say what DRF's ``CharField`` refuses: a NUL character, and (when
  blank is not allowed and whitespace is trimmed) text that is only whitespace.
- Every operation lists the errors it can answer, with their JSON body:
  400 (a field at fault), 401 (no or a bad token), 403 (a role that may not),
  404 (nothing you can see at that id, or a page past the end), 409 (a newer
  version, or a row in use), 413 (a body over the upload limit) and 429 (over
  the request rate, with ``Retry-After``).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers
from rest_framework.parsers import JSONParser

#: Text DRF's CharField takes: any characters but NUL.
NO_NUL = "^[^\\x00]*$"
#: ... and not only whitespace (trimmed, it would be blank).
NOT_BLANK = "^[^\\x00]*[^\\s\\x00][^\\x00]*$"
#: ... and not empty: a field that takes blank text gets "" as a second branch (drf-spectacular's
#: ``oneOf``), which must not overlap this one.
NOT_EMPTY = "^[^\\x00]+$"


class ReviewAutoSchema(AutoSchema):
    """drf-spectacular's schema, with JSON request bodies and CharField's own rules."""

    def map_parsers(self) -> list[Any]:
        media_types = super().map_parsers()
        if JSONParser.media_type in media_types:
            return [JSONParser.media_type]
        return media_types

    def _map_serializer_field(self, field: Any, direction: str, bypass_extensions: bool = False) -> Any:
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if direction == "request" and isinstance(schema, dict):
            _request_rules(field, schema)
        return schema


def _request_rules(field: Any, schema: dict[str, Any]) -> None:
    """What a request field refuses that drf-spectacular's mapping leaves unsaid."""
    if (
        isinstance(field, serializers.CharField)
        and schema.get("type") == "string"
        and "pattern" not in schema
        and "format" not in schema
        and "enum" not in schema
    ):
        if field.allow_blank:
            schema["pattern"] = NOT_EMPTY
        else:
            schema["pattern"] = NOT_BLANK if field.trim_whitespace else NO_NUL
    if (
        isinstance(field, (serializers.ListField, serializers.ListSerializer))
        and not field.allow_empty
        and schema.get("type") == "array"
    ):
        schema.setdefault("minItems", 1)
    if isinstance(field, serializers.JSONField) and not field.allow_null and not _typed(schema):
        # Any JSON value but null (DRF's "This field may not be null.").
        schema["anyOf"] = [{"type": "object", "additionalProperties": {}}, {"type": "array", "items": {}},
                           {"type": "string"}, {"type": "number"}, {"type": "boolean"}]


def _typed(schema: dict[str, Any]) -> bool:
    return any(key in schema for key in ("type", "$ref", "oneOf", "anyOf", "allOf", "enum"))


ERROR_SCHEMA = {
    "type": "object",
    "description": (
        'An error: {"detail": "..."} with the reason and its fix; over a limit also "setting" (the '
        'setting that sets it); a stale version also "current_version". A refused field: '
        '{"<field>": ["<message>"]}, nested for lists and objects ({"overrides": {"0": ["..."]}}).'
    ),
    "properties": {
        "detail": {"type": "string"},
        "setting": {"type": "string", "nullable": True},
        "current_version": {"type": "integer"},
    },
    "additionalProperties": {},
}

RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before the next request.",
        "schema": {"type": "integer", "minimum": 0},
    }
}

_ERRORS: dict[str, str] = {
    "400": "A field at fault (named, with the fix), or a body that is not JSON.",
    "401": "No credentials, or a token that is not valid.",
    "403": "Your role in the session (or on the object) does not allow this.",
    "404": "Nothing you can see at this id, or a page past the last.",
    "409": "The object changed since you read it (a newer version), or other rows use it.",
    "413": "The request body is over the upload limit.",
    "429": "Over the request rate; wait Retry-After seconds.",
}


def _error_response(code: str, other_media_types: list[str]) -> dict[str, Any]:
    content: dict[str, Any] = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for media_type in other_media_types:
        content[media_type] = {"schema": {"type": "string"}}
    response: dict[str, Any] = {"description": _ERRORS[code], "content": content}
    if code == "429":
        response["headers"] = RETRY_AFTER
    return response


def _error_codes(method: str, operation: dict[str, Any]) -> list[str]:
    """The error answers an operation can give, from what it takes."""
    parameters = operation.get("parameters", [])
    has_body = "requestBody" in operation
    has_query = any(p.get("in") == "query" for p in parameters)
    has_path = any(p.get("in") == "path" for p in parameters)
    paginated = any(p.get("in") == "query" and p.get("name") == "page" for p in parameters)
    public = operation.get("security") == [{}]
    codes = []
    if has_body or has_query:
        codes.append("400")
    if not public:
        codes += ["401", "403"]
    if has_path or paginated:
        codes.append("404")
    if method in {"post", "put", "patch", "delete"} and not public:
        codes.append("409")
    if has_body:
        codes.append("413")
    codes.append("429")
    return codes


def add_error_responses(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular post-processing hook: the error answers of every operation.

    Answers a view documents itself (with its own description) are kept. A view
    whose errors also come in another media type (a CSV download's) names it in
    the operation's ``x-error-media-types``.
    """
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    for path_item in result.get("paths", {}).values():
        for method, operation in path_item.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            other_media_types = operation.pop("x-error-media-types", [])
            for code in _error_codes(method, operation):
                documented = operation["responses"].get(code)
                error = _error_response(code, other_media_types)
                if documented is None:
                    operation["responses"][code] = error
                elif "content" not in documented:
                    documented.update({k: v for k, v in error.items() if k != "description"})
    return result
