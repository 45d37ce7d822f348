"""The one mapping from refusals to answers: HTTP responses and websocket replies.

Services raise :mod:`reviewer.errors`; models raise Django's
``ValidationError`` for their row rules. DRF calls :func:`exception_handler`
(``REST_FRAMEWORK["EXCEPTION_HANDLER"]``) for every exception a view lets
through, so views call services without wrapping them; consumers answer with
:func:`ws_reply`.

A view may set ``error_field_names`` to rename model fields to the API's
(``review_pass`` is ``pass``) and ``error_default_field`` for errors that name
no field.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from reviewer.errors import (
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    OverLimit,
    ServiceError,
    TooLarge,
)

HTTP_STATUS: dict[type[ServiceError], int] = {
    Invalid: status.HTTP_400_BAD_REQUEST,
    Forbidden: status.HTTP_403_FORBIDDEN,
    NotFound: status.HTTP_404_NOT_FOUND,
    Conflict: status.HTTP_409_CONFLICT,
    OverLimit: status.HTTP_429_TOO_MANY_REQUESTS,
    TooLarge: status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
}

NON_FIELD = "non_field_errors"


def http_status(exc: ServiceError) -> int:
    """The status code that answers ``exc``."""
    for cls in type(exc).__mro__:
        if cls in HTTP_STATUS:
            return HTTP_STATUS[cls]
    return status.HTTP_400_BAD_REQUEST


def error_body(exc: ServiceError, rename: dict[str, str] | None = None) -> dict[str, Any]:
    """The JSON body that answers ``exc``, in DRF's shapes.

    Invalid: ``{field: [message]}``; over a limit: ``{"detail", "setting"}``; a
    stale version: ``{"detail", "current_version"}``; the rest ``{"detail"}``.
    """
    field = (rename or {}).get(exc.field or "", exc.field)
    if isinstance(exc, Invalid):
        return {field or NON_FIELD: [exc.message]}
    body: dict[str, Any] = {"detail": exc.message}
    if isinstance(exc, OverLimit):
        body["setting"] = field
    if isinstance(exc, Conflict) and exc.current is not None:
        body["current_version"] = exc.current
    return body


def django_error_body(exc: DjangoValidationError, default_field: str = NON_FIELD,
                      rename: dict[str, str] | None = None) -> dict[str, list[str]]:
    """A Django ValidationError (a model's row rule) as DRF's ``{field: [messages]}``."""
    if hasattr(exc, "error_dict"):
        detail = {(default_field if name == "__all__" else name): messages
                  for name, messages in exc.message_dict.items()}
    else:
        detail = {default_field: exc.messages}
    return {(rename or {}).get(k, k): v for k, v in detail.items()}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's exception handler, which also answers service errors and model validation."""
    view = context.get("view")
    rename = getattr(view, "error_field_names", None)
    if isinstance(exc, ServiceError):
        return Response(error_body(exc, rename), status=http_status(exc))
    if isinstance(exc, RequestDataTooBig):
        # Django raises this as a SuspiciousOperation, which would answer a bare HTML 400.
        limit_mb = settings.DATA_UPLOAD_MAX_MEMORY_SIZE / 1_000_000
        return Response(
            {"detail": f"The request body is larger than {limit_mb:g} MB; send less, or raise "
                       "DATA_UPLOAD_MAX_MEMORY_SIZE on the server.",
             "setting": "DATA_UPLOAD_MAX_MEMORY_SIZE"},
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, DjangoValidationError):
        default_field = getattr(view, "error_default_field", NON_FIELD)
        return Response(django_error_body(exc, default_field, rename), status=status.HTTP_400_BAD_REQUEST)
    return drf_exception_handler(exc, context)


def ws_reply(exc: ServiceError) -> dict[str, Any]:
    """The websocket message that answers ``exc``: ``{"type": "error", "error", "field", "status"}``."""
    return {"type": "error", "error": exc.message, "field": exc.field, "status": http_status(exc)}
