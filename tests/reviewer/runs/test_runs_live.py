"""Live runs end to end: the REST API, a real Celery worker, real channels-redis,
and websocket clients of the ASGI app."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async as sync_to_async
from runs_helpers import (
    api_get,
    api_post,
    engine_summary,
    frame_indexes,
    read_until_final,
    summarize,
    without_wall,
    ws_connect,
)

from reviewer.models import EmulatorRun, RunCommand, RunFrame

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("fresh_channel_layer")]


@pytest.fixture(autouse=True)
def _worker(celery_worker_process: str) -> str:
    return celery_worker_process


async def _start(user: Any, scenario: str, **extra: Any) -> int:
    response = await api_post(user, "/api/runs/", {"scenario": scenario, **extra})
    assert response.status_code == 202, response.content
    return response.json()["id"]


async def _stored_indexes(run_id: int) -> list[int]:
    return await sync_to_async(list)(RunFrame.objects.filter(run_id=run_id).order_by("i").values_list("i", flat=True))


async def test_it_streams_every_frame_in_order_to_two_viewers_and_ends_with_the_engines_summary(
    run_users: dict, review_session: Any, tiny_scenario: str
) -> None:
    owner, reviewer = run_users["owner"], run_users["reviewer"]
    run_id = await _start(owner, tiny_scenario, speed=10, session=review_session.pk,
                          overrides=["duration_s=15"])
    first, ok_first, _ = await ws_connect(f"/ws/runs/{run_id}/", owner)
    second, ok_second, _ = await ws_connect(f"/ws/runs/{run_id}/", reviewer)
    assert ok_first and ok_second
    got_first = await read_until_final(first)
    got_second = await read_until_final(second)
    await first.disconnect()
    await second.disconnect()

    run = await sync_to_async(EmulatorRun.objects.get)(pk=run_id)
    assert run.status == "done", run.reason
    expected = list(range(30))  # 15 simulated seconds, a frame every 0.5 s
    for got in (got_first, got_second):
        assert got[0]["type"] == "layout"
        assert got[0]["layout"] == run.layout
        assert got[0]["run"]["id"] == run_id
        assert frame_indexes(got) == expected, summarize(got)
        assert [m["type"] for m in got[-2:]] == ["status", "summary"]
        assert got[-2]["status"] == "done"
        assert without_wall(got[-1]["summary"]) == engine_summary(run.scenario, run.seed)
    assert await _stored_indexes(run_id) == expected

    # A viewer that reconnects with the last frame it has gets only the rest.
    late, ok_late, _ = await ws_connect(f"/ws/runs/{run_id}/?after=21", reviewer)
    assert ok_late
    got_late = await read_until_final(late)
    await late.disconnect()
    assert frame_indexes(got_late) == list(range(22, 30))
    assert got_late[-1]["summary"] == got_first[-1]["summary"]

    detail = (await api_get(owner, f"/api/runs/{run_id}/")).json()
    assert detail["status"] == "done" and detail["frames_stored"] == 30
    assert detail["summary"] == run.summary


async def test_it_cancels_a_running_run(run_users: dict, tiny_scenario: str) -> None:
    owner = run_users["owner"]
    run_id = await _start(owner, tiny_scenario, speed=1, overrides=["duration_s=120"])
    viewer, ok, _ = await ws_connect(f"/ws/runs/{run_id}/", owner)
    assert ok
    cancelled = []

    async def cancel_after_two(frame: dict) -> None:
        if frame["i"] == 1 and not cancelled:
            response = await api_post(owner, f"/api/runs/{run_id}/cancel/")
            assert response.status_code == 202
            cancelled.append(True)

    got = await read_until_final(viewer, timeout_s=30, on_frame=cancel_after_two)
    await viewer.disconnect()
    statuses = [m for m in got if m["type"] == "status"]
    assert statuses[-1]["status"] == "cancelled"
    assert "cancelled by owner" in statuses[-1]["reason"]
    run = await sync_to_async(EmulatorRun.objects.get)(pk=run_id)
    assert run.status == "cancelled" and run.finished_at is not None
    assert run.summary is not None and run.summary["sim_s"] < 120
    stored = await _stored_indexes(run_id)
    assert 2 <= len(stored) < 240
    assert frame_indexes(got) == stored


async def test_it_applies_a_live_fault_and_the_frames_after_it_show_it(
    run_users: dict, tiny_scenario: str
) -> None:
    owner = run_users["owner"]
    run_id = await _start(owner, tiny_scenario, speed=10, overrides=["duration_s=20"])
    viewer, ok, _ = await ws_connect(f"/ws/runs/{run_id}/", owner)
    assert ok
    sent = []

    async def kill_after_three(frame: dict) -> None:
        if frame["i"] >= 2 and not sent:
            response = await api_post(owner, f"/api/runs/{run_id}/faults/", {"kill": "host:1"})
            assert response.status_code == 202, response.content
            sent.append(frame["i"])

    got = await read_until_final(viewer, on_frame=kill_after_three)
    await viewer.disconnect()
    run = await sync_to_async(EmulatorRun.objects.get)(pk=run_id)
    assert run.status == "done", run.reason
    command = await sync_to_async(RunCommand.objects.get)(run_id=run_id, kind="fault")
    assert command.command == "kill host:1" and not command.error
    after = command.applied_after_frame
    assert after is not None and after > sent[0]
    assert command.applied_at_s == pytest.approx(after * 0.5)

    frames = [m["frame"] for m in got if m["type"] == "frame"]
    assert [f["i"] for f in frames] == list(range(40))
    assert all(f["h"]["alive"] == [1, 1] for f in frames[:after])
    assert "kill host:1" in frames[after]["events"]
    assert all(f["h"]["alive"] == [1, 0] for f in frames[after:])
    # The recorded fault reproduces the run exactly.
    assert without_wall(run.summary) == engine_summary(run.scenario, run.seed, [(after, "kill host:1")])
