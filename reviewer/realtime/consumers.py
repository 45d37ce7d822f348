"""Websocket consumers: a run's frames, and a review session's live events.

Both are thin: they check access, join their group, relay group messages, and
leave. Database work goes through ``database_sync_to_async``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from reviewer import selectors
from reviewer.api.errors import ws_reply
from reviewer.errors import Invalid, OverLimit, ServiceError
from reviewer.models import EmulatorRun, ReviewSession
from reviewer.models.runs import FINAL_STATUSES
from reviewer.realtime import fanout, presence
from reviewer.realtime import groups as realtime
from reviewer.representations import run_representation
from reviewer.review import services
from reviewer.runs.outcomes import outcome_shares

log = logging.getLogger(__name__)

# Websocket close codes for refusals (4000-4999 are the application's).
CLOSE_NOT_LOGGED_IN = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
# RFC 6455's "policy violation": a client that keeps flooding after being told.
CLOSE_FLOODING = 1008
# Live frames a slow run viewer may have waiting; past this they are dropped and
# read from the database when the viewer catches up (a gap is filled there).
BACKLOG_MAX = 500

# Messages a viewer may send: a burst, then a steady rate; past that they are
# refused, and a client that keeps sending anyway is disconnected.
INBOUND_BURST = 10
INBOUND_PER_S = 2.0
INBOUND_REFUSALS_BEFORE_CLOSE = 20


class InboundLimit:
    """A token bucket for one connection's incoming messages."""

    def __init__(self, burst: int = INBOUND_BURST, per_s: float = INBOUND_PER_S) -> None:
        self.burst = burst
        self.per_s = per_s
        self.tokens = float(burst)
        self.at = time.monotonic()
        self.refused_in_a_row = 0

    def take(self) -> bool:
        """True when one more message may be handled now."""
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.per_s)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            self.refused_in_a_row = 0
            return True
        self.refused_in_a_row += 1
        return False


class GuardedJsonConsumer(AsyncJsonWebsocketConsumer):
    """A JSON consumer that answers bad or too many messages with an error instead of crashing.

    Text that is not JSON (or a binary frame) gets ``{"type": "error", ...}``
    naming the fix; messages past the rate limit get a 429 error, and a client
    that keeps sending after many refusals is closed with 1008.
    """

    async def refuse(self, code: int) -> None:
        """Close with an application code (4401, 4403, 4404) the browser can read.

        A close before the handshake is accepted becomes a bare HTTP 403, and
        the browser sees 1006 whatever the code; so accept, then close.
        """
        await self.accept()
        await self.close(code=code)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        limit = getattr(self, "_inbound", None)
        if limit is None:
            limit = self._inbound = InboundLimit()
        if not limit.take():
            if limit.refused_in_a_row >= INBOUND_REFUSALS_BEFORE_CLOSE:
                await self.close(code=CLOSE_FLOODING)
                return
            await self.send_json(ws_reply(OverLimit(
                "INBOUND_PER_S", f"Too many messages: send at most {INBOUND_PER_S:g} a second.")))
            return
        try:
            if text_data is None:
                raise ValueError("binary frame")
            content = await self.decode_json(text_data)
        except ValueError:
            await self.send_json(ws_reply(Invalid("message", "message: send JSON text, e.g. "
                                                  '{"type": "presence", "pass": "numbers"}')))
            return
        await self.receive_json(content, **kwargs)


@database_sync_to_async
def _run_for_user(run_id: int, user: Any) -> tuple[dict[str, Any] | None, int]:
    """The run as the API shows it and 0, or None and the close code that refuses the viewer."""

    run = selectors.runs_visible_to(user).filter(pk=run_id).first()
    if run is None:
        return None, CLOSE_FORBIDDEN if EmulatorRun.objects.filter(pk=run_id).exists() else CLOSE_NOT_FOUND
    return run_representation(run), 0


