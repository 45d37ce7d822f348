"""A worker killed in the middle of a run: the run never stays "running".

Real Celery worker processes are killed with SIGKILL. When only the pool child
dies, the broker hands the run to a worker again and it resumes; when the whole
worker dies, the surviving worker's watchdog marks the run failed with the
reason. Either way within 30 s.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any

import pytest
from channels.db import database_sync_to_async as sync_to_async
from runs_helpers import (
    api_post,
    engine_summary,
    frame_indexes,
    read_until_final,
    summarize,
    wait_for_status,
    without_wall,
    ws_connect,
)

from reviewer.models import EmulatorRun, RunFrame

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("fresh_channel_layer")]

RESOLVED_WITHIN_S = 30.0


@pytest.fixture(scope="module")
def two_workers(celery_workers: Any) -> Any:
    """Two single-process workers sharing the queue."""
    celery_workers.start_many(["w1", "w2"])
    return celery_workers


async def _start(user: Any, scenario: str, **extra: Any) -> int:
    response = await api_post(user, "/api/runs/", {"scenario": scenario, **extra})
    assert response.status_code == 202, response.content
    return response.json()["id"]


async def _wait_for_frames(run_id: int, count: int, timeout_s: float = 30.0) -> EmulatorRun:
    deadline = time.monotonic() + timeout_s
    while True:
        run = await sync_to_async(EmulatorRun.objects.get)(pk=run_id)
        if run.frames_stored >= count:
            return run
        assert time.monotonic() < deadline, f"run {run_id} stored {run.frames_stored} frames in {timeout_s} s"
        await asyncio.sleep(0.05)


async def test_it_resumes_a_run_whose_worker_process_was_killed_storing_each_frame_once(
    two_workers: Any, run_users: dict, tiny_scenario: str
) -> None:
    owner = run_users["owner"]
    run_id = await _start(owner, tiny_scenario, speed=10, overrides=["duration_s=30"])
    viewer, ok, _ = await ws_connect(f"/ws/runs/{run_id}/", owner)
    assert ok
    run = await _wait_for_frames(run_id, 8)
    children = two_workers.pool_child_pids(run.worker)
    assert len(children) == 1
    os.kill(children[0], signal.SIGKILL)
    killed_at = time.monotonic()

    got = await read_until_final(viewer, timeout_s=RESOLVED_WITHIN_S)
    await viewer.disconnect()
    run = await wait_for_status(run_id, ("done", "failed"), timeout_s=1)
    assert time.monotonic() - killed_at < RESOLVED_WITHIN_S
    assert run.status == "done", run.reason
    assert run.attempts == 2
    stored = await sync_to_async(list)(
        RunFrame.objects.filter(run_id=run_id).order_by("i").values_list("i", flat=True))
    assert stored == list(range(60))
    # The viewer saw every frame once, in order, across the two attempts.
    assert frame_indexes(got) == list(range(60)), summarize(got)
    assert without_wall(run.summary) == engine_summary(run.scenario, run.seed)


async def test_it_marks_a_run_failed_with_the_reason_when_its_whole_worker_dies(
    two_workers: Any, run_users: dict, tiny_scenario: str
) -> None:
    owner = run_users["owner"]
    run_id = await _start(owner, tiny_scenario, speed=1, overrides=["duration_s=300"])
    run = await _wait_for_frames(run_id, 2)
    viewer, ok, _ = await ws_connect(f"/ws/runs/{run_id}/", owner)
    assert ok
    two_workers.kill(run.worker)
    killed_at = time.monotonic()

    got = await read_until_final(viewer, timeout_s=RESOLVED_WITHIN_S + 5)
    await viewer.disconnect()
    run = await wait_for_status(run_id, ("failed",), timeout_s=1)
    assert time.monotonic() - killed_at < RESOLVED_WITHIN_S
    assert "stopped" in run.reason and "no heartbeat" in run.reason
    final = [m for m in got if m["type"] == "status"][-1]
    assert final == {"type": "status", "status": "failed", "reason": run.reason}
