"""One group membership per web process, fanned out to its local viewers.

With channels-redis every consumer that joins a group receives each group
message through the layer's receive machinery: a shared lock, a buffer per
channel and a wake-up (futures made, awaited and cancelled) per message per
viewer. At 10 frames a second to 400 viewers in one Daphne that is 4,000 such
hand-overs a second, and they are the lag. Here one reader per group and
process joins the group instead; for each message it hands the frame's
pre-serialized text (see ``run_player.frame_event``) straight to each local
viewer's websocket, so a frame costs one layer receive per process plus one
websocket write per viewer.

A viewer that needs more than a write (a gap to fill from the database, a
status, an access check) gets the message in order through a queue of its own,
drained by a task of its own, so one slow viewer never holds up the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from typing import Any, Protocol

log = logging.getLogger(__name__)

#: A reader whose layer receive fails waits this long before it joins the group again.
RETRY_S = 1.0


class Member(Protocol):
    """What a fanned-out viewer offers the reader (``RunConsumer``)."""

    def fast_frame(self, message: dict[str, Any]) -> str | None:
        """The text to write for this live frame when a plain write is all it needs, ``""``
        when the viewer has it already, None when it must go through :meth:`enqueue`."""

    async def write(self, text: str) -> None:
        """Write ``text`` to the viewer's websocket."""

    def write_wire(self, wire: bytes) -> bool:
        """Write a whole websocket frame's bytes straight to the connection; False when it cannot."""

    def enqueue(self, message: dict[str, Any]) -> None:
        """Take ``message`` in order through the viewer's own queue."""


def text_frame(text: str) -> bytes:
    """One unfragmented, unmasked websocket text frame (RFC 6455 5.2) carrying ``text``,
    as a server sends it: built once per message, written to every viewer."""
    payload = text.encode()
    n = len(payload)
    if n <= 125:
        header = bytes((0x81, n))
    elif n <= 0xFFFF:
        header = bytes((0x81, 126)) + n.to_bytes(2, "big")
    else:
        header = bytes((0x81, 127)) + n.to_bytes(8, "big")
    return header + payload


class _Group:
    def __init__(self, hub: Hub, name: str) -> None:
        self.hub = hub
        self.name = name
        self.members: dict[int, Member] = {}
        self.channel: str | None = None
        self.task: asyncio.Task[None] | None = None
        self.joined = asyncio.Event()

    async def start(self) -> None:
        self.channel = await self.hub.layer.new_channel()
        await self.hub.layer.group_add(self.name, self.channel)
        self.joined.set()
        self.task = asyncio.get_running_loop().create_task(self._read(), name=f"fanout {self.name}")

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task
        if self.channel is not None:
            with contextlib.suppress(Exception):
                await self.hub.layer.group_discard(self.name, self.channel)

    async def _read(self) -> None:
        layer = self.hub.layer
        while True:
            try:
                message = await layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("fan-out reader of %s could not receive; joining again in %g s", self.name, RETRY_S,
                            exc_info=True)
                await asyncio.sleep(RETRY_S)
                with contextlib.suppress(Exception):
                    await layer.group_add(self.name, self.channel)
                continue
            await self._deliver(message)

    async def _deliver(self, message: dict[str, Any]) -> None:
        wire: bytes | None = None
        for member in list(self.members.values()):
            try:
                text = member.fast_frame(message)
                if text is None:
                    member.enqueue(message)
                elif text:
                    if wire is None:
                        wire = text_frame(text)
                    if not member.write_wire(wire):
                        await member.write(text)
            except Exception:  # one viewer's closed socket must not stop the others
                log.debug("could not hand a message of %s to a viewer", self.name, exc_info=True)


class Hub:
    """The groups one process's viewers watch on one channel layer, in one event loop."""

    def __init__(self, layer: Any) -> None:
        self.layer = layer
        self.groups: dict[str, _Group] = {}
        self.lock = asyncio.Lock()

    async def join(self, name: str, member: Member) -> None:
        """Add ``member`` to ``name``; the first one makes this process join the layer's group.

        On return the process is in the group, so every message sent from now
        on reaches ``member``.
        """
        async with self.lock:
            group = self.groups.get(name)
            if group is None:
                group = self.groups[name] = _Group(self, name)
                try:
                    await group.start()
                except BaseException:
                    del self.groups[name]
                    raise
            group.members[id(member)] = member

    async def leave(self, name: str, member: Member) -> None:
        """Remove ``member``; the last one out makes the process leave the layer's group."""
        async with self.lock:
            group = self.groups.get(name)
            if group is None:
                return
            group.members.pop(id(member), None)
            if not group.members:
                del self.groups[name]
                await group.stop()


_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, Hub]] = weakref.WeakKeyDictionary()


def hub_for(layer: Any) -> Hub:
    """This event loop's hub for ``layer`` (one per process in Daphne)."""
    loop = asyncio.get_running_loop()
    per_layer = _hubs.setdefault(loop, {})
    hub = per_layer.get(id(layer))
    if hub is None or hub.layer is not layer:
        hub = per_layer[id(layer)] = Hub(layer)
    return hub
