"""Uploaded files: refused by their declared size before the body is read, then
streamed to disk with a byte count that stops at the limit.

The limit is the ``UPLOAD_MAX_BYTES`` setting, for every upload (fleet configs'
traces, calibration measurements). Django would otherwise read a whole
multipart body (to a temporary file) as soon as anything touches
``request.POST`` -- the CSRF check does, for every POST -- so the declared
``Content-Length`` is checked first: by :class:`UploadLimitMiddleware` under
WSGI and the test client, and by :class:`UploadLimitASGI` before Django's ASGI
handler spools the body. A body that is larger than it said is stopped while
it is copied (:func:`stage_upload`).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import SuspiciousFileOperation
from django.core.files.uploadedfile import UploadedFile
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.text import get_valid_filename

from reviewer.errors import TooLarge

#: Room for the multipart envelope (boundaries, part headers, small fields)
#: around a file of exactly the limit.
FORM_SLACK_BYTES = 64 * 1024
SETTING = "UPLOAD_MAX_BYTES"


def over_limit_message(size: int | None = None) -> str:
    """The one-line refusal: the limit, the setting, and what to do."""
    limit = settings.UPLOAD_MAX_BYTES
    what = f"is {size:,} bytes, over" if size is not None else "is over"
    return (f"upload: the file {what} the limit of {limit:,} bytes ({limit / 2**20:g} MB); "
            f"send a smaller file or raise the {SETTING} setting")


def declared_over_limit(content_type: str, content_length: str | None) -> int | None:
    """The declared size of a multipart body that is over the limit, else None."""
    if not content_type.lower().startswith("multipart/form-data") or not content_length:
        return None
    try:
        size = int(content_length)
    except ValueError:
        return None
    return size if size > settings.UPLOAD_MAX_BYTES + FORM_SLACK_BYTES else None


def refusal_body(size: int) -> dict[str, str]:
    """The JSON answer to an upload over the limit (the API's ``{detail, setting}`` shape)."""
    return {"detail": over_limit_message(size), "setting": SETTING}


class UploadLimitMiddleware:
    """Answer 413 with one line of JSON when a multipart body declares more than the limit."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        size = declared_over_limit(request.META.get("CONTENT_TYPE", ""), request.META.get("CONTENT_LENGTH"))
        if size is not None:
            return JsonResponse(refusal_body(size), status=413)
        return self.get_response(request)


class UploadLimitASGI:
    """The same refusal in front of Django's ASGI handler, which would first read
    the whole body into a temporary file; the body is never received."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[Any]],
                       send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            size = declared_over_limit(headers.get("content-type", ""), headers.get("content-length"))
            if size is not None:
                body = json.dumps(refusal_body(size)).encode()
                await send({"type": "http.response.start", "status": 413,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(body)).encode()),
                                        (b"connection", b"close")]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def safe_name(name: str, default: str) -> str:
    """The uploaded file's own name made safe for a path (its extension kept)."""
    try:
        cleaned = get_valid_filename(Path(name or "").name).strip(".")
    except SuspiciousFileOperation:  # nothing left of the name
        cleaned = ""
    if len(cleaned) > 100:
        stem, dot, ext = cleaned.rpartition(".")
        cleaned = (stem[: 90] + dot + ext[:9]) if dot else cleaned[:100]
    return cleaned or default


def stage_upload(upload: UploadedFile, *, directory: Path, default_name: str) -> Path:
    """Copy ``upload`` to a new directory under ``directory``, keeping its safe name.

    Stops with :class:`TooLarge` as soon as the copy passes the limit, whatever
    size the upload claimed, and then leaves nothing behind; once the file is
    staged, the caller removes its directory on any later failure.
    """
    limit = settings.UPLOAD_MAX_BYTES
    if upload.size is not None and upload.size > limit:
        raise TooLarge(SETTING, over_limit_message(upload.size))
    directory.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=directory))
    path = staging / safe_name(upload.name or "", default_name)
    written = 0
    try:
        with path.open("wb") as out:
            for chunk in upload.chunks():
                written += len(chunk)
                if written > limit:
                    raise TooLarge(SETTING, over_limit_message())
                out.write(chunk)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return path
