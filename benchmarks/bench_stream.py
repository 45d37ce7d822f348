"""Frames per second delivered, and lag from a frame's creation to its arrival,
at 1, 10 and 50 (or, e.g., 50, 200 and 400) websocket clients watching one live run at 10 frames a second.

Starts its own valkey, SQLite database, one Celery worker and Daphne on
loopback; real websocket clients (the ``websockets`` package) connect with a
Django session cookie. The worker stamps each frame message with the wall time
it published it; the lag is arrival minus that stamp (one machine, one clock),
for every live frame at every client.
Target: p95 lag under 250 ms with 400 clients on one Daphne.

What the figures include and what they leave out:

- The run is held back until every viewer is connected (clients connect at
  most ``CONNECTING`` at a time; a handshake Daphne drops on a busy machine is
  tried again, up to ``HANDSHAKE_TRIES``, and counted under ``retried``).
  Otherwise the workers' watchdog hands the run over within seconds and it
  plays while hundreds of viewers still connect and replay stored frames: that
  measures the connecting, not the stream.
- The viewers are spread over ``--processes`` processes (default
  ``VIEWER_PROCESSES``). Four hundred clients in one Python process read their
  sockets one after another, so the last one's lag includes the other 399's
  reading; real viewers are separate browsers.
- A client notes a live frame's arrival time and keeps its text; the JSON is
  decoded after the stream ends (other messages at once, to see the summary).
  Decoding 4,000 frames a second on the same two cores as Daphne measured the
  benchmark more than the server.
- The cpu columns are the share of one core Daphne, the viewers and the worker
  used while the run played, and how busy the whole machine was; on a shared
  machine the lag follows the machine's load, so read them together.

    python benchmarks/bench_stream.py [--clients 1,10,50] [--seconds 20] [--processes 2] [--layer core|pubsub]

``--layer pubsub`` runs the same measurement on channels-redis's pub/sub layer
(benchmarks/settings_pubsub.py) instead of the configured one, for comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import time
from datetime import timedelta
from typing import Any

from live_stack import LiveStack, cpu_seconds, machine, machine_busy

#: Processes the viewers are spread over by default (see the module's docstring).
VIEWER_PROCESSES = 2
#: Handshakes in flight at once while the viewers connect.
CONNECTING = 20
#: Tries per viewer when Daphne drops a handshake (its connect timeout, on a busy machine).
HANDSHAKE_TRIES = 3
#: How a live frame's text starts (``run_player.frame_event``): kept undecoded until the stream ends.
LIVE_FRAME = '{"type":"frame"'
#: Longest wait for every viewer to connect, and for the stream to end.
CONNECT_TIMEOUT_S = 300.0
STREAM_TIMEOUT_S = 600.0


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100), nearest rank."""
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


async def watch(url: str, cookie: str, origin: str, gate: asyncio.Semaphore,
                results: dict[str, Any]) -> None:
    """One viewer: connect, then keep every message with its arrival time until the summary.

    A live frame's text is kept as it came and decoded after the stream (see
    :func:`figures`); anything else is decoded at once, to see the summary.
    """
    import websockets
    from websockets.exceptions import InvalidMessage
    from websockets.typing import Origin

    async with gate:
        for attempt in range(HANDSHAKE_TRIES):
            try:
                ws = await websockets.connect(url, additional_headers={"Cookie": cookie}, origin=Origin(origin),
                                              max_size=None, open_timeout=60)
                break
            except InvalidMessage:  # Daphne dropped a handshake its app took too long to accept
                if attempt == HANDSHAKE_TRIES - 1:
                    raise
                results["retries"] = results.get("retries", 0) + 1
                await asyncio.sleep(0.5)
    async with ws:
        results["connected"] = time.time()
        received = results["received"] = []
        async for raw in ws:
            received.append((time.time(), raw))
            if not (isinstance(raw, str) and raw.startswith(LIVE_FRAME)) and json.loads(raw)["type"] == "summary":
                return


def figures(results: dict[str, Any]) -> dict[str, Any]:
    """One viewer's frame indexes in arrival order, and each live frame's arrival time and lag."""
    frames, lags, arrivals = [], [], []
    for now, raw in results["received"]:
        message = json.loads(raw)
        if message["type"] == "frame":
            frames.append(message["frame"]["i"])
            if message.get("created") is not None:
                lags.append(now - message["created"])
                arrivals.append(now)
    return {"frames": frames, "lags": lags, "arrivals": arrivals, "retries": results.get("retries", 0)}