@database_sync_to_async
def _frame_texts_after(run_id: int, after: int) -> list[tuple[int, str]]:
    return selectors.frame_texts_after(run_id, after)


def stored_frame_text(frame_json: str) -> str:
    """The browser's message for a stored frame, around the frame's JSON text from the database."""
    return '{"type":"frame","frame":' + frame_json + "}"


def direct_connection(send: Any) -> Any:
    """Daphne's websocket connection behind an ASGI ``send``, when a live frame can be written to it directly.

    Through ASGI every viewer's copy of a frame is encoded to UTF-8 and framed
    again (Daphne, then autobahn) and passes the session middleware: at 400
    viewers and 10 frames a second that is most of Daphne's time. The fan-out
    builds the frame's bytes once instead and writes them to each connection
    this returns. None (the ASGI path) unless ``send`` is the session
    middleware's around Daphne's reply to an open, uncompressed, unmasked
    server connection.
    """
    try:
        wrapper = getattr(send, "__self__", None)
        reply = getattr(wrapper, "real_send", send)
        connection = reply.args[0] if isinstance(reply, functools.partial) else None
        if connection is None or not connection.factory.isServer:
            return None
        if connection.maskServerFrames or connection._perMessageCompress is not None:
            return None
        connection.transport.write, connection.state, connection.STATE_OPEN, connection.send_queue  # noqa: B018
        return connection
    except Exception:
        return None


