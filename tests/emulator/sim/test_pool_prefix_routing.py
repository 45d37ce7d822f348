"""Per-pool policies and bounds (``[pools.NAME]``) together with prefix caches and the
decider's rules on uncached tokens and on the prefill queue: the engine against the
step-by-step reference (``disagg_reference.py``), request by request."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from disagg_reference import DisaggResult
from disagg_scenarios import prefix_requests, run_both
from token_scenarios import WORKER


def _agree(engine: Any, done: dict, ref: DisaggResult) -> None:
    s = engine.summary()
    finished = [(i, r) for i, r in enumerate(ref.records) if r.done_s is not None]
    assert sorted(done) == [i for i, _ in finished]
    for i, r in finished:
        assert done[i][0] == pytest.approx(r.first_token_s, abs=1e-9), i
        assert done[i][1] == pytest.approx(r.done_s, abs=1e-9), i
    assert (s.ok, s.timed_out, s.shed) == (ref.count("ok"), ref.count("timed_out"), ref.count("shed"))
    assert s.shed_queue_full == ref.sheds
    assert s.preemptions == ref.preemptions
    pools = s.per_model["m"].pools
    assert (pools["transfers"], pools["skipped_prefill"]) == (ref.transfers, ref.skipped)
    assert (s.prefix_tokens_seen, s.prefill_tokens_saved) == (ref.seen, ref.hit)
    assert s.balanced()


def _requests(seed: int, qps: float, **kw: Any) -> list:
    args = {"prompt": 1600, "output": 120, "groups": 12, "prefix": 1200, "prompt_cv": 0.8, **kw}
    return prefix_requests(qps=qps, duration_s=30, seed=seed, **args)  # type: ignore[arg-type]


def test_a_pull_queue_in_front_of_caching_prefill_workers_counts_toward_the_deciders_bound(
    tmp_path: Path,
) -> None:
    # One held queue in front of one caching prefill worker, behind a burst: while 3
    # requests wait in it, the decider serves the rest whole on the decode pool.
    reqs = _requests(seed=6, qps=30, prompt=3000, groups=200, prefix=1000, zipf_s=0)
    engine, done, ref = run_both(reqs, tmp_path, prefill=1, decode=2, duration_s=30,
                                 policy="least_loaded", pools={"prefill": {"policy": "pull"}},
                                 cache=True, max_prefill_queue=3)
    _agree(engine, done, ref)
    pools = engine.summary().per_model["m"].pools
    assert pools["skipped_prefill_queue"] == ref.skipped > 30
    assert ref.hit > 0 and ref.count("ok") > 300


def test_a_pull_queue_in_front_of_caching_prefill_workers_agrees(tmp_path: Path) -> None:
    # Prompts that are all shared prefix, some a whole number of blocks: their prefill
    # workers move all their KV to the cache and hold none for the transfer, so they
    # are idle while their handoffs wait; a transfer ending must not make one idle twice.
    reqs = _requests(seed=6, qps=24)
    assert any(r.prefix_tokens == r.prompt_tokens and r.prompt_tokens % 16 == 0 for r in reqs)
    engine, done, ref = run_both(reqs, tmp_path, prefill=2, decode=2, duration_s=30,
                                 policy="least_loaded", pools={"prefill": {"policy": "pull"}},
                                 cache=True)
    _agree(engine, done, ref)
    assert ref.hit > 0 and ref.count("ok") > 300


def test_a_bounded_pull_queue_with_caches_and_clients_that_give_up(tmp_path: Path) -> None:
    params = replace(WORKER, kv_cache_tokens=20_000)
    reqs = _requests(seed=2, qps=16, output=300)
    engine, done, ref = run_both(reqs, tmp_path, prefill=2, decode=1, duration_s=30, params=params,
                                 policy="weighted", scorers={"running": 1.0, "prefix": 2.0},
                                 pools={"prefill": {"policy": "pull", "queue_limit": 6}},
                                 cache=True, threshold=300, timeout_s=4.0)
    _agree(engine, done, ref)
    assert ref.sheds > 0 and ref.count("timed_out") > 20


@pytest.mark.parametrize("policy", ["round_robin", "prefix_aware"])
def test_the_decode_pools_bound_holds_the_requests_the_uncached_decider_sends_there(
    tmp_path: Path, policy: str,
) -> None:
    # A bound on the decode pool only: the arrivals it refuses include long prompts the
    # decider sent there because the picked prefill worker caches them.
    reqs = _requests(seed=4, qps=30, prompt_cv=1)
    engine, done, ref = run_both(reqs, tmp_path, prefill=2, decode=1, duration_s=30,
                                 policy=policy, pools={"decode": {"queue_limit": 2}},
                                 cache=True, threshold=600, decider="uncached")
    _agree(engine, done, ref)
    pools = engine.summary().per_model["m"].pools
    assert pools["skipped_prefill_cached"] > 20 and ref.sheds > 0
    # Measured on prompt length alone the decode pool's bound would refuse fewer.
    _, _, plain = run_both(reqs, tmp_path, prefill=2, decode=1, duration_s=30, policy=policy,
                           pools={"decode": {"queue_limit": 2}}, cache=True, threshold=600)
    assert plain.sheds < ref.sheds
