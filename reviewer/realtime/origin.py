"""The websocket Origin check: a page may only open websockets to the server that served it.

Channels' ``AllowedHostsOriginValidator`` compares the Origin's host name with
``ALLOWED_HOSTS`` and ignores the port, so a page served by any other program
on an allowed host (``http://localhost:9999``) could open a websocket with the
user's cookies. Here the Origin must name the host *and* port the request was
sent to (its ``Host`` header, itself one of ``ALLOWED_HOSTS``), or be listed
in ``CSRF_TRUSTED_ORIGINS``, the rule Django's CSRF check applies to forms.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin1")
    return None


def is_same_origin(origin: str | None, host: str | None) -> bool:
    """Whether a websocket request with these Origin and Host headers may be opened."""
    if not origin or not host:
        return False
    if origin in settings.CSRF_TRUSTED_ORIGINS:
        return True
    host_name, host_port = split_domain_port(host)
    if not host_name or not validate_host(host_name, settings.ALLOWED_HOSTS):
        return False
    parts = urlsplit(origin)
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return False
    try:
        origin_port = parts.port or DEFAULT_PORTS[parts.scheme]
    except ValueError:
        return False
    if parts.hostname.lower().strip("[]") != host_name.lower().strip("[]"):
        return False
    if host_port:
        return int(host_port) == origin_port
    # No port in the Host header: the default port of whichever scheme the page used.
    return parts.port is None


class SameOriginValidator:
    """ASGI middleware refusing websockets whose Origin is not the server they reach."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket" and not is_same_origin(_header(scope, b"origin"), _header(scope, b"host")):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
