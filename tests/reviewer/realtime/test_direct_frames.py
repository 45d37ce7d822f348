"""Live frames written straight to Daphne's connection: the same bytes Daphne
and autobahn would send through ASGI, and the ASGI path whenever the
connection is not one that can take them."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
from channels.sessions import InstanceSessionWrapper
from daphne.ws_protocol import WebSocketFactory
from twisted.internet.testing import StringTransport

from reviewer.realtime.consumers import RunConsumer, direct_connection
from reviewer.realtime.fanout import text_frame


def _open_connection() -> Any:
    factory = WebSocketFactory(None)
    factory.setProtocolOptions(openHandshakeTimeout=0, autoPingInterval=0)
    connection = factory.buildProtocol(("127.0.0.1", 0))
    connection.makeConnection(StringTransport())
    connection.state = connection.STATE_OPEN
    connection.transport.clear()
    return connection


async def _reply(connection: Any, message: dict[str, Any]) -> None:  # stands for Daphne's Server.handle_reply
    connection.handle_reply(message)


def _asgi_send(connection: Any) -> Any:
    """``send`` as a consumer behind the session middleware gets it from Daphne."""
    scope = {"type": "websocket", "cookies": {}, "headers": []}
    return InstanceSessionWrapper(scope, functools.partial(_reply, connection)).send


@pytest.mark.parametrize("size", [5, 125, 126, 526, 70_000])
def test_a_frame_built_once_is_the_frame_autobahn_sends(size: int) -> None:
    text = json.dumps({"type": "frame", "pad": "é" * (size // 2)})[:size]
    connection = _open_connection()
    connection.sendMessage(text.encode("utf8"), False)
    assert text_frame(text) == connection.transport.value()


async def test_a_viewer_behind_daphne_gets_live_frames_straight_on_its_connection() -> None:
    connection = _open_connection()
    viewer = RunConsumer()
    viewer._direct = direct_connection(_asgi_send(connection))
    assert viewer._direct is connection
    wire = text_frame('{"type":"frame","frame":{"i":3}}')
    assert viewer.write_wire(wire)
    assert connection.transport.value() == wire
    # Once the connection closes (or autobahn holds sends of its own), the ASGI path takes over.
    connection.state = connection.STATE_CLOSING
    assert not viewer.write_wire(wire)
    connection.state = connection.STATE_OPEN
    connection.send_queue.append((b"x", True))
    assert not viewer.write_wire(wire)


def test_anything_but_daphne_behind_the_session_middleware_keeps_the_asgi_path() -> None:
    async def plain_send(message: dict[str, Any]) -> None:
        pass

    assert direct_connection(plain_send) is None
    assert direct_connection(functools.partial(_reply, object())) is None
    compressed = _open_connection()
    compressed._perMessageCompress = object()
    assert direct_connection(_asgi_send(compressed)) is None
    masked = _open_connection()
    masked.maskServerFrames = True
    assert direct_connection(_asgi_send(masked)) is None
