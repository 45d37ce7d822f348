"""The continuous worker model against the step-by-step reference at scale: the whole
shipped conversation trace sped up ten times (19,366 requests in six minutes) on four
workers whose 80,000-token KV caches preempt hundreds of times, request by request.

Small agreement runs (a minute on two to four workers) make a few preemptions at most;
a fleet under this load has queued requests behind preempted ones on every worker, the
state in which the two models once parted (459 preemptions against 439).

Each policy the references model runs the whole trace: the plain ones as it is, with
an admission bound, and (with 64 shared prefixes drawn onto the requests and prefix
caching) the cache-aware ones. Marked slow, about 60 s in all; CI runs them."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prefix_reference import PrefixRequest, simulate_prefix
from token_reference import ReferenceResult, TokenRequest, WorkerParams, simulate
from token_scenarios import reference_percentiles, scenario, write_trace

from emulator import Engine, Summary
from emulator.scenario.traces import load_trace

SPEEDUP = 10.0
PARAMS = WorkerParams(max_num_seqs=256, max_batched_tokens=8192, kv_cache_tokens=80_000)
#: The engine's summary keeps latency in histogram bins 0.23 % wide.
PERCENTILES = 0.005


#: Each arrival moves later by its index times this (0.3 ms over the whole trace).
#: The trace's times (0.1 us apart at ten times) and the default steps (multiples of
#: 10 us) put an arrival exactly on a step end now and then, a tie that only float
#: rounding would decide: the two models add step times in different orders.
JITTER_S = math.sqrt(2) * 1e-8


def _conversation(limit: int | None = None) -> list[TokenRequest]:
    trace = load_trace("azure-conv-2023")
    rows = zip(trace.arrival_s / SPEEDUP, trace.prompt_tokens, trace.output_tokens, strict=True)
    reqs = [TokenRequest(float(t) + i * JITTER_S, int(p), int(o)) for i, (t, p, o) in enumerate(rows)]
    return reqs[:limit] if limit is not None else reqs


def _with_prefixes(requests: list[TokenRequest]) -> list[PrefixRequest]:
    """The requests, each given one of 64 shared prefixes (a Zipf law, seed 7) of up
    to 512 tokens: the trace itself has none."""
    rng = np.random.default_rng(7)
    weights = np.arange(1, 65, dtype=float) ** -1.1
    groups = rng.choice(64, size=len(requests), p=weights / weights.sum())
    return [
        PrefixRequest(r.arrival_s, r.prompt_tokens, r.output_tokens, int(g), min(r.prompt_tokens, 512))
        for r, g in zip(requests, groups, strict=True)
    ]


def _prefix_trace(requests: list[PrefixRequest], path: Path) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for r in requests:
            f.write(json.dumps({
                "arrival_s": r.arrival_s, "prompt_tokens": r.prompt_tokens,
                "output_tokens": r.output_tokens, "prefix_id": f"g{r.group}",
                "prefix_tokens": r.prefix_tokens,
            }) + "\n")
    return path


def _run_both(
    tmp_path: Path, requests: list[TokenRequest], policy: str, duration_s: float,
    timeout_s: float | None = None, queue_limit: int = 0,
    scorers: dict[str, float] | None = None,
) -> tuple[Summary, dict[int, tuple[float, float]], ReferenceResult]:
    """Both models on the same requests; the engine's completions as its router records
    them (row -> first token, done). Requests with prefixes run with prefix caching
    (blocks of 16 tokens) against the prefix reference."""
    prefixed = [r for r in requests if isinstance(r, PrefixRequest)]
    sections: dict[str, Any] = {"dispatcher": {"queue_limit": queue_limit}}
    if scorers is not None:
        sections["dispatcher"]["scorers"] = scorers
    if prefixed:
        trace = _prefix_trace(prefixed, tmp_path / "requests.jsonl")
        sections["worker"] = {"prefix_cache": True, "block_tokens": 16}
    else:
        trace = write_trace(requests, tmp_path / "requests.jsonl")
    engine = Engine(scenario(
        workers=4, duration_s=duration_s, trace=trace, policy=policy, params=PARAMS,
        timeout_s=timeout_s, **sections,
    ))
    router = engine.disp[0]
    done: dict[int, tuple[float, float]] = {}
    record = router.complete_request

    def spy(rec: tuple) -> None:
        done[rec[0]] = (rec[1], rec[2])
        record(rec)

    router.complete_request = spy  # type: ignore[method-assign]
    summary = engine.run()
    if prefixed:
        reference = simulate_prefix(
            prefixed, workers=4, params=PARAMS, policy=policy, timeout_s=timeout_s,
            duration_s=duration_s, queue_limit=queue_limit, weights=scorers,
        ).run
    else:
        reference = simulate(
            requests, workers=4, params=PARAMS, policy=policy, timeout_s=timeout_s,
            duration_s=duration_s, queue_limit=queue_limit,
        )
    return summary, done, reference


def _same_requests(done: dict[int, tuple[float, float]], reference: ReferenceResult) -> None:
    finished = {i: r for i, r in enumerate(reference.records) if r.done_s is not None}
    assert set(done) == set(finished)
    late = [
        i for i, r in finished.items()
        if abs(done[i][0] - r.first_token_s) > 1e-6 or abs(done[i][1] - r.done_s) > 1e-6  # type: ignore[operator]
    ]
    assert not late, f"{len(late)} requests finish at other times, the first row {min(late)}"


def test_a_worker_whose_own_queue_blocks_leaves_the_held_requests_to_the_others(
    tmp_path: Path,
) -> None:
    # The first 85 s: the first preemptions put recomputes at the heads of workers'
    # own queues while the pull queue holds requests. A worker in a decode stretch
    # whose own head does not fit takes no held request, so another worker must
    # look at the held queue at its next step start.
    requests = _conversation(3800)
    summary, done, reference = _run_both(tmp_path, requests, "pull", 85.0)
    assert reference.preemptions >= 3
    assert summary.preemptions == reference.preemptions
    assert summary.ok == reference.count("ok")
    _same_requests(done, reference)


def _check_whole_trace(
    summary: Summary, done: dict[int, tuple[float, float]], reference: ReferenceResult,
    offered: int,
) -> None:
    assert summary.offered == offered
    assert summary.ok == reference.count("ok")
    assert summary.timed_out == reference.count("timed_out")
    assert summary.shed == reference.count("shed")
    assert summary.preemptions == reference.preemptions
    _same_requests(done, reference)
    for field, figures in (("latency_s", summary.latency_s), ("ttft_s", summary.ttft_s)):
        expected = reference_percentiles(reference, field)
        for q in ("p50", "p95", "p99"):
            assert figures[q] == pytest.approx(expected[q], rel=PERCENTILES), (field, q)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("policy", "timeout_s"),
    [("pull", None), ("round_robin", None), ("least_loaded", None), ("pull", 6.0)],
)
def test_it_agrees_with_the_reference_on_the_whole_trace_at_ten_times(
    tmp_path: Path, policy: str, timeout_s: float | None
) -> None:
    requests = _conversation()
    summary, done, reference = _run_both(tmp_path, requests, policy, 900.0, timeout_s)
    if timeout_s is None:
        assert reference.preemptions > 400  # the load the test is about
    else:
        assert reference.count("timed_out") > 1000
    _check_whole_trace(summary, done, reference, len(requests))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("policy", "scorers"),
    [
        ("prefix_aware", None),
        ("weighted", {"prefix": 2.0, "queue": 1.0, "kv_free": 1.0}),
        ("round_robin", None),
    ],
)
def test_it_agrees_with_the_prefix_reference_on_the_whole_trace_with_shared_prefixes(
    tmp_path: Path, policy: str, scorers: dict[str, float] | None
) -> None:
    requests = _with_prefixes(_conversation())
    summary, done, reference = _run_both(tmp_path, requests, policy, 900.0, scorers=scorers)  # type: ignore[arg-type]
    assert reference.preemptions > 0 or policy == "round_robin"
    assert summary.prefix_hit_rate is not None and summary.prefix_hit_rate > 0.9
    _check_whole_trace(summary, done, reference, len(requests))


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["pull", "round_robin", "least_loaded"])
def test_it_agrees_with_the_reference_on_the_whole_trace_under_an_admission_bound(
    tmp_path: Path, policy: str
) -> None:
    requests = _conversation()
    summary, done, reference = _run_both(tmp_path, requests, policy, 900.0, queue_limit=20)
    assert reference.count("shed") > 100  # the bound refuses requests
    _check_whole_trace(summary, done, reference, len(requests))
