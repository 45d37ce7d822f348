"""Roles by websocket, from one table: who may open the run, session and inbox
sockets, and who may send the ``presence`` command (the one client command).

``WS_ROWS``: socket -> (path, {role: close code, or None when it opens}).
"""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async as sync_to_async
from collab_fixtures import *  # noqa: F403
from review_data_fixtures import *  # noqa: F403
from runs_helpers import ws_connect
from support import TINY_SCENARIO

from reviewer.review import services

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_channel_layer")]

ROLES = ("owner", "reviewer", "author", "removed", "outsider", "anonymous", "staff")
SEEN = {"owner": None, "reviewer": None, "author": None, "removed": 4403, "outsider": 4403, "anonymous": 4401,
        "staff": None}
WS_ROWS: dict[str, tuple[str, dict[str, int | None]]] = {
    "run": ("/ws/runs/{run}/", SEEN),
    "session": ("/ws/sessions/{session}/", SEEN),
    "inbox": ("/ws/inbox/", {role: 4401 if role == "anonymous" else None for role in ROLES}),
}


@pytest.fixture
def ws_ids(team: dict[str, Any], drafting_review: Any, monkeypatch: Any, redis_url: str) -> dict[str, int]:
    from reviewer.models import EmulatorRun
    from reviewer.runs import services as run_services

    monkeypatch.setattr("reviewer.runs.services.enqueue_run", lambda run: None)
    run = run_services.run_start(user=team["reviewer"], session=drafting_review, scenario=TINY_SCENARIO,
                                 speed=10)
    EmulatorRun.objects.filter(pk=run.pk).update(status="running")
    services.session_update(session=drafting_review, reviewers=[team["reviewer"]])  # reviewer2 removed
    return {"session": drafting_review.pk, "run": run.pk}


async def _first_message(communicator: Any) -> dict[str, Any] | None:
    try:
        return await communicator.receive_output(timeout=3)
    except Exception:  # nothing sent: the socket stays open
        return None


@pytest.mark.parametrize("socket", sorted(WS_ROWS))
@pytest.mark.parametrize("role", ROLES)
async def test_each_role_opens_what_the_table_says(team, ws_ids, socket, role):
    path, expected = WS_ROWS[socket]
    user = None if role == "anonymous" else team["reviewer2" if role == "removed" else role]
    communicator, connected, code = await ws_connect(path.format(**ws_ids), user)
    assert connected, code
    message = await _first_message(communicator)
    closed = message is not None and message["type"] == "websocket.close"
    if expected[role] is not None:
        assert closed and message is not None and message.get("code") == expected[role], message
        return
    assert not closed, message
    if socket == "session":  # the presence command: the viewer counts come back to the sender
        await communicator.send_json_to({"type": "presence", "pass": "numbers"})
        for _ in range(5):
            reply = await communicator.receive_json_from(timeout=5)
            if reply.get("event") == "presence" or reply.get("type") == "presence":
                break
        else:
            raise AssertionError(f"no presence answer; last {reply}")
    await communicator.disconnect()


async def test_presence_from_a_removed_reviewer_is_never_heard(team, ws_ids):
    """Removed while the socket is open: the next command closes it with 4403."""
    communicator, connected, _ = await ws_connect(f"/ws/sessions/{ws_ids['session']}/", team["reviewer"])
    assert connected
    await _first_message(communicator)
    from reviewer.models import ReviewSession

    review = await sync_to_async(ReviewSession.objects.get)(pk=ws_ids["session"])
    await sync_to_async(services.session_update)(session=review, reviewers=[])
    await communicator.send_json_to({"type": "presence", "pass": "numbers"})
    for _ in range(5):
        message = await communicator.receive_output(timeout=5)
        if message["type"] == "websocket.close":
            assert message.get("code") == 4403
            break
    else:
        raise AssertionError("the removed reviewer's socket stayed open")
