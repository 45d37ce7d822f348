"""Frames per second delivered, and lag from a frame's creation to its arrival,
at 1, 10 and 50 (or, e.g., 50, 200 and 400) websocket clients watching one live run at 10 frames a second.

Starts its own valkey, SQLite database, one Celery worker and Daphne on
loopback; real websocket clients (the ``websockets`` package) connect with a
Django session cookie. The worker stamps each frame message with the wall time
it published it; the lag is arrival minus that stamp (one machine, one clock).
Clients connect at most ``CONNECTING`` at a time (a storm of hundreds of
handshakes at once is a different measurement), and a client that cannot
connect stops the benchmark with its error rather than leave it waiting.
Target: p95 lag under 250 ms with 400 clients on one Daphne.

    python benchmarks/bench_stream.py [--clients 1,10,50] [--seconds 20] [--layer core|pubsub]

``--layer pubsub`` runs the same measurement on channels-redis's pub/sub layer
(benchmarks/settings_pubsub.py) instead of the configured one, for comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

from live_stack import LiveStack, machine

#: Handshakes in flight at once while the viewers connect.
CONNECTING = 20


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100), nearest rank."""
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


async def watch(url: str, cookie: str, origin: str, gate: asyncio.Semaphore,
                results: dict[str, Any]) -> None:
    """One viewer: connect, then record the lag of every live frame until the summary."""
    import websockets

    async with gate:
        ws = await websockets.connect(url, additional_headers={"Cookie": cookie}, origin=origin,
                                      max_size=None, open_timeout=60)
    async with ws:
        results["connected"] = time.time()
        lags, arrivals = results.setdefault("lags", []), results.setdefault("arrivals", [])
        async for raw in ws:
            now = time.time()
            message = json.loads(raw)
            if message["type"] == "frame":
                results.setdefault("frames", []).append(message["frame"]["i"])
                if message.get("created") is not None:
                    lags.append(now - message["created"])
                    arrivals.append(now)
            elif message["type"] == "summary":
                return


async def measure(port: int, cookie: str, run_id: int, clients: int, start_run: Any) -> dict[str, Any]:
    """Connect ``clients`` viewers, start the run, gather their figures."""
    url = f"ws://127.0.0.1:{port}/ws/runs/{run_id}/"
    origin = f"http://127.0.0.1:{port}"
    per_client: list[dict[str, Any]] = [{} for _ in range(clients)]
    gate = asyncio.Semaphore(CONNECTING)
    tasks = [asyncio.create_task(watch(url, cookie, origin, gate, r)) for r in per_client]
    while sum(1 for r in per_client if "connected" in r) < clients:
        for task in tasks:
            if task.done() and task.exception() is not None:
                raise RuntimeError(f"a viewer could not connect: {task.exception()!r}")
        await asyncio.sleep(0.05)
    await asyncio.to_thread(start_run)
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=600)
    lags = [lag for r in per_client for lag in r["lags"]]
    rates = []
    for r in per_client:
        if len(r["arrivals"]) > 1:
            rates.append((len(r["arrivals"]) - 1) / (r["arrivals"][-1] - r["arrivals"][0]))
    complete = all(r.get("frames") == sorted(set(r["frames"])) for r in per_client)
    return {
        "clients": clients,
        "frames_per_client": statistics.median(len(r.get("frames", [])) for r in per_client),
        "in_order_no_dupes": complete,
        "fps_per_client_median": statistics.median(rates) if rates else 0.0,
        "fps_total": sum(rates),
        "lag_ms_median": statistics.median(lags) * 1000,
        "lag_ms_p95": percentile(lags, 95) * 1000,
        "lag_ms_max": max(lags) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="1,10,50", help="comma-separated client counts")
    parser.add_argument("--seconds", type=float, default=20.0, help="wall seconds per run")
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

        from reviewer.runs.services import build_run, enqueue_run, resolve_scenario

        user = get_user_model().objects.create_user("bench", is_staff=True)
        client = Client()
        client.force_login(user)
        cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
        stack.start_workers(1)
        port = stack.start_daphne()
        print(f"machine: {machine()}")
        print(f"channel layer: {settings.CHANNEL_LAYERS['default']['BACKEND']}")
        # The doc's system at its average load: one frame per simulated second, at speed 10.
        duration = int(args.seconds * 10)
        from emulator.scenario.presets import load_preset

        doc = {**load_preset("doc-as-written").to_dict(), "duration_s": duration, "faults": []}
        resolved = resolve_scenario(scenario=doc)
        print(f"run: doc-as-written without its faults, {duration} simulated s, sample_s 1, speed 10 -> 10 frames/s, "
              f"{args.seconds:g} s per measurement")
        print(f"{'clients':>7} {'frames':>7} {'ordered':>7} {'fps/client':>10} {'fps total':>9} "
              f"{'lag p50 ms':>10} {'lag p95 ms':>10} {'lag max ms':>10}")
        for count in counts:
            run = build_run(user=user, resolved=resolved, seed=None, speed="10", session=None)

            def start_run(run: Any = run) -> None:
                with transaction.atomic():
                    enqueue_run(run)

            row = asyncio.run(measure(port, cookie, run.pk, count, start_run))
            print(f"{row['clients']:>7} {row['frames_per_client']:>7.0f} {str(row['in_order_no_dupes']):>7} "
                  f"{row['fps_per_client_median']:>10.2f} {row['fps_total']:>9.1f} {row['lag_ms_median']:>10.1f} "
                  f"{row['lag_ms_p95']:>10.1f} {row['lag_ms_max']:>10.1f}", flush=True)
    finally:
        stack.close()


if __name__ == "__main__":
    main()