class RunConsumer(GuardedJsonConsumer):
    """``/ws/runs/<id>/?after=N``: layout, stored frames after N, live frames, status, summary.

    The consumer joins the run's group before it reads the stored frames, so a
    frame published meanwhile arrives as a group message too; ``last_i`` drops
    such duplicates, and a gap in the live sequence is filled from the database.

    The group is joined through this process's fan-out hub
    (:mod:`reviewer.realtime.fanout`): one membership per process, and a live
    frame that follows the last one sent is written straight to the socket.
    Anything else (a gap, a status, an access check, a frame that arrives while
    the stored ones are still being sent) goes through the viewer's own queue,
    handled in order by ``_drain``.
    """

    async def connect(self) -> None:
        """Check access, join the group, then send everything stored so far."""
        self.run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        self.group = realtime.run_group(self.run_id)
        self.last_i = self._after_from_query()
        self.final_sent = False
        self.live = False
        self._backlog: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._drain_task: asyncio.Task[None] | None = None
        self._direct: Any = None
        user = self.user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.refuse(CLOSE_NOT_LOGGED_IN)
            return
        run, refusal = await _run_for_user(self.run_id, user)
        if run is None:
            await self.refuse(refusal)
            return
        self._direct = direct_connection(self.base_send)
        self.hub = fanout.hub_for(self.channel_layer)
        await self.hub.join(self.group, self)
        await self.accept()
        # Read the run again after joining: a final status read now is final
        # for every frame, since frames are committed before the status.
        run, refusal = await _run_for_user(self.run_id, user)
        if run is None:  # deleted, or access withdrawn, meanwhile
            await self.close(code=refusal)
            return
        await self.send_json({"type": "layout", "layout": run["layout"], "run": run})
        await self._send_stored()
        if run["status"] in FINAL_STATUSES:
            await self._send_final(run["status"], run["reason"] or None, run["summary"])
        else:
            await self.send_json({"type": "status", "status": run["status"], "reason": None})
        self.live = True
        self._kick()

    def fast_frame(self, message: dict[str, Any]) -> str | None:
        """The live frame's text when it is the next one and nothing waits before it;
        ``""`` when it was sent already; None when it must wait its turn in the queue."""
        if message.get("type") != "run.frame" or not self.live or self._drain_task is not None:
            return None
        i = message["i"]
        if i <= self.last_i or self.final_sent:
            return ""
        if i != self.last_i + 1:
            return None  # a gap: filled from the database by run_frame
        self.last_i = i
        return str(message["text"])

    async def write(self, text: str) -> None:
        """Write a frame's text to the socket."""
        await self.send(text_data=text)

    def write_wire(self, wire: bytes) -> bool:
        """Write a whole websocket frame straight to Daphne's connection (see ``direct_connection``)."""
        connection = self._direct
        if connection is None or connection.state != connection.STATE_OPEN or connection.send_queue:
            return False
        connection.transport.write(wire)
        return True

    def enqueue(self, message: dict[str, Any]) -> None:
        """Queue ``message`` for ``_drain``; a frame past ``BACKLOG_MAX`` is dropped (read later)."""
        if message.get("type") == "run.frame" and self._backlog.qsize() >= BACKLOG_MAX:
            return
        self._backlog.put_nowait(message)
        self._kick()

    def _kick(self) -> None:
        if self.live and self._drain_task is None and not self._backlog.empty():
            self._drain_task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        """Handle the queued messages in order, then give the fast path back."""
        try:
            while not self._backlog.empty():
                await self.dispatch(self._backlog.get_nowait())
        except Exception:
            log.warning("run viewer of run %s could not handle a message", self.run_id, exc_info=True)
        finally:
            self._drain_task = None
        self._kick()

    def _after_from_query(self) -> int:
        query = parse_qs(self.scope.get("query_string", b"").decode())
        try:
            return int(query.get("after", ["-1"])[0])
        except ValueError:
            return -1

    async def _send_stored(self) -> None:
        """Send stored frames after ``last_i``, page by page, as the database holds them."""
        while True:
            frames = await _frame_texts_after(self.run_id, self.last_i)
            for i, text in frames:
                await self.send(text_data=stored_frame_text(text))
                self.last_i = i
            if len(frames) < selectors.FRAMES_PER_READ:
                return

    async def _send_final(self, status: str, reason: str | None, summary: Any) -> None:
        if self.final_sent:
            return
        self.final_sent = True
        await self.send_json({"type": "status", "status": status, "reason": reason})
        if summary is not None:
            # The outcomes' shares of offered, adding up to 100%, worked out here once.
            await self.send_json({"type": "summary", "summary": summary, "shares": outcome_shares(summary)})

    async def disconnect(self, code: int) -> None:
        """Leave the group."""
        self.live = False
        if getattr(self, "hub", None) is not None:
            await self.hub.leave(self.group, self)
        task = getattr(self, "_drain_task", None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Viewers only listen; commands go through the REST API."""

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Hand live frames straight to ``run_frame``.

        Channels closes stale database connections before every handler, a hop
        to the one shared sync thread; at 10 frames a second to 50 viewers those
        hops queue up behind each other and become the lag. A live frame needs
        no database (a gap is filled through ``database_sync_to_async``, which
        does its own connection upkeep), so it skips the hop.
        """
        if message.get("type") == "run.frame":
            await self.run_frame(message)
        else:
            await super().dispatch(message)

    async def run_frame(self, event: dict[str, Any]) -> None:
        """A live frame (see ``run_player.frame_event``): forward it unless already
        sent; fill a gap from the database first."""
        i = event["i"]
        if i <= self.last_i or self.final_sent:
            return
        if i > self.last_i + 1:
            await self._send_stored()
            if i <= self.last_i:
                return
        await self.send(text_data=event["text"])
        self.last_i = i

    async def access_withdrawn(self, event: dict[str, Any]) -> None:
        """Reviewers were removed from the run's session: close if this viewer was one."""
        if self.user.pk in event["user_ids"]:
            run, refusal = await _run_for_user(self.run_id, self.user)
            if run is None:
                await self.close(code=refusal)

    async def run_status(self, event: dict[str, Any]) -> None:
        """A status change; the final one carries the summary."""
        if event["status"] in FINAL_STATUSES:
            # Frames are published before the status; catch up on any dropped.
            await self._send_stored()
            await self._send_final(event["status"], event.get("reason"), event.get("summary"))
        elif not self.final_sent:
            await self.send_json({"type": "status", "status": event["status"], "reason": event.get("reason")})


@database_sync_to_async
def _session_access(session_id: int, user: Any) -> int:
    """0 when ``user`` may watch the session, else the close code."""

    if selectors.sessions_visible_to(user).filter(pk=session_id).exists():
        return 0
    return CLOSE_FORBIDDEN if ReviewSession.objects.filter(pk=session_id).exists() else CLOSE_NOT_FOUND


def _presence_pass(content: Any) -> str:
    """The pass a presence message names; Invalid naming the field otherwise."""
    if not isinstance(content, dict) or content.get("type") != "presence":
        raise Invalid("type", 'type: send {"type": "presence", "pass": NAME}')
    review_pass = content.get("pass")
    if not isinstance(review_pass, str) or review_pass not in presence.PASSES:
        raise Invalid("pass", f"pass: use one of {', '.join(presence.PASSES)}")
    return review_pass


@database_sync_to_async
def _bring_everyone(session_id: int, user: Any, review_pass: Any) -> None:
    """Move the session, and every tab open on it, to ``review_pass``."""

    session = selectors.sessions_visible_to(user).get(pk=session_id)
    services.session_bring_everyone(session=session, user=user, review_pass=str(review_pass))


class SessionConsumer(GuardedJsonConsumer):
    """``/ws/sessions/<id>/``: findings, the current pass and presence, live.

    Presence (who views which pass) is kept in Redis with a time to live, so a
    viewer whose server died drops out of the list by itself.
    """

    async def connect(self) -> None:
        """Check access, join the group, announce the viewer."""
        self.session_id = int(self.scope["url_route"]["kwargs"]["session_id"])
        self.group = realtime.session_group(self.session_id)
        self.presence: presence.Presence | None = None
        user = self.user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.refuse(CLOSE_NOT_LOGGED_IN)
            return
        refusal = await _session_access(self.session_id, user)
        if refusal:
            await self.refuse(refusal)
            return
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        self.presence = presence.Presence(self.session_id, self.channel_name, user)
        await self.presence.join()
        await self._broadcast_presence()

    async def disconnect(self, code: int) -> None:
        """Leave the group and the viewer list."""
        if getattr(self, "presence", None) is not None:
            try:
                await self.presence.leave()
                await self._broadcast_presence()
            except Exception:
                log.warning("could not remove presence", exc_info=True)
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """``{"type": "presence", "pass": "numbers"}`` says which pass this viewer is on;
        ``{"type": "bring", "pass": "numbers"}`` (the owner) moves every viewer there."""
        if isinstance(content, dict) and content.get("type") == "bring":
            try:
                await _bring_everyone(self.session_id, self.user, content.get("pass"))
            except ServiceError as exc:
                await self.send_json(ws_reply(exc))
            return
        try:
            review_pass = _presence_pass(content)
        except Invalid as exc:
            await self.send_json(ws_reply(exc))
            return
        if self.presence is not None:
            await self.presence.set_pass(review_pass)
            await self._broadcast_presence()

    async def _broadcast_presence(self) -> None:
        viewers = await presence.viewers(self.session_id)
        await self.channel_layer.group_send(
            self.group, {"type": "session.event", "event": "presence", "data": {"viewers": viewers}}
        )

    async def access_withdrawn(self, event: dict[str, Any]) -> None:
        """Reviewers were removed from the session: close if this viewer was one."""
        if self.user.pk in event["user_ids"]:
            refusal = await _session_access(self.session_id, self.user)
            if refusal:
                await self.close(code=refusal)

    async def session_event(self, event: dict[str, Any]) -> None:
        """Relay an event published by ``realtime.session_event`` as ``{"type": event, **data}``."""
        await self.send_json({"type": event["event"], **event.get("data", {})})
