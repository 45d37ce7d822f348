"""A split model's pools each route by their own policy and admit by their own bound
(``[pools.NAME]``), the engine request by request as the step-by-step reference
(``disagg_reference.py``) says: the same completions at the same instants, the same
sheds, preemptions and transfers."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from disagg_scenarios import run_both
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from token_scenarios import WORKER, poisson_requests


def _agree(engine: Any, done: dict, reference: Any) -> None:
    finished = [i for i, r in enumerate(reference.records) if r.outcome == "ok"]
    assert sorted(done) == finished
    for i in finished:
        r = reference.records[i]
        assert done[i][0] == pytest.approx(r.first_token_s, abs=1e-9), i
        assert done[i][1] == pytest.approx(r.done_s, abs=1e-9), i
    s = engine.summary()
    assert s.shed_queue_full == reference.sheds
    assert s.shed == reference.count("shed")
    assert s.preemptions == reference.preemptions
    assert s.per_model["m"].pools["transfers"] == reference.transfers
    assert s.balanced()


CASES = {
    # A pull queue in front of the prefill pool, least_loaded handoffs.
    "pull-prefill": dict(policy="least_loaded", pools={"prefill": {"policy": "pull"}}),
    # Each pool its own pushing policy.
    "rr-prefill-ll-decode": dict(policy="least_loaded", pools={"prefill": {"policy": "round_robin"}}),
    # A bounded pull queue.
    "pull-bounded": dict(policy="least_loaded", pools={"prefill": {"policy": "pull", "queue_limit": 3}}),
    # A bound on the prefill pool's workers' waiting only.
    "push-bounded-prefill": dict(policy="round_robin", pools={"prefill": {"queue_limit": 2}}),
    # A bound on both pools, the decider sending short prompts to the decode pool.
    "bounded-both-with-decider": dict(policy="least_loaded", queue_limit=2, threshold=600),
}


@pytest.mark.parametrize("case", CASES)
def test_each_pools_policy_and_bound_as_the_reference(tmp_path: Path, case: str) -> None:
    # Two prefill workers of small KV behind one decode worker: queues build in both pools.
    params = replace(WORKER, kv_cache_tokens=12_000, max_num_seqs=8)
    requests = poisson_requests(qps=20, duration_s=30, prompt=1500, output=60, prompt_cv=0.8,
                                output_cv=0.8, seed=3)
    engine, done, reference = run_both(requests, tmp_path, prefill=2, decode=1, duration_s=30,
                                       params=params, **CASES[case])
    _agree(engine, done, reference)
    assert reference.count("ok") > 100


def test_the_bounds_and_the_policies_change_the_outcome(tmp_path: Path) -> None:
    params = replace(WORKER, kv_cache_tokens=12_000, max_num_seqs=8)
    requests = poisson_requests(qps=20, duration_s=30, prompt=1500, output=60, prompt_cv=0.8,
                                output_cv=0.8, seed=3)
    runs = {
        case: run_both(requests, tmp_path, prefill=2, decode=1, duration_s=30,
                       params=params, **CASES[case])[0].summary()
        for case in CASES
    }
    free = run_both(requests, tmp_path, prefill=2, decode=1, duration_s=30,
                    params=params, policy="least_loaded")[0].summary()
    assert free.shed_queue_full == 0
    for case in ("pull-bounded", "push-bounded-prefill", "bounded-both-with-decider"):
        assert runs[case].shed_queue_full > 0, case
    # A pull queue lets no prefill worker sit on a queue while another is idle.
    assert runs["pull-prefill"].ttft_s["p99"] < free.ttft_s["p99"] * 0.9
    assert runs["rr-prefill-ll-decode"].ttft_s != free.ttft_s


@st.composite
def _fleets(draw: Any) -> dict[str, Any]:
    """A small split fleet: pool sizes, each pool's policy and bound, the decider, the
    KV and running-slot sizes, and a Poisson stream of lognormal requests."""
    prefill_policy = draw(st.sampled_from(["round_robin", "least_loaded", "pull"]))
    decode_policy = draw(st.sampled_from(["round_robin", "least_loaded"]))
    threshold = draw(st.sampled_from([0, 0, 800]))
    pools: dict[str, dict[str, Any]] = {
        "prefill": {"policy": prefill_policy, "queue_limit": draw(st.sampled_from([0, 1, 3]))},
        "decode": {"policy": decode_policy},
    }
    if threshold:
        pools["decode"]["queue_limit"] = draw(st.sampled_from([0, 2]))
    return {
        "prefill": draw(st.integers(1, 3)),
        "decode": draw(st.integers(1, 2)),
        "threshold": threshold,
        "pools": pools,
        "params": replace(
            WORKER, kv_cache_tokens=draw(st.sampled_from([6_000, 12_000, 40_000])),
            max_num_seqs=draw(st.sampled_from([2, 8, 64])),
        ),
        "requests": poisson_requests(
            qps=draw(st.sampled_from([5.0, 15.0, 30.0])), duration_s=15, prompt=1200, output=40,
            prompt_cv=0.8, output_cv=0.8, seed=draw(st.integers(0, 10_000)),
        ),
    }


# Forty examples in the suite; a long run draws more:
#   POOL_ROUTING_EXAMPLES=2000 python -m pytest tests/emulator/sim/test_pool_routing.py -k drawn
@settings(max_examples=int(os.environ.get("POOL_ROUTING_EXAMPLES", "40")), deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(_fleets())
def test_drawn_split_fleets_agree_with_the_reference(tmp_path: Path, fleet: dict[str, Any]) -> None:
    engine, done, reference = run_both(
        fleet["requests"], tmp_path, prefill=fleet["prefill"], decode=fleet["decode"],
        duration_s=15, params=fleet["params"], threshold=fleet["threshold"], pools=fleet["pools"],
        policy="round_robin",
    )
    _agree(engine, done, reference)
