"""Publishing events to websocket groups from synchronous code.

Views, services and Celery tasks call these; consumers relay them. Events are
sent after the surrounding transaction commits, so a viewer never hears of a
row that a rollback then removes, and by a background thread with a short
timeout, so a stalled Redis never holds up a request.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import threading
import time
from typing import Any

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


def user_group(user_id: int) -> str:
    """The channel group that carries one user's inbox count to their open pages."""
    return f"user.{user_id}"


# A send that takes longer than this is given up: a stalled Redis must not hold
# up anything but the live view (the database row is the record).
PUBLISH_TIMEOUT_S = 2.0
# Messages waiting for the background sender; past this they are dropped.
PUBLISH_QUEUE_MAX = 10_000


class BackgroundPublisher:
    """Sends group messages in order from one background thread with its own event loop.

    Requests hand their events over and return at once; each send is bounded
    by ``PUBLISH_TIMEOUT_S``, so a Redis that stops answering delays nothing
    but the live view.
    """

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue(maxsize=PUBLISH_QUEUE_MAX)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, group: str, message: dict[str, Any]) -> None:
        """Queue ``message`` for ``group``; dropped (and logged) when the queue is full."""
        self._ensure_thread()
        try:
            self._queue.put_nowait((group, message))
        except queue.Full:
            log.warning("dropped %s to %s: %d messages wait for the channel layer",
                        message.get("type"), group, PUBLISH_QUEUE_MAX)

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait until every queued message was sent or given up; False on timeout."""
        deadline = time.monotonic() + timeout_s
        while self._queue.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="realtime-publisher", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        while True:
            group, message = self._queue.get()
            try:
                layer = get_channel_layer()
                if layer is not None:
                    loop.run_until_complete(asyncio.wait_for(layer.group_send(group, message), PUBLISH_TIMEOUT_S))
            except Exception:  # the channel layer is best effort; the DB is the record
                log.warning("could not publish %s to %s", message.get("type"), group, exc_info=True)
            finally:
                self._queue.task_done()

    def _after_fork(self) -> None:
        # A forked child (a Celery pool process) has no thread and maybe a held lock.
        self._queue = queue.Queue(maxsize=PUBLISH_QUEUE_MAX)
        self._thread = None
        self._lock = threading.Lock()


publisher = BackgroundPublisher()
os.register_at_fork(after_in_child=publisher._after_fork)


async def _send_bounded(group: str, message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is not None:
        await asyncio.wait_for(layer.group_send(group, message), PUBLISH_TIMEOUT_S)


def publish_now(group: str, message: dict[str, Any]) -> None:
    """Send ``message`` (it must carry a ``type``) to ``group`` without waiting for it.

    A failure to reach the channel layer, or a send that takes longer than
    ``PUBLISH_TIMEOUT_S``, is logged, not raised: the database row is the
    record, and late viewers read it from there.
    """
    if get_channel_layer() is None:
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is not None:
        # Called from code running inside an event loop (an async test, or a
        # sync function a consumer called without sync_to_async): the send is
        # scheduled on that loop.
        task = loop.create_task(_send_bounded(group, message))
        _pending.add(task)
        task.add_done_callback(_sent)
        return
    publisher.submit(group, message)


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
