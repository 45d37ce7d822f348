"""The engine's prefix caching and cache-aware routing against the step-by-step
reference (``prefix_reference.py``), request by request, fed identical requests through
trace replay; and the analytic hit rate of a single prefix group at light load."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prefix_reference import PrefixRequest, PrefixResult, simulate_prefix
from token_reference import WorkerParams
from token_scenarios import WORKER, scenario

from emulator import Engine, Summary
from emulator.sim.workers import ContinuousWorkers


def requests_with_prefixes(
    *, qps: float, duration_s: float, prompt: int, output: int, groups: int, prefix: int,
    zipf_s: float = 1.1, prompt_cv: float = 0.0, output_cv: float = 0.0, seed: int = 1,
) -> list[PrefixRequest]:
    """Poisson arrivals whose prefixes are drawn by a Zipf law over ``groups``."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / qps, int(qps * duration_s * 1.3) + 10)
    times = np.concatenate([[0.0], np.cumsum(gaps)])
    times = times[times < duration_s]
    n = times.size

    def sizes(mean: int, cv: float) -> np.ndarray:
        if cv == 0:
            return np.full(n, mean)
        sigma = np.sqrt(np.log1p(cv * cv))
        return np.maximum(1, np.rint(np.exp(np.log(mean) - sigma * sigma / 2 + sigma * rng.standard_normal(n)))).astype(int)

    prompts, outputs = sizes(prompt, prompt_cv), sizes(output, output_cv)
    weights = np.arange(1, groups + 1, dtype=float) ** -zipf_s
    group = rng.choice(groups, size=n, p=weights / weights.sum())
    return [
        PrefixRequest(float(t), int(p), int(o), int(g), int(min(prefix, p)))
        for t, p, o, g in zip(times, prompts, outputs, group, strict=True)
    ]


def write_trace(requests: list[PrefixRequest], path: Path) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for r in requests:
            row: dict[str, Any] = {
                "arrival_s": r.arrival_s, "prompt_tokens": r.prompt_tokens,
                "output_tokens": r.output_tokens,
            }
            if r.group >= 0:
                row.update(prefix_id=f"g{r.group}", prefix_tokens=r.prefix_tokens)
            f.write(json.dumps(row) + "\n")
    return path


def run_engine(
    requests: list[PrefixRequest], tmp_path: Path, *, workers: int, duration_s: float,
    policy: str, params: WorkerParams, timeout_s: float | None = None, cache: bool = True,
    block_tokens: int = 16, scorers: dict[str, float] | None = None,
    tiers: list[dict[str, Any]] | None = None, arch: dict[str, Any] | None = None,
) -> tuple[Summary, dict[int, tuple[float, float]], dict[int, int]]:
    """The engine's summary, (first token, done) per finished request and the prefix
    tokens each request found cached at its first admission (lower KV tiers'
    loads included, with ``tiers``: the ``worker.kv_tiers`` list, which needs ``arch``)."""
    worker: dict[str, Any] = {"prefix_cache": cache}
    if cache:
        worker["block_tokens"] = block_tokens
    if tiers:
        worker["kv_tiers"] = tiers
    sections: dict[str, Any] = {"worker": worker}
    if scorers is not None:
        sections["dispatcher"] = {"scorers": scorers}
    if arch is not None:
        sections["arch"] = arch
    sc = scenario(
        workers=workers, duration_s=duration_s, trace=write_trace(requests, tmp_path / "p.jsonl"),
        policy=policy, timeout_s=timeout_s, params=params, **sections,
    )
    engine = Engine(sc)
    router = engine.disp[0]
    done: dict[int, tuple[float, float]] = {}
    record = router.complete_request

    def spy(rec: tuple) -> None:
        done[rec[0]] = (rec[1], rec[2])
        record(rec)

    router.complete_request = spy  # type: ignore[method-assign]
    cw = engine.worker_models["continuous"]
    assert isinstance(cw, ContinuousWorkers)
    hits: dict[int, int] = {}
    admit = cw.scheduler.admit

    def admit_spy(wk: Any, seq: Any, chunks: Any, budget: int, hit: int = 0) -> int:
        hits.setdefault(seq.row, hit)
        return admit(wk, seq, chunks, budget, hit)

    cw.scheduler.admit = admit_spy  # type: ignore[method-assign]
    return engine.run(), done, hits


def check_agreement(
    summary: Summary, done: dict[int, tuple[float, float]], hits: dict[int, int], ref: PrefixResult
) -> None:
    run = ref.run
    assert summary.ok == run.count("ok")
    assert summary.timed_out == run.count("timed_out")
    assert summary.preemptions == run.preemptions
    assert summary.prefix_tokens_seen == sum(ref.seen)
    assert summary.prefill_tokens_saved == sum(ref.hit)
    first = {i: h for i, h in enumerate(ref.first_hit) if h is not None}
    assert hits == first
    finished = [(i, r) for i, r in enumerate(run.records) if r.outcome == "ok"]
    assert finished
    for i, r in finished:
        assert done[i][0] == pytest.approx(r.first_token_s, abs=1e-9), i
        assert done[i][1] == pytest.approx(r.done_s, abs=1e-9), i


@pytest.mark.parametrize("policy", ["round_robin", "least_loaded", "pull", "prefix_aware", "weighted"])
def test_it_agrees_with_the_reference_request_by_request(tmp_path: Path, policy: str) -> None:
    requests = requests_with_prefixes(
        qps=25, duration_s=40, prompt=1200, output=120, groups=30, prefix=800,
        prompt_cv=0.5, output_cv=0.8, seed=5,
    )
    summary, done, hits = run_engine(requests, tmp_path, workers=3, duration_s=40, policy=policy, params=WORKER)
    ref = simulate_prefix(requests, workers=3, params=WORKER, policy=policy, duration_s=40)
    check_agreement(summary, done, hits, ref)
    assert 0 < summary.prefill_tokens_saved < summary.prefix_tokens_seen


