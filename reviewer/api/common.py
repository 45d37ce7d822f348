"""Errors shared by the API's views: service errors become HTTP answers."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers, status
from rest_framework.exceptions import APIException

from reviewer.services.review import Conflict


class ConflictError(APIException):
    """409: the write was based on a stale version; the body names the current one."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "The resource was changed meanwhile."
    default_code = "conflict"

    def __init__(self, message: str, current_version: int | None = None) -> None:
        super().__init__(message)
        # Set after the base class, which would turn the number into a string.
        self.detail = {"detail": message}
        if current_version is not None:
            self.detail["current_version"] = current_version


def django_error_detail(exc: DjangoValidationError, default_field: str = "non_field_errors") -> dict:
    """A Django ValidationError as DRF's ``{field: [messages]}`` shape."""
    if hasattr(exc, "error_dict"):
        return {
            (default_field if name == "__all__" else name): messages
            for name, messages in exc.message_dict.items()
        }
    return {default_field: exc.messages}


@contextmanager
def service_errors(default_field: str = "non_field_errors", rename: dict[str, str] | None = None) -> Iterator[None]:
    """Turn a service's ValidationError into 400 and Conflict into 409.

    ``rename`` maps model field names to the API's (e.g. ``review_pass`` to ``pass``).
    """
    try:
        yield
    except DjangoValidationError as exc:
        detail = django_error_detail(exc, default_field)
        if rename:
            detail = {rename.get(k, k): v for k, v in detail.items()}
        raise serializers.ValidationError(detail) from None
    except Conflict as exc:
        raise ConflictError(str(exc), exc.current) from None
