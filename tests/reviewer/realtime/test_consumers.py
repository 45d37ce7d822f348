"""The websocket consumers on real channels-redis: access, frames without gaps or
duplicates, session events and presence."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async as sync_to_async
from channels.layers import get_channel_layer
from django.utils import timezone
from runs_helpers import (
    api_get,
    frame_indexes,
    read_until_final,
    session_cookie,
    ws_connect,
    ws_refusal,
)

from reviewer.models import EmulatorRun, RunFrame
from reviewer.realtime import groups as realtime
from reviewer.runs.outcomes import outcome_shares
from reviewer.runs.player import frame_event

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_channel_layer")]

LAYOUT = {"models": ["small"], "hosts": [{"index": 0, "units": 10}],
          "workers": {"model": [0], "host": [0], "first_unit": [0], "units": [2]}}


@pytest.fixture(autouse=True)
def _redis(redis_url: str) -> str:
    return redis_url


def _frame(i: int) -> dict[str, Any]:
    return {"i": i, "t_s": (i + 1) * 0.5, "models": ["small"], "m": {"offered": [i]},
            "w": {"state": [1], "backlog": [0]}, "h": {"alive": [1]}, "events": [], "behind": False}


def _make_run(user: Any, *, status: str = "running", frames: int = 0, session: Any = None) -> EmulatorRun:
    run = EmulatorRun.objects.create(
        started_by=user, session=session, scenario={"duration_s": 10.0}, seed=1, speed="10",
        layout=LAYOUT, status=status, summary={"ok": 3} if status == "done" else None,
        heartbeat_at=timezone.now(),
    )
    RunFrame.objects.bulk_create(RunFrame(run=run, i=i, t_s=(i + 1) * 0.5, data=_frame(i)) for i in range(frames))
    return run


async def _publish(run_id: int, message: dict[str, Any]) -> None:
    await get_channel_layer().group_send(realtime.run_group(run_id), message)


async def test_it_refuses_anonymous_viewers_outsiders_and_unknown_runs(run_users: dict,
                                                                      review_session: Any) -> None:
    run = await sync_to_async(_make_run)(run_users["owner"], session=review_session)
    # Accepted, then closed: a code sent before the handshake never reaches a browser.
    for user, code in ((None, 4401), (run_users["outsider"], 4403)):
        assert await ws_refusal(f"/ws/runs/{run.pk}/", user) == code
    assert await ws_refusal(f"/ws/runs/{run.pk + 1000}/", run_users["owner"]) == 4404
    for user in (run_users["reviewer"], run_users["staff"]):
        communicator, connected, _ = await ws_connect(f"/ws/runs/{run.pk}/", user)
        assert connected
        await communicator.disconnect()


async def test_it_opens_a_sessionless_run_only_to_its_starter_and_staff(run_users: dict) -> None:
    run = await sync_to_async(_make_run)(run_users["owner"])
    assert await ws_refusal(f"/ws/runs/{run.pk}/", run_users["reviewer"]) == 4403


async def test_it_only_reads_a_run_whose_worker_stopped_beating(run_users: dict) -> None:
    run = await sync_to_async(_make_run)(run_users["owner"])
    await sync_to_async(EmulatorRun.objects.filter(pk=run.pk).update)(
        heartbeat_at=timezone.now() - timedelta(minutes=5))
    viewer, connected, _ = await ws_connect(f"/ws/runs/{run.pk}/", run_users["owner"])
    assert connected
    layout = await viewer.receive_json_from()
    assert layout["run"]["status"] == "running"
    await viewer.disconnect()
    # Reaping is the watchdog's and the beat's job, never a viewer's.
    assert (await sync_to_async(EmulatorRun.objects.get)(pk=run.pk)).status == "running"


async def test_it_refuses_a_foreign_origin(run_users: dict) -> None:
    from channels.testing import WebsocketCommunicator

    from reviewer.asgi import application

    run = await sync_to_async(_make_run)(run_users["owner"])
    cookie = await sync_to_async(session_cookie)(run_users["owner"])
    communicator = WebsocketCommunicator(application, f"/ws/runs/{run.pk}/",
                                         headers=[(b"origin", b"http://evil.example"), (b"cookie", cookie)])
    connected, _ = await communicator.connect()
    assert not connected


async def test_it_sends_stored_frames_then_live_ones_without_gaps_or_duplicates(run_users: dict) -> None:
    run = await sync_to_async(_make_run)(run_users["owner"], frames=5)
    viewer, connected, _ = await ws_connect(f"/ws/runs/{run.pk}/?after=1", run_users["owner"])
    assert connected
    first = await viewer.receive_json_from()
    assert (first["type"], first["layout"]) == ("layout", LAYOUT)
    # The run as the API shows it, not a copy of some of its fields.
    assert first["run"] == (await api_get(run_users["owner"], f"/api/runs/{run.pk}/")).json()
    assert (first["run"]["status"], first["run"]["duration_s"], first["run"]["speed"]) == ("running", 10.0, 10)
    for i in (2, 3, 4):
        assert await viewer.receive_json_from() == {"type": "frame", "frame": _frame(i)}
    assert await viewer.receive_json_from() == {"type": "status", "status": "running", "reason": None}

    # Frames 3 and 4 come again live (the worker published them while the
    # viewer read the database); frame 6 was stored but its message was lost.
    for i in (3, 4, 5):
        await _publish(run.pk, frame_event(_frame(i), 1.0))
    await sync_to_async(RunFrame.objects.create)(run=run, i=6, t_s=3.5, data=_frame(6))
    await _publish(run.pk, frame_event(_frame(7), 2.0))
    await _publish(run.pk, {"type": "run.status", "status": "done", "reason": None, "summary": {"ok": 3}})

    rest = await read_until_final(viewer, timeout_s=10)
    assert frame_indexes(rest) == [5, 6, 7]
    assert [m.get("created") for m in rest if m["type"] == "frame"] == [1.0, None, 2.0]
    assert rest[0]["frame"] == _frame(5)
    assert rest[-2:] == [{"type": "status", "status": "done", "reason": None},
                         {"type": "summary", "summary": {"ok": 3}, "shares": outcome_shares({"ok": 3})}]
    await _publish(run.pk, frame_event(_frame(8), 3.0))
    assert await viewer.receive_nothing(timeout=0.3)
    await viewer.disconnect()


async def test_it_sends_a_finished_run_whole_then_its_status_and_summary(run_users: dict) -> None:
    run = await sync_to_async(_make_run)(run_users["owner"], status="done", frames=3)
    viewer, connected, _ = await ws_connect(f"/ws/runs/{run.pk}/", run_users["owner"])
    assert connected
    got = await read_until_final(viewer, timeout_s=10)
    assert [m["type"] for m in got] == ["layout", "frame", "frame", "frame", "status", "summary"]
    assert got[-1]["summary"] == {"ok": 3}
    await viewer.disconnect()


def _emit_finding_created(session_id: int) -> None:
    from django.db import transaction

    with transaction.atomic():
        realtime.session_event(session_id, "finding.created", {"finding": {"id": 5, "title": "Queue grows"}})


async def _clear_presence(session_id: int) -> None:
    from reviewer.realtime import presence

    client = presence._client()
    await client.delete(presence._key(session_id))
    await client.aclose()


async def test_it_relays_session_events_to_every_participant(run_users: dict, review_session: Any) -> None:
    await _clear_presence(review_session.pk)
    owner, ok_owner, _ = await ws_connect(f"/ws/sessions/{review_session.pk}/", run_users["owner"])
    assert ok_owner
    assert (await owner.receive_json_from())["type"] == "presence"
    await sync_to_async(_emit_finding_created)(review_session.pk)
    assert await owner.receive_json_from() == {"type": "finding.created",
                                               "finding": {"id": 5, "title": "Queue grows"}}
    assert await ws_refusal(f"/ws/sessions/{review_session.pk}/", run_users["outsider"]) == 4403
    assert await ws_refusal(f"/ws/sessions/{review_session.pk}/", None) == 4401
    assert await ws_refusal(f"/ws/sessions/{review_session.pk + 1000}/", run_users["owner"]) == 4404
    await owner.disconnect()


async def test_it_shows_who_views_which_pass(run_users: dict, review_session: Any) -> None:
    await _clear_presence(review_session.pk)
    path = f"/ws/sessions/{review_session.pk}/"
    owner, _, _ = await ws_connect(path, run_users["owner"])
    owner_id, reviewer_id = run_users["owner"].pk, run_users["reviewer"].pk
    assert await owner.receive_json_from() == {
        "type": "presence", "viewers": [{"user_id": owner_id, "username": "owner", "pass": None}]}

    reviewer, _, _ = await ws_connect(path, run_users["reviewer"])
    both = {"type": "presence", "viewers": [{"user_id": owner_id, "username": "owner", "pass": None},
                                            {"user_id": reviewer_id, "username": "reviewer", "pass": None}]}
    assert await owner.receive_json_from() == both
    assert await reviewer.receive_json_from() == both

    await reviewer.send_json_to({"type": "presence", "pass": "numbers"})
    moved = await owner.receive_json_from()
    assert moved["viewers"][1] == {"user_id": reviewer_id, "username": "reviewer", "pass": "numbers"}
    assert await reviewer.receive_json_from() == moved

    await reviewer.send_json_to({"type": "presence", "pass": "napkin"})
    error = await reviewer.receive_json_from()
    assert error["type"] == "error" and "pass" in error["error"] and "numbers" in error["error"]
    # The websocket answers with the same mapping as HTTP: the field and a 400.
    assert (error["field"], error["status"]) == ("pass", 400)

    await reviewer.disconnect()
    assert await owner.receive_json_from() == {
        "type": "presence", "viewers": [{"user_id": owner_id, "username": "owner", "pass": None}]}
    await owner.disconnect()


async def _next_not_presence(client: Any) -> dict[str, Any]:
    while (got := await client.receive_json_from(timeout=5))["type"] == "presence":
        pass
    return got


async def test_the_owner_brings_every_viewer_to_a_pass(run_users: dict, review_session: Any) -> None:
    from reviewer.models import ReviewSession

    await _clear_presence(review_session.pk)
    path = f"/ws/sessions/{review_session.pk}/"
    owner, _, _ = await ws_connect(path, run_users["owner"])
    reviewer, _, _ = await ws_connect(path, run_users["reviewer"])

    await reviewer.send_json_to({"type": "bring", "pass": "trace"})
    error = await _next_not_presence(reviewer)
    assert error["type"] == "error" and (error["field"], error["status"]) == ("pass", 403)

    await owner.send_json_to({"type": "bring", "pass": "trace"})
    brought = {"type": "pass.brought", "pass": "trace", "by": "owner"}
    assert await _next_not_presence(owner) == brought
    assert await _next_not_presence(reviewer) == brought
    session = await sync_to_async(ReviewSession.objects.get)(pk=review_session.pk)
    assert session.current_pass == "trace"
    await reviewer.disconnect()
    await owner.disconnect()


def test_it_drops_viewers_whose_entry_was_not_refreshed(redis_url: str) -> None:
    import json
    import time

    from reviewer.realtime import presence

    async def scenario() -> list[dict[str, Any]]:
        client = presence._client()
        key = presence._key(999)
        await client.delete(key)
        stale = {"user_id": 1, "username": "gone", "pass": "trace", "seen": time.time() - 120, "changed": 0}
        fresh = {"user_id": 2, "username": "here", "pass": "break", "seen": time.time(), "changed": 0}
        await client.hset(key, mapping={"a": json.dumps(stale), "b": json.dumps(fresh)})
        await client.aclose()
        return await presence.viewers(999)

    assert async_to_sync(scenario)() == [{"user_id": 2, "username": "here", "pass": "break"}]


def _remove_reviewer(session: Any) -> None:
    from reviewer.review import services

    services.session_update(session=session, reviewers=[])


def _publish_finding_created(session_id: int) -> None:
    from django.db import transaction

    with transaction.atomic():
        realtime.session_event(session_id, "finding.created", {"finding": {"id": 6, "title": "After removal"}})


async def test_it_cuts_the_session_feed_of_a_removed_reviewer(run_users: dict, review_session: Any) -> None:
    await _clear_presence(review_session.pk)
    path = f"/ws/sessions/{review_session.pk}/"
    owner, _, _ = await ws_connect(path, run_users["owner"])
    reviewer, connected, _ = await ws_connect(path, run_users["reviewer"])
    assert connected
    await sync_to_async(_remove_reviewer)(review_session)
    await sync_to_async(_publish_finding_created)(review_session.pk)
    received = []
    while True:
        message = await reviewer.receive_output(timeout=5)
        received.append(message)
        if message["type"] == "websocket.close":
            break
        assert "After removal" not in message.get("text", ""), received
    assert message["code"] == 4403
    # The owner keeps the feed.
    while (got := await owner.receive_json_from(timeout=5))["type"] == "presence":
        pass
    assert got["finding"]["title"] == "After removal"
    await owner.disconnect()


async def test_it_cuts_the_run_feed_of_a_removed_reviewer(run_users: dict, review_session: Any) -> None:
    run = await sync_to_async(_make_run)(run_users["owner"], session=review_session)
    viewer, connected, _ = await ws_connect(f"/ws/runs/{run.pk}/", run_users["reviewer"])
    assert connected
    assert (await viewer.receive_json_from())["type"] == "layout"
    assert (await viewer.receive_json_from())["type"] == "status"
    await sync_to_async(_remove_reviewer)(review_session)
    assert (await viewer.receive_output(timeout=5)) == {"type": "websocket.close", "code": 4403}


async def test_it_refuses_a_page_of_another_port_on_the_same_host(run_users: dict) -> None:
    from channels.testing import WebsocketCommunicator

    from reviewer.asgi import application

    run = await sync_to_async(_make_run)(run_users["owner"])
    cookie = await sync_to_async(session_cookie)(run_users["owner"])
    communicator = WebsocketCommunicator(application, f"/ws/runs/{run.pk}/", headers=[
        (b"origin", b"http://testserver:9999"), (b"host", b"testserver"), (b"cookie", cookie)])
    connected, _ = await communicator.connect()
    assert not connected


@pytest.mark.parametrize("kind", ["run", "session"])
async def test_it_answers_text_that_is_not_json_and_stays_open(run_users: dict, review_session: Any,
                                                                kind: str) -> None:
    if kind == "run":
        run = await sync_to_async(_make_run)(run_users["owner"], session=review_session)
        path, first = f"/ws/runs/{run.pk}/", ("layout", "status")
    else:
        await _clear_presence(review_session.pk)
        path, first = f"/ws/sessions/{review_session.pk}/", ("presence",)
    viewer, connected, _ = await ws_connect(path, run_users["owner"])
    assert connected
    for expected in first:
        assert (await viewer.receive_json_from())["type"] == expected
    await viewer.send_to(text_data="not json {")
    error = await viewer.receive_json_from()
    assert (error["type"], error["field"], error["status"]) == ("error", "message", 400)
    await viewer.send_to(bytes_data=b"\x00\x01")
    assert (await viewer.receive_json_from())["field"] == "message"
    # Still open: a later good message is handled.
    if kind == "session":
        await viewer.send_json_to({"type": "presence", "pass": "trace"})
        assert (await viewer.receive_json_from())["viewers"][0]["pass"] == "trace"
    else:
        assert await viewer.receive_nothing(timeout=0.2)
    await viewer.disconnect()


async def test_it_limits_presence_messages_and_closes_a_flooding_client(run_users: dict,
                                                                        review_session: Any) -> None:
    from reviewer.realtime import consumers

    await _clear_presence(review_session.pk)
    viewer, _, _ = await ws_connect(f"/ws/sessions/{review_session.pk}/", run_users["owner"])
    assert (await viewer.receive_json_from())["type"] == "presence"
    for _ in range(consumers.INBOUND_BURST + consumers.INBOUND_REFUSALS_BEFORE_CLOSE):
        await viewer.send_json_to({"type": "presence", "pass": "numbers"})
    broadcasts, refusals = 0, 0
    while (message := await viewer.receive_output(timeout=5))["type"] != "websocket.close":
        data = json.loads(message["text"])
        broadcasts += data["type"] == "presence"
        refusals += data["type"] == "error" and data["status"] == 429
    assert message["code"] == 1008
    assert broadcasts <= consumers.INBOUND_BURST + 1
    assert refusals == consumers.INBOUND_REFUSALS_BEFORE_CLOSE - 1


def _draft_two_findings(session: Any, reviewer: Any) -> None:
    from reviewer.review import services

    session.file_directly = False
    session.save(update_fields=["file_directly"])
    for title in ("Only copy of the queue", "Round-robin ignores busy workers"):
        services.finding_create(session=session, author=reviewer, review_pass="trace", title=title)


def _publish_review(session: Any, reviewer: Any) -> None:
    from reviewer.review.publishing import review_publish

    review_publish(session=session, reviewer=reviewer, verdict="needs_changes", summary="Two to fix.")


async def test_drafts_stay_off_the_socket_and_arrive_together_on_publish(run_users: dict,
                                                                         review_session: Any) -> None:
    await _clear_presence(review_session.pk)
    owner, ok, _ = await ws_connect(f"/ws/sessions/{review_session.pk}/", run_users["owner"])
    assert ok
    assert (await owner.receive_json_from())["type"] == "presence"
    await sync_to_async(_draft_two_findings)(review_session, run_users["reviewer"])
    # Only that whose turn it is changed, with nothing of the drafts in it.
    assert await owner.receive_json_from(timeout=5) == {"type": "turn.changed"}
    while not await owner.receive_nothing(timeout=0.5):
        assert await owner.receive_json_from() == {"type": "turn.changed"}
    await sync_to_async(_publish_review)(review_session, run_users["reviewer"])
    event = await owner.receive_json_from(timeout=5)
    assert event["type"] == "review.published"
    assert (event["review"]["verdict"], event["review"]["reviewer"]) == ("needs_changes", "reviewer")
    assert sorted(f["title"] for f in event["findings"]) == ["Only copy of the queue",
                                                             "Round-robin ignores busy workers"]
    assert {(f["draft"], f["verdict"]) for f in event["findings"]} == {(False, "needs_changes")}
    assert await owner.receive_nothing(timeout=0.3)
    await owner.disconnect()


def _notify_reviewer(session: Any, owner: Any, reviewer: Any) -> None:
    from django.db import transaction

    from reviewer.review import notifications

    with transaction.atomic():
        notifications.notify(recipient=reviewer, kind="mention", session=session, actor=owner,
                             text="owner mentioned you")


async def test_the_inbox_socket_carries_the_users_own_unread_count(run_users: dict, review_session: Any) -> None:
    reviewer, ok, _ = await ws_connect("/ws/inbox/", run_users["reviewer"])
    assert ok
    assert await reviewer.receive_json_from() == {"type": "inbox.unread", "unread": 0}
    owner, _, _ = await ws_connect("/ws/inbox/", run_users["owner"])
    assert await owner.receive_json_from() == {"type": "inbox.unread", "unread": 0}
    await sync_to_async(_notify_reviewer)(review_session, run_users["owner"], run_users["reviewer"])
    assert await reviewer.receive_json_from(timeout=5) == {"type": "inbox.unread", "unread": 1}
    assert await owner.receive_nothing(timeout=0.5)  # nobody else hears of it
    assert await ws_refusal("/ws/inbox/", None) == 4401
    await reviewer.disconnect()
    await owner.disconnect()


async def _group_members(run_id: int) -> int:
    layer = get_channel_layer()
    key = layer._group_key(realtime.run_group(run_id))
    return int(await layer.connection(layer.consistent_hash(realtime.run_group(run_id))).zcard(key))


async def test_viewers_of_one_run_in_one_process_share_one_group_membership(run_users: dict) -> None:
    run = await sync_to_async(_make_run)(run_users["owner"], frames=2)
    viewers = []
    for _ in range(3):
        viewer, connected, _ = await ws_connect(f"/ws/runs/{run.pk}/", run_users["owner"])
        assert connected
        viewers.append(viewer)
    # The channel layer carries each frame to this process once, not once per viewer.
    assert await _group_members(run.pk) == 1
    for viewer in viewers:
        assert (await viewer.receive_json_from())["type"] == "layout"
        assert [(await viewer.receive_json_from())["frame"]["i"] for _ in range(2)] == [0, 1]
        assert (await viewer.receive_json_from())["type"] == "status"
    await _publish(run.pk, frame_event(_frame(2), 5.0))
    await _publish(run.pk, frame_event(_frame(2), 5.0))  # a repeat is dropped
    await _publish(run.pk, {"type": "run.status", "status": "done", "reason": None, "summary": {"ok": 3}})
    for viewer in viewers:
        rest = await read_until_final(viewer, timeout_s=10)
        assert frame_indexes(rest) == [2]
        assert [m.get("created") for m in rest if m["type"] == "frame"] == [5.0]
        assert rest[-1] == {"type": "summary", "summary": {"ok": 3}, "shares": outcome_shares({"ok": 3})}
    # The last viewer out takes the process out of the group.
    await viewers[0].disconnect()
    assert await _group_members(run.pk) == 1
    for viewer in viewers[1:]:
        await viewer.disconnect()
    assert await _group_members(run.pk) == 0



async def test_stored_frames_reach_a_late_viewer_as_stored_without_encoding_each_again(
        run_users: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    from reviewer.realtime.consumers import RunConsumer

    encoded: list[Any] = []
    real_encode = RunConsumer.encode_json

    async def counting_encode(content: Any) -> str:
        encoded.append(content)
        return await real_encode(content)

    monkeypatch.setattr(RunConsumer, "encode_json", staticmethod(counting_encode))
    run = await sync_to_async(_make_run)(run_users["owner"], status="done", frames=40)
    viewer, connected, _ = await ws_connect(f"/ws/runs/{run.pk}/", run_users["owner"])
    assert connected
    got = await read_until_final(viewer, timeout_s=10)
    assert [m["frame"] for m in got if m["type"] == "frame"] == [_frame(i) for i in range(40)]
    # Only the layout, the status and the summary were encoded here; the frames went out as stored.
    assert [m["type"] for m in encoded] == ["layout", "status", "summary"]
    await viewer.disconnect()