@pytest.mark.parametrize("policy", ["round_robin", "pull", "prefix_aware", "weighted"])
def test_it_agrees_when_cached_blocks_are_evicted_and_requests_preempted(
    tmp_path: Path, policy: str
) -> None:
    # A KV cache of 40,000 tokens a worker under 600-token prefixes of 80 groups: the
    # cache fills, blocks are evicted for running requests, and decoders get preempted.
    params = replace(WORKER, kv_cache_tokens=40_000, kv_token_s=2e-8, prefill_attn_s=1e-9)
    requests = requests_with_prefixes(
        qps=30, duration_s=40, prompt=1000, output=300, groups=80, prefix=600,
        zipf_s=0.8, prompt_cv=0.6, output_cv=1.0, seed=9,
    )
    scorers = {"prefix": 2.0, "queue": 1.0, "kv_free": 1.0}
    summary, done, hits = run_engine(
        requests, tmp_path, workers=2, duration_s=40, policy=policy, params=params,
        scorers=scorers if policy == "weighted" else None, block_tokens=32,
    )
    ref = simulate_prefix(
        requests, workers=2, params=params, policy=policy, duration_s=40, block_tokens=32,
        weights=scorers,
    )
    check_agreement(summary, done, hits, ref)
    assert ref.run.preemptions > 0 and ref.evicted > 0  # the test is about pressure


@pytest.mark.parametrize(
    "scorers", [{"running": 1.0}, {"prefix": 1.0, "queue": 1.0, "running": 2.0}],
    ids=["running", "prefix-queue-running"],
)
def test_the_running_scorer_agrees_with_the_reference(tmp_path: Path, scorers: dict) -> None:
    params = replace(WORKER, kv_cache_tokens=40_000, max_num_seqs=12)
    requests = requests_with_prefixes(
        qps=25, duration_s=30, prompt=1000, output=200, groups=20, prefix=600,
        zipf_s=1.0, prompt_cv=0.6, output_cv=1.0, seed=4,
    )
    summary, done, hits = run_engine(
        requests, tmp_path, workers=3, duration_s=30, policy="weighted", params=params,
        scorers=scorers, block_tokens=32,
    )
    ref = simulate_prefix(
        requests, workers=3, params=params, policy="weighted", duration_s=30, block_tokens=32,
        weights=scorers,
    )
    check_agreement(summary, done, hits, ref)
    # The running term moves requests: the routing differs from the default weights'.
    default = simulate_prefix(requests, workers=3, params=params, policy="weighted", duration_s=30,
                              block_tokens=32)
    assert [r.worker for r in ref.run.records] != [r.worker for r in default.run.records]


def test_it_agrees_when_clients_time_out(tmp_path: Path) -> None:
    params = replace(WORKER, kv_cache_tokens=30_000)
    requests = requests_with_prefixes(
        qps=40, duration_s=30, prompt=1500, output=400, groups=10, prefix=1000, seed=4,
    )
    summary, done, hits = run_engine(
        requests, tmp_path, workers=1, duration_s=30, policy="round_robin", params=params,
        timeout_s=8.0,
    )
    ref = simulate_prefix(requests, workers=1, params=params, duration_s=30, timeout_s=8.0)
    check_agreement(summary, done, hits, ref)
    assert ref.run.count("timed_out") > 0


def test_without_a_cache_nothing_is_saved_and_timing_is_the_plain_models(tmp_path: Path) -> None:
    requests = requests_with_prefixes(qps=20, duration_s=30, prompt=1000, output=100, groups=5, prefix=800)
    summary, done, hits = run_engine(
        requests, tmp_path, workers=2, duration_s=30, policy="round_robin", params=WORKER, cache=False,
    )
    ref = simulate_prefix(requests, workers=2, params=WORKER, duration_s=30, cache=False)
    check_agreement(summary, done, hits, ref)
    assert summary.prefill_tokens_saved == 0
    assert summary.prefix_hit_rate == 0.0


# (policy, workers, workers that serve): round_robin spreads the requests over every
# worker; least_loaded finds them all idle and takes the first; prefix_aware keeps to the
# worker that holds the prefix.
@pytest.mark.parametrize(
    ("policy", "workers", "served_by"),
    [("round_robin", 4, 4), ("round_robin", 3, 3), ("least_loaded", 3, 1), ("prefix_aware", 4, 1)],
)
def test_a_single_group_at_light_load_hits_on_all_but_each_workers_first_request(
    tmp_path: Path, policy: str, workers: int, served_by: int
) -> None:
    # One request every 2 s, each done in well under a second: every request but the
    # first each worker sees finds the whole prefix (800 tokens, 50 blocks) cached.
    requests = [PrefixRequest(2.0 * i, 1000, 20, 0, 800) for i in range(40)]
    summary, _, hits = run_engine(requests, tmp_path, workers=workers, duration_s=100, policy=policy, params=WORKER)
    n = len(requests)
    assert summary.ok == n
    assert summary.prefix_hit_rate == pytest.approx((n - served_by) / n, abs=0)
    assert summary.prefill_tokens_saved == (n - served_by) * 800
    rates = [r for r in summary.prefix_hit_rate_by_worker if r is not None]
    assert len(rates) == served_by
    # The hit requests' TTFT is one step of the 200 tokens left instead of 1,000.
    hit_ttft = WORKER.step_base_s + WORKER.prefill_token_s * 200
    assert sorted(hits.values()).count(800) == n - served_by
    assert summary.ttft_s["p50"] == pytest.approx(hit_ttft, rel=0.01)