async def _viewers(conn: Any, url: str, cookie: str, origin: str, count: int, connecting: int) -> None:
    per_client: list[dict[str, Any]] = [{} for _ in range(count)]
    gate = asyncio.Semaphore(connecting)
    tasks = [asyncio.create_task(watch(url, cookie, origin, gate, r)) for r in per_client]
    while sum(1 for r in per_client if "connected" in r) < count:
        for task in tasks:
            if task.done() and task.exception() is not None:
                conn.send(("failed", f"a viewer could not connect: {task.exception()!r}"))
                return
        await asyncio.sleep(0.05)
    began = time.process_time()
    conn.send(("connected", None))
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=STREAM_TIMEOUT_S)
    cpu = time.process_time() - began
    conn.send(("done", {"cpu": cpu, "viewers": [figures(r) for r in per_client]}))


def viewers_process(conn: Any, url: str, cookie: str, origin: str, count: int, connecting: int) -> None:
    """A process of ``count`` viewers: says when all are connected, then sends their figures."""
    try:
        asyncio.run(_viewers(conn, url, cookie, origin, count, connecting))
    except BaseException as exc:
        conn.send(("failed", repr(exc)))
        raise


def _receive(conn: Any, expected: str, timeout_s: float) -> Any:
    if not conn.poll(timeout_s):
        raise RuntimeError(f"a viewer process sent nothing for {timeout_s:g} s (waiting for {expected})")
    kind, payload = conn.recv()
    if kind != expected:
        raise RuntimeError(f"a viewer process: {payload}")
    return payload


