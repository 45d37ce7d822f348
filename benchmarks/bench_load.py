"""Write latency under load: users filing and editing findings while one user
revises a doc with many findings and two runs play.

Starts its own valkey, SQLite database, two Celery workers, the docs queue's
worker (re-anchoring) and Daphne on loopback (nothing leaves the machine) and
runs for a bounded time. Each of ``--users`` users files a finding on their
session and edits it, in a loop; one user revises a doc holding
``--findings`` findings, waits until every finding has been re-anchored onto
the new revision (a background task), and revises it again; two runs play at
speed 1. Prints the p50/p95/max latency of the writes, the doc edits' answer
time and how long re-anchoring took, the number of 5xx answers, and how the
runs ended. Target: no 5xx, p95 under 1 s on SQLite, no run failed.

The machine's load is printed first: on a machine shared with other work the
figures are slower than on an idle one, and only comparable between runs at a
similar load.

    python benchmarks/bench_load.py [--users 20] [--findings 10000] [--seconds 30]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
import urllib.error
import urllib.request
from typing import Any

# Set before the stack copies the environment: the load is far above what the
# throttles and per-doc limits let one person do.
os.environ.update({"API_THROTTLE_BURST": "off", "API_THROTTLE_SUSTAINED": "off", "API_THROTTLE_ANON": "off",
                   "DOC_FINDINGS_MAX": "100000"})

from live_stack import LiveStack, machine  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100), nearest rank."""
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


class Api:
    """JSON calls to the app on loopback with a user's token; records latency and status."""

    def __init__(self, port: int, token: str, record: list[tuple[str, float, int]]) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.token = token
        self.record = record

    def call(self, method: str, path: str, body: dict[str, Any] | None = None, kind: str = "write") -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method, headers={
            "Authorization": f"Token {self.token}", "Content-Type": "application/json"})
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                status, payload = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, payload = error.code, error.read()
        self.record.append((kind, time.monotonic() - started, status))
        return json.loads(payload) if payload and status < 300 else None


def reviewer_loop(api: Api, session_id: int, until: float) -> None:
    """File a finding, then edit it, until ``until``."""
    n = 0
    while time.monotonic() < until:
        n += 1
        created = api.call("POST", f"/api/sessions/{session_id}/findings/",
                           {"pass": "trace", "title": f"Queue note {n}", "anchor_exact": "round-robin"})
        if created:
            api.call("PATCH", f"/api/findings/{created['id']}/",
                     {"title": f"Queue note {n}, edited", "version": created["version"]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--findings", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=30.0, help="length of the load (bounded: at most 300)")
    args = parser.parse_args()
    seconds = min(args.seconds, 300.0)

    stack = LiveStack()
    try:
        stack.django()
        from django.contrib.auth import get_user_model
        from django.db import close_old_connections
        from rest_framework.authtoken.models import Token

        from emulator.scenario.presets import load_preset
        from reviewer.models import DocRevision, EmulatorRun, Finding
        from reviewer.review import services
        from reviewer.runs.services import run_start

        make = get_user_model().objects.create_user
        heavy = make("heavy")
        users = [make(f"user{i}") for i in range(args.users)]
        tokens = {u.pk: Token.objects.create(user=u).key for u in [heavy, *users]}

        # The heavy user's doc: many lines, a finding quoting each of many of them.
        lines = [f"Line {i}: the dispatcher sends batch {i} round-robin to worker {i % 97}." for i in range(2000)]
        big = services.doc_create(owner=heavy, title="Big doc", body="\n".join(lines))
        big_session = services.session_create(owner=heavy, doc=big)
        revision = big.revisions.get()
        offsets, at = [], 0
        for line in lines:
            offsets.append(at)
            at += len(line) + 1
        Finding.objects.bulk_create(
            Finding(session=big_session, author=heavy, review_pass="trace", title=f"f{k}", revision=revision,
                    anchor_exact=lines[k % len(lines)], anchor_start=offsets[k % len(lines)],
                    anchor_end=offsets[k % len(lines)] + len(lines[k % len(lines)]))
            for k in range(args.findings))

        # The reviewers' doc and session.
        small = services.doc_create(owner=users[0], title="Chat serving",
                                    body="The queue sends each batch to the next worker in round-robin order.")
        session = services.session_create(owner=users[0], doc=small, reviewers=users[1:])

        stack.start_workers(2)
        stack.start_docs_worker()
        port = stack.start_daphne()
        print(f"machine: {machine()}")
        print(f"load: {args.users} users filing and editing findings, one user revising a doc with "
              f"{args.findings:,} findings, two runs at speed 1, for {seconds:g} s")

        scenario = {**load_preset("doc-as-written").to_dict(), "duration_s": seconds, "faults": []}
        runs = [run_start(user=users[i], scenario=scenario, speed=1) for i in (0, 1)]

        record: list[tuple[str, float, int]] = []
        until = time.monotonic() + seconds
        threads = [threading.Thread(target=reviewer_loop, args=(Api(port, tokens[u.pk], record), session.pk, until))
                   for u in users]
        heavy_api = Api(port, tokens[heavy.pk], record)

        reanchored: list[float] = []

        def revise_loop() -> None:
            n = 0
            while time.monotonic() < until:
                n += 1
                began = time.monotonic()
                heavy_api.call("PATCH", f"/api/docs/{big.pk}/", {"body": f"Preface {n}.\n" + "\n".join(lines)},
                               kind="revise")
                # The findings move in the background: wait for them before the next edit
                # (reading the database, not the API, so the wait adds no load to the server).
                while time.monotonic() < until + 300:
                    latest = DocRevision.objects.filter(doc=big).order_by("-number").first()
                    if latest is not None and latest.number > 1 and latest.reanchor_status != "pending":
                        reanchored.append(time.monotonic() - began)
                        break
                    time.sleep(1.0)
                close_old_connections()

        threads.append(threading.Thread(target=revise_loop))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        deadline = time.monotonic() + 120
        while EmulatorRun.objects.filter(pk__in=[r.pk for r in runs], status__in=["queued", "running"]).exists():
            if time.monotonic() > deadline:
                break
            time.sleep(1)
        ended = {r.pk: (r.status, r.reason) for r in EmulatorRun.objects.filter(pk__in=[r.pk for r in runs])}

        writes = [latency for kind, latency, _ in record if kind == "write"]
        revises = [latency for kind, latency, _ in record if kind == "revise"]
        errors = sum(1 for _, _, status in record if status >= 500)
        print(f"writes: {len(writes)}, p50 {statistics.median(writes) * 1000:.0f} ms, "
              f"p95 {percentile(writes, 95) * 1000:.0f} ms, max {max(writes) * 1000:.0f} ms")
        if revises:
            print(f"doc edits (answered before re-anchoring): {len(revises)}, "
                  f"median {statistics.median(revises) * 1000:.0f} ms, max {max(revises) * 1000:.0f} ms")
        if reanchored:
            print(f"re-anchoring {args.findings:,} findings in the background: {len(reanchored)} done, "
                  f"median {statistics.median(reanchored):.1f} s from the edit")
        else:
            print(f"re-anchoring {args.findings:,} findings in the background: none finished")
        print(f"5xx answers: {errors}")
        print(f"runs: {ended}")
        failed = [pk for pk, (status, _) in ended.items() if status != "done"]
        print("target met" if errors == 0 and percentile(writes, 95) < 1.0 and not failed else "target missed")
    finally:
        stack.close()


if __name__ == "__main__":
    main()
