"""``/ws/inbox/``: the signed-in user's unread notification count, live.

Thin like the other consumers: it joins the user's own group, sends the count
once, then relays ``inbox.unread`` messages published by
:func:`reviewer.review.notifications.push_unread`.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from reviewer import selectors
from reviewer.realtime import groups as realtime
from reviewer.realtime.consumers import CLOSE_NOT_LOGGED_IN, GuardedJsonConsumer


class InboxConsumer(GuardedJsonConsumer):
    """One user's inbox count; each user hears only their own group."""

    async def connect(self) -> None:
        """Join the user's group, then send the current count."""
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.refuse(CLOSE_NOT_LOGGED_IN)
            return
        self.group = realtime.user_group(user.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        count = await database_sync_to_async(selectors.unread_count)(user)
        await self.send_json({"type": "inbox.unread", "unread": count})

    async def disconnect(self, code: int) -> None:
        """Leave the group."""
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """The page only listens; marking read goes through the REST API."""

    async def inbox_unread(self, event: dict[str, Any]) -> None:
        """Forward the new count."""
        await self.send_json({"type": "inbox.unread", "unread": event["unread"]})