def measure(port: int, cookie: str, run_id: int, clients: int, processes: int, start_run: Any) -> dict[str, Any]:
    """Connect ``clients`` viewers spread over ``processes`` processes, start the run, gather their figures."""
    url = f"ws://127.0.0.1:{port}/ws/runs/{run_id}/"
    origin = f"http://127.0.0.1:{port}"
    processes = max(1, min(processes, clients))
    context = multiprocessing.get_context("spawn")
    children = []
    for k in range(processes):
        count = clients // processes + (1 if k < clients % processes else 0)
        mine, theirs = context.Pipe()
        child = context.Process(target=viewers_process, daemon=True,
                                args=(theirs, url, cookie, origin, count, max(1, CONNECTING // processes)))
        child.start()
        children.append((child, mine))
    try:
        for _, conn in children:
            _receive(conn, "connected", CONNECT_TIMEOUT_S)
        start_run()
        done = [_receive(conn, "done", STREAM_TIMEOUT_S + 60) for _, conn in children]
    finally:
        for child, _ in children:
            child.join(timeout=30)
            if child.is_alive():
                child.kill()
    per_client = [v for d in done for v in d["viewers"]]
    lags = [lag for r in per_client for lag in r["lags"]]
    rates = []
    for r in per_client:
        if len(r["arrivals"]) > 1:
            rates.append((len(r["arrivals"]) - 1) / (r["arrivals"][-1] - r["arrivals"][0]))
    complete = all(r["frames"] == sorted(set(r["frames"])) for r in per_client)
    return {
        "clients": clients,
        "frames_per_client": statistics.median(len(r["frames"]) for r in per_client),
        "in_order_no_dupes": complete,
        "fps_per_client_median": statistics.median(rates) if rates else 0.0,
        "fps_total": sum(rates),
        "lag_ms_median": statistics.median(lags) * 1000,
        "lag_ms_p95": percentile(lags, 95) * 1000,
        "lag_ms_max": max(lags) * 1000,
        "viewer_cpu_s": sum(d["cpu"] for d in done),
        "retries": sum(r["retries"] for r in per_client),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="1,10,50", help="comma-separated client counts")
    parser.add_argument("--seconds", type=float, default=20.0, help="wall seconds per run")
    parser.add_argument("--processes", type=int, default=VIEWER_PROCESSES,
                        help="processes the viewers are spread over (one asyncio loop each)")
    parser.add_argument("--layer", choices=("core", "pubsub"), default="core",
                        help="channel layer: the configured one (core) or channels-redis pub/sub")
    args = parser.parse_args()
    counts = [int(c) for c in args.clients.split(",")]

    stack = LiveStack("settings_pubsub" if args.layer == "pubsub" else "reviewer.settings")
    try:
        stack.django()
        from django.conf import settings
        from django.contrib.auth import get_user_model
        from django.db import transaction
        from django.test import Client
        from django.utils import timezone

        from reviewer.models.runs import EmulatorRun, RunStatus
        from reviewer.runs.services import build_run, enqueue_run, resolve_scenario

        user = get_user_model().objects.create_user("bench", is_staff=True)
        client = Client()
        client.force_login(user)
        cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
        stack.start_workers(1)
        port = stack.start_daphne()
        daphne = next(c for c in stack.supervisor.children if c.name == "daphne")
        print(f"machine: {machine()}")
        print(f"channel layer: {settings.CHANNEL_LAYERS['default']['BACKEND']}")
        # The doc's system at its average load: one frame per simulated second, at speed 10.
        duration = int(args.seconds * 10)
        from emulator.scenario.presets import load_preset

        doc = {**load_preset("doc-as-written").to_dict(), "duration_s": duration, "faults": []}
        resolved = resolve_scenario(scenario=doc)
        print(f"viewers: spread over {args.processes} process(es); cpu columns: share of one core used by "
              "Daphne, the viewers and the worker while the run played, and how busy the whole machine was")
        print(f"run: doc-as-written without its faults, {duration} simulated s, sample_s 1, speed 10 -> 10 frames/s, "
              f"{args.seconds:g} s per measurement")
        print(f"{'clients':>7} {'frames':>7} {'ordered':>7} {'fps/client':>10} {'fps total':>9} "
              f"{'lag p50 ms':>10} {'lag p95 ms':>10} {'lag max ms':>10} "
              f"{'daphne':>7} {'viewers':>7} {'worker':>7} {'machine':>7} {'retried':>7}")
        for count in counts:
            run = build_run(user=user, resolved=resolved, seed=None, speed="10", session=None)
            # Held out of the hand-off (every worker's watchdog runs it every few seconds) until every
            # viewer is connected, and out of the lost-task requeue: a run that plays while hundreds of
            # viewers connect would measure the connecting, not the stream.
            EmulatorRun.objects.filter(pk=run.pk).update(awaiting_slot=False,
                                                         enqueued_at=timezone.now() + timedelta(days=1))

            cpu: dict[str, float] = {}

            def snapshot() -> dict[str, float]:
                busy, total = machine_busy()
                return {"daphne": cpu_seconds(daphne.pid), "workers": sum(cpu_seconds(w.pid) for w in stack.workers),
                        "busy": busy, "total": total, "wall": time.time()}

            def start_run(run: Any = run, cpu: dict[str, float] = cpu) -> None:
                cpu.update(snapshot())
                with transaction.atomic():
                    held = EmulatorRun.objects.filter(pk=run.pk, status=RunStatus.QUEUED, awaiting_slot=False,
                                                      frames_stored=0)
                    if not held.update(awaiting_slot=True, enqueued_at=timezone.now()):
                        raise RuntimeError(f"run {run.pk} started before every viewer was connected")
                    enqueue_run(run)

            row = measure(port, cookie, run.pk, count, args.processes, start_run)
            end = snapshot()
            used = {k: end[k] - cpu[k] for k in end}
            print(f"{row['clients']:>7} {row['frames_per_client']:>7.0f} {str(row['in_order_no_dupes']):>7} "
                  f"{row['fps_per_client_median']:>10.2f} {row['fps_total']:>9.1f} {row['lag_ms_median']:>10.1f} "
                  f"{row['lag_ms_p95']:>10.1f} {row['lag_ms_max']:>10.1f} "
                  f"{used['daphne'] / used['wall']:>7.0%} {row['viewer_cpu_s'] / used['wall']:>7.0%} "
                  f"{used['workers'] / used['wall']:>7.0%} {used['busy'] / used['total']:>7.0%} "
                  f"{row['retries']:>7}", flush=True)
    finally:
        stack.close()


if __name__ == "__main__":
    main()
