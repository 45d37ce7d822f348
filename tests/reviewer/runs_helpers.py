"""Helpers shared by the live-run tests: API calls and websocket clients."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from channels.db import database_sync_to_async as sync_to_async
from channels.testing import WebsocketCommunicator
from rest_framework.test import APIClient

FINAL = ("done", "cancelled", "failed")


def api(user: Any) -> APIClient:
    """An API client logged in as ``user``."""
    client = APIClient()
    client.force_authenticate(user)
    return client


async def api_post(user: Any, url: str, data: dict[str, Any] | None = None) -> Any:
    """POST from async code; the response."""
    return await sync_to_async(api(user).post)(url, data or {}, format="json")


async def api_get(user: Any, url: str) -> Any:
    """GET from async code; the response."""
    return await sync_to_async(api(user).get)(url)


def session_cookie(user: Any) -> bytes:
    """A Cookie header value logging ``user`` in (for websocket connections)."""
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode()


async def ws_connect(path: str, user: Any | None) -> tuple[WebsocketCommunicator, bool, Any]:
    """Open a websocket to the ASGI app as ``user`` (None: anonymous)."""
    from reviewer.asgi import application

    headers = [(b"origin", b"http://testserver"), (b"host", b"testserver")]
    if user is not None:
        headers.append((b"cookie", await sync_to_async(session_cookie)(user)))
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, code = await communicator.connect(timeout=10)
    return communicator, connected, code


async def ws_refusal(path: str, user: Any | None) -> int | None:
    """The close code a refused websocket reads (the handshake is accepted, then closed); None if not closed."""
    communicator, connected, code = await ws_connect(path, user)
    assert connected, f"the handshake was refused ({code}), so the browser never sees the close code"
    message = await communicator.receive_output(timeout=5)
    return message.get("code") if message["type"] == "websocket.close" else None


async def read_until_final(communicator: WebsocketCommunicator, timeout_s: float = 60.0,
                           on_frame: Any = None) -> list[dict[str, Any]]:
    """Every message until the final status and summary (or a final status without one)."""
    messages: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no final status within {timeout_s} s; got {summarize(messages)}")
        message = await communicator.receive_json_from(timeout=left)
        messages.append(message)
        if message["type"] == "frame" and on_frame is not None:
            await on_frame(message["frame"])
        if message["type"] == "summary":
            return messages
        if message["type"] == "status" and message["status"] in FINAL:
            # The summary follows a final status, unless the run never started.
            # (receive_nothing, unlike a receive that times out, leaves the app running.)
            if not await communicator.receive_nothing(timeout=1.0):
                messages.append(await communicator.receive_json_from(timeout=5))
            return messages


def summarize(messages: list[dict[str, Any]]) -> list[str]:
    """Message types (and frame numbers) for assertion messages."""
    return [f"frame {m['frame']['i']}" if m["type"] == "frame" else m["type"] for m in messages]


def frame_indexes(messages: list[dict[str, Any]]) -> list[int]:
    """The frame numbers in the order they arrived."""
    return [m["frame"]["i"] for m in messages if m["type"] == "frame"]


def without_wall(summary: dict[str, Any]) -> dict[str, Any]:
    """A summary without its wall-clock time, which differs between runs."""
    return {key: value for key, value in summary.items() if key != "wall_s"}


def engine_summary(scenario_dict: dict[str, Any], seed: int, faults: list[tuple[int, str]] = ()) -> dict:
    """The summary the engine gives alone, with ``faults`` applied after the given frame counts."""
    from emulator.scenario import Scenario
    from emulator.sim.engine import Engine

    scenario = Scenario.from_dict(scenario_dict, max_requests=None)
    engine = Engine(scenario, seed=seed)
    for after_frames, command in faults:
        engine.advance_to(min(after_frames * scenario.sample_s, scenario.duration_s))
        engine.inject(command)
    return without_wall(engine.run().to_dict())


async def wait_for_status(run_id: int, statuses: tuple[str, ...], timeout_s: float) -> Any:
    """Poll the database until the run reaches one of ``statuses``; the run."""
    from reviewer.models import EmulatorRun

    deadline = time.monotonic() + timeout_s
    while True:
        run = await sync_to_async(EmulatorRun.objects.get)(pk=run_id)
        if run.status in statuses:
            return run
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} is {run.status!r} after {timeout_s} s, not in {statuses}")
        await asyncio.sleep(0.2)


def play_saved_fleet(owner: APIClient, user: Any, doc: Any, fleet_id: int,
                     overrides: list[str]) -> tuple[Any, dict[str, Any] | None]:
    """Start a run of a saved fleet config from a new session at full speed, play it to
    the end, and return the run and its last stored frame."""
    from reviewer.models import EmulatorRun, FleetConfig, RunFrame
    from reviewer.review import services
    from reviewer.runs.player import run_play

    session = services.session_create(owner=user, doc=doc, fleet_config=FleetConfig.objects.get(pk=fleet_id))
    started = owner.post("/api/runs/", {"session": session.pk, "speed": "max", "overrides": overrides},
                         format="json")
    assert started.status_code == 202, started.content
    run_id = started.json()["id"]
    assert run_play(run_id=run_id) == "done"
    run = EmulatorRun.objects.get(pk=run_id)
    last = RunFrame.objects.filter(run=run).order_by("-i").values_list("data", flat=True).first()
    return run, last


def run_preset(preset: str, overrides: list[str] | tuple[str, ...]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run ``preset`` with ``overrides`` (seed 1, no request cap) in this process: its
    frames and its summary, as the run page receives them."""
    from emulator.scenario import load_scenario
    from emulator.sim.engine import Engine

    scenario = load_scenario(preset, max_requests=None).with_overrides(list(overrides), max_requests=None)
    engine = Engine(scenario, seed=1)
    frames = [f.to_dict() for f in engine.advance_to(scenario.duration_s)]
    return frames, engine.summary().to_dict()


def pick(data: Any, path: list[str]) -> Any:
    """``data[path[0]][path[1]]...``, or None where the path does not lead."""
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def charts_of(mechanism: str) -> list[dict[str, Any]]:
    """The run page's charts under ``mechanism``'s heading."""
    from reviewer.views.mechanism_charts import MECHANISM_CHARTS

    return [c for c in MECHANISM_CHARTS if c["mechanism"] == mechanism]
