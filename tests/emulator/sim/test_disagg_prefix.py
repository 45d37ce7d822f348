"""Prefix caching in split fleets and the decider on uncached tokens and on the prefill
queue: the engine against the step-by-step reference (``disagg_reference.py``), request
by request, on the same requests replayed from a trace."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from disagg_reference import DisaggResult, simulate_disagg
from disagg_scenarios import KV_BYTES, prefix_requests, run_both
from prefix_reference import PrefixRequest
from token_scenarios import WORKER

from emulator import Engine

S_PER_TOKEN = KV_BYTES / 50e9
BASE, PER_TOKEN = WORKER.step_base_s, WORKER.prefill_token_s


def _agree(engine: Engine, done: dict, ref: DisaggResult, reqs: list[PrefixRequest], least: int) -> None:
    """Completions, their times, preemptions, transfers, prefix hits, decider counts,
    and the percentiles of latency and TTFT, all as the reference has them."""
    s = engine.summary()
    # (A request that completes after its client gave up is timed out, but completed.)
    finished = [(i, r) for i, r in enumerate(ref.records) if r.done_s is not None]
    assert ref.count("ok") >= least
    assert s.ok == ref.count("ok") and s.timed_out == ref.count("timed_out")
    assert sorted(done) == [i for i, _ in finished]
    for i, r in finished:
        assert done[i][0] == pytest.approx(r.first_token_s, abs=1e-9), i
        assert done[i][1] == pytest.approx(r.done_s, abs=1e-9), i
    assert s.preemptions == ref.preemptions
    pools = s.per_model["m"].pools
    assert pools["transfers"] == ref.transfers
    assert pools["skipped_prefill"] == ref.skipped
    assert (s.prefix_tokens_seen, s.prefill_tokens_saved) == (ref.seen, ref.hit)
    for field, at in (("ttft_s", 0), ("latency_s", 1)):
        theirs = np.array([getattr(r, field) for _, r in finished])
        ours = np.array([done[i][at] - reqs[i].arrival_s for i, _ in finished])
        for q in (50, 95, 99):
            assert np.percentile(ours, q) == pytest.approx(np.percentile(theirs, q), abs=1e-9)


def _requests(seed: int = 3, qps: float = 12.0, duration_s: float = 40.0, **kw: float) -> list[PrefixRequest]:
    args = {"prompt": 1600, "output": 120, "groups": 12, "prefix": 1200, "prompt_cv": 0, **kw}
    return prefix_requests(qps=qps, duration_s=duration_s, seed=seed, **args)  # type: ignore[arg-type]


def test_a_repeated_prefix_is_not_prefilled_again_on_the_prefill_worker() -> None:
    # Two requests of one group, far apart, on one prefill worker: the second finds the
    # first's 1,200-token prefix (75 blocks of 16) cached and prefills 400 tokens.
    reqs = [PrefixRequest(0.0, 1600, 5, 0, 1200), PrefixRequest(5.0, 1600, 5, 0, 1200)]
    res = simulate_disagg(reqs, prefill_workers=1, decode_workers=1, params=WORKER,
                          transfer_s_per_token=S_PER_TOKEN, duration_s=20, cache=True)
    a, b = res.records
    assert a.prefill_token_s == pytest.approx(BASE + PER_TOKEN * 1600, rel=1e-12)
    assert b.prefill_token_s - 5.0 == pytest.approx(BASE + PER_TOKEN * 400, rel=1e-12)
    assert (res.seen, res.hit) == (2400, 1200)
    # The whole prompt's KV still moves: the transfer is the prompt's, cached or not.
    move = 1600 * S_PER_TOKEN
    assert b.first_token_s - b.prefill_token_s == pytest.approx(move + BASE + PER_TOKEN, rel=1e-9)


def test_the_uncached_decider_serves_a_cached_prompt_on_the_decode_pool() -> None:
    # The second request's uncached tokens on the prefill worker (400) are at most the
    # threshold (500): it skips the prefill pool; its prompt alone (1,600) would not.
    reqs = [PrefixRequest(0.0, 1600, 5, 0, 1200), PrefixRequest(5.0, 1600, 5, 0, 1200)]
    kw = {"prefill_workers": 1, "decode_workers": 1, "params": WORKER, "transfer_s_per_token": S_PER_TOKEN,
          "duration_s": 20, "cache": True, "threshold_tokens": 500}
    by_prompt = simulate_disagg(reqs, **kw)  # type: ignore[arg-type]
    by_uncached = simulate_disagg(reqs, decider="uncached", **kw)  # type: ignore[arg-type]
    assert [r.prefill_worker for r in by_prompt.records] == [0, 0]
    assert [r.prefill_worker for r in by_uncached.records] == [0, None]
    assert by_uncached.skipped == 1 and by_uncached.transfers == 1
    # The decode worker has not seen the group: it prefills the whole prompt itself.
    second = by_uncached.records[1]
    assert second.ttft_s == pytest.approx(BASE + PER_TOKEN * 1600, rel=1e-12)


@pytest.mark.parametrize("policy", ["round_robin", "least_loaded", "prefix_aware", "weighted"])
def test_split_pools_with_prefix_caches_agree_request_by_request(tmp_path: Path, policy: str) -> None:
    reqs = _requests()
    engine, done, ref = run_both(reqs, tmp_path, prefill=2, decode=2, duration_s=40,
                                 policy=policy, cache=True)
    _agree(engine, done, ref, reqs, least=len(reqs) * 9 // 10)
    assert ref.hit > ref.seen // 3  # the caches are what the test is about


def test_prefix_aware_picking_saves_more_than_round_robin_in_the_prefill_pool(tmp_path: Path) -> None:
    reqs = _requests(groups=40, zipf_s=0)  # type: ignore[arg-type]
    params = replace(WORKER, kv_cache_tokens=40_000)  # room for about 30 prefixes a worker
    saved = {}
    for policy in ("round_robin", "prefix_aware"):
        res = simulate_disagg(reqs, prefill_workers=3, decode_workers=2, params=params,
                              transfer_s_per_token=S_PER_TOKEN, duration_s=40, cache=True, policy=policy)
        saved[policy] = res.hit / res.seen
    assert saved["prefix_aware"] > saved["round_robin"] + 0.1


def test_evictions_and_preemptions_in_both_pools_agree(tmp_path: Path) -> None:
    # Small caches: prefixes are evicted on the prefill workers, and the decode workers
    # (which also serve short prompts whole, caching their prefixes) preempt.
    params = replace(WORKER, kv_cache_tokens=24_000)
    reqs = _requests(seed=9, qps=14, groups=30, prompt=1400, output=300, prompt_cv=1, prefix=1000)  # type: ignore[arg-type]
    engine, done, ref = run_both(reqs, tmp_path, prefill=2, decode=2, duration_s=40, params=params,
                                 policy="prefix_aware", cache=True, threshold=900)
    _agree(engine, done, ref, reqs, least=100)
    assert ref.preemptions > 0 and ref.skipped > 50


@pytest.mark.parametrize("policy", ["round_robin", "prefix_aware"])
def test_the_uncached_decider_agrees(tmp_path: Path, policy: str) -> None:
    reqs = _requests(seed=4, qps=14, prompt_cv=1)  # type: ignore[arg-type]
    engine, done, ref = run_both(reqs, tmp_path, prefill=2, decode=2, duration_s=40, policy=policy,
                                 cache=True, threshold=600, decider="uncached")
    _agree(engine, done, ref, reqs, least=len(reqs) * 8 // 10)
    direct = sum(1 for r in reqs if r.prompt_tokens <= 600)
    cached = engine.summary().per_model["m"].pools["skipped_prefill_cached"]
    assert ref.skipped == direct + cached and cached > 20


def test_the_prefill_queue_bound_agrees(tmp_path: Path) -> None:
    # One prefill worker behind a burst: while 3 requests wait for it, the rest are
    # served whole on the decode pool.
    reqs = _requests(seed=6, qps=30, duration_s=20, prompt=3000, groups=200, prefix=1000, zipf_s=0)  # type: ignore[arg-type]
    engine, done, ref = run_both(reqs, tmp_path, prefill=1, decode=2, duration_s=20,
                                 policy="least_loaded", cache=True, max_prefill_queue=3)
    _agree(engine, done, ref, reqs, least=len(reqs) * 8 // 10)
    queue = engine.summary().per_model["m"].pools["skipped_prefill_queue"]
    assert queue == ref.skipped > 50


@pytest.mark.parametrize(("policy", "decider"), [("least_loaded", "prompt"), ("prefix_aware", "uncached")])
def test_clients_that_give_up_leave_both_pools_as_the_reference_says(
    tmp_path: Path, policy: str, decider: str
) -> None:
    # An undersized decode pool: handoffs wait for room while their prefill workers hold
    # the KV (until those workers, full, sleep with requests waiting), and clients give
    # up after 4 s, in either pool and at every stage: dozens after their prefill, before
    # their first token.
    params = replace(WORKER, kv_cache_tokens=20_000)
    reqs = _requests(seed=2, qps=14, prompt=1500, output=400, groups=20, prefix=900, prompt_cv=1)  # type: ignore[arg-type]
    engine, done, ref = run_both(reqs, tmp_path, prefill=2, decode=1, duration_s=40, params=params,
                                 policy=policy, cache=True, threshold=300, decider=decider, timeout_s=4.0)
    _agree(engine, done, ref, reqs, least=50)
    s = engine.summary()
    assert s.timed_out == ref.count("timed_out") > 50
    stranded = [r for r in ref.records if r.outcome == "timed_out" and r.prefill_token_s is not None
                and r.first_token_s is None]
    assert len(stranded) > 20
    assert s.per_model["m"].pools["transfers"] == ref.transfers
