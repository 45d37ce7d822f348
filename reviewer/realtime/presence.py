"""Who is viewing a review session, and on which pass, kept in Redis.

Each open websocket has an entry in the session's hash, stamped with the time it
was last refreshed. Connections refresh their entry while open; entries not
refreshed within ``TTL_S`` (a server that died without saying goodbye) are
dropped when the list is read, and the whole hash expires once nobody refreshes
it. Redis rather than process memory, because viewers of one session may be
connected to different Daphne processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

import redis.asyncio as aioredis
from django.conf import settings

TTL_S = 60.0
REFRESH_EVERY_S = 20.0
PASSES = ("restate", "numbers", "trace", "break", "rank")


def _key(session_id: int) -> str:
    return f"presence:session:{session_id}"


def _client() -> aioredis.Redis:
    return aioredis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2)


class Presence:
    """One websocket connection's entry in a session's viewer list."""

    def __init__(self, session_id: int, channel_name: str, user: Any) -> None:
        self.session_id = session_id
        self.channel_name = channel_name
        self.user_id = user.pk
        self.username = user.get_username()
        self.review_pass: str | None = None
        self.changed_at = time.time()
        self._refresher: asyncio.Task[None] | None = None

    async def _write(self) -> None:
        entry = {"user_id": self.user_id, "username": self.username, "pass": self.review_pass,
                 "seen": time.time(), "changed": self.changed_at}
        client = _client()
        try:
            await client.hset(_key(self.session_id), self.channel_name, json.dumps(entry))
            await client.expire(_key(self.session_id), int(TTL_S))
        finally:
            await client.aclose()

    async def join(self) -> None:
        """Add the entry and keep it fresh while the connection is open."""
        await self._write()
        self._refresher = asyncio.create_task(self._refresh_forever())

    async def _refresh_forever(self) -> None:
        while True:
            await asyncio.sleep(REFRESH_EVERY_S)
            with contextlib.suppress(Exception):
                await self._write()

    async def set_pass(self, review_pass: str) -> None:
        """Record the pass this viewer is on."""
        self.review_pass = review_pass
        self.changed_at = time.time()
        await self._write()

    async def leave(self) -> None:
        """Remove the entry."""
        if self._refresher is not None:
            self._refresher.cancel()
        client = _client()
        try:
            await client.hdel(_key(self.session_id), self.channel_name)
        finally:
            await client.aclose()


async def viewers(session_id: int) -> list[dict[str, Any]]:
    """Current viewers, one per user (the pass they moved to last), ordered by username."""
    client = _client()
    try:
        entries = await client.hgetall(_key(session_id))
        now = time.time()
        latest: dict[int, dict[str, Any]] = {}
        expired: list[bytes] = []
        for field, raw in entries.items():
            entry = json.loads(raw)
            if now - entry["seen"] > TTL_S:
                expired.append(field)
                continue
            known = latest.get(entry["user_id"])
            # A user with several tabs shows the pass they moved to last.
            if known is None or entry["changed"] >= known["changed"]:
                latest[entry["user_id"]] = entry
        if expired:
            await client.hdel(_key(session_id), *expired)
    finally:
        await client.aclose()
    return [
        {"user_id": e["user_id"], "username": e["username"], "pass": e["pass"]}
        for e in sorted(latest.values(), key=lambda e: e["username"])
    ]
