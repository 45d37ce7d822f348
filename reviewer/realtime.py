"""Publishing events to websocket groups from synchronous code.

Views, services and Celery tasks call these; consumers relay them. Events are
sent after the surrounding transaction commits, so a viewer never hears of a
row that a rollback then removes.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

log = logging.getLogger(__name__)

# Sends scheduled on a running loop, kept referenced until they finish.
_pending: set[asyncio.Task[None]] = set()


def _sent(task: asyncio.Task[None]) -> None:
    _pending.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.warning("could not publish to a channel group", exc_info=task.exception())


def run_group(run_id: int) -> str:
    """The channel group that carries one emulator run's frames."""
    return f"run.{run_id}"


def session_group(session_id: int) -> str:
    """The channel group that carries one review session's live events."""
    return f"session.{session_id}"


def publish_now(group: str, message: dict[str, Any]) -> None:
    """Send ``message`` (it must carry a ``type``) to ``group`` immediately.

    A failure to reach the channel layer is logged, not raised: the database
    row is the record, and late viewers read it from there.
    """
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is not None:
        # Called from code running inside an event loop (an async test, or a
        # sync function a consumer called without sync_to_async): async_to_sync
        # cannot block here, so the send is scheduled on that loop instead.
        task = loop.create_task(layer.group_send(group, message))
        _pending.add(task)
        task.add_done_callback(_sent)
        return
    try:
        async_to_sync(layer.group_send)(group, message)
    except Exception:  # the channel layer is best effort; the DB is the record
        log.warning("could not publish %s to %s", message.get("type"), group, exc_info=True)


def publish_on_commit(group: str, message: dict[str, Any]) -> None:
    """Send ``message`` to ``group`` once the current transaction commits."""
    transaction.on_commit(lambda: publish_now(group, message))


def access_withdrawn(session_id: int, user_ids: set[int], run_ids: list[int]) -> None:
    """Tell the viewers of a session, and of its unfinished runs, that ``user_ids`` were removed.

    Each viewer's consumer checks its own user's access again and closes
    (4403) when it is gone, so a removed reviewer stops receiving at once.
    """
    message = {"type": "access.withdrawn", "user_ids": sorted(user_ids)}
    publish_on_commit(session_group(session_id), message)
    for run_id in run_ids:
        publish_on_commit(run_group(run_id), message)


def session_event(session_id: int, event: str, data: dict[str, Any]) -> None:
    """Tell every viewer of a review session that ``event`` happened.

    ``event`` is one of ``finding.created``, ``finding.updated``,
    ``finding.deleted``, ``pass.changed``, ``presence``; consumers forward
    ``{"type": event, **data}`` to the browser.
    """
    publish_on_commit(session_group(session_id), {"type": "session.event", "event": event, "data": data})
