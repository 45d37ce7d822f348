"""Admission control under every policy and in every pool: ``dispatcher.queue_limit``
bounds the requests waiting in the pool an arrival would go to; those refused are
``shed`` and counted by their reason (``shed_queue_full``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from token_reference import TokenRequest
from token_scenarios import WORKER, scenario, write_trace

from emulator import Engine
from emulator.scenario.presets import load_preset


def _burst(tmp_path: Path, policy: str, limit: int, workers: int = 1):
    """Ten requests within 10 us on one-sequence workers: all but the first at each
    worker wait."""
    requests = [TokenRequest(i * 1e-6, 100, 10) for i in range(10)]
    trace = write_trace(requests, tmp_path / "burst.jsonl")
    sc = scenario(
        workers=workers, duration_s=60.0, trace=trace, policy=policy,
        params=replace(WORKER, max_num_seqs=1), dispatcher={"queue_limit": limit},
    )
    return Engine(sc).run()


@pytest.mark.parametrize("policy", ["round_robin", "least_loaded", "pull"])
def test_it_sheds_the_arrivals_beyond_the_pools_waiting_bound(tmp_path: Path, policy: str) -> None:
    # One worker serves one request at a time: the first runs, two wait, seven are shed.
    s = _burst(tmp_path, policy, limit=2)
    assert (s.ok, s.shed, s.shed_queue_full) == (3, 7, 7)
    assert s.balanced()
    unbounded = _burst(tmp_path, policy, limit=0)
    assert (unbounded.ok, unbounded.shed, unbounded.shed_queue_full) == (10, 0, 0)


def test_a_pushing_policy_bounds_the_waiting_of_the_whole_pool(tmp_path: Path) -> None:
    # Two workers: two run, and the bound of three counts the waiting at both.
    s = _burst(tmp_path, "round_robin", limit=3, workers=2)
    assert (s.ok, s.shed_queue_full) == (5, 5)


@pytest.mark.parametrize("policy", ["round_robin", "least_loaded"])
def test_queue_limit_changes_the_outcome_of_a_pushing_fleet(policy: str) -> None:
    base = load_preset("prefix-heavy-chat").with_overrides([f'dispatcher.policy="{policy}"'])
    free = Engine(base).run()
    bounded = Engine(base.with_overrides(["dispatcher.queue_limit=50"])).run()
    assert free.shed_queue_full == 0
    assert bounded.shed_queue_full > 500
    assert bounded.shed == bounded.shed_queue_full + bounded.shed_oversized
    assert bounded.balanced()
    # Fewer wait, so those admitted wait less.
    assert bounded.latency_s["p50"] < free.latency_s["p50"] * 0.7
    assert bounded.to_dict()["shed_queue_full"] == bounded.shed_queue_full


def test_queue_limit_bounds_each_pool_of_a_split_model() -> None:
    base = load_preset("disagg-decode-undersized")
    free = Engine(base).run()
    engine = Engine(base.with_overrides(["dispatcher.queue_limit=20"]))
    bounded = engine.run()
    assert free.shed_queue_full == 0
    assert bounded.shed_queue_full > 100
    assert bounded.balanced()
    assert bounded.ttft_s["p99"] < free.ttft_s["p99"]
    # Each pool's own waiting is what is bounded (the decider picks the pool).
    routing = engine.disp[0].policy
    model = engine.worker_models["continuous"]
    for pool in (routing.prefill.dispatcher.workers, routing.decode.dispatcher.workers):
        assert model.waiting_in(pool) <= 20


def test_shed_requests_are_counted_by_reason_in_the_summary_and_the_frames() -> None:
    # An overloaded static fleet whose dispatcher holds batches (pull) with a waiting
    # bound, behind a gateway's rate limit: both refuse.
    sc = load_preset("doc-as-written").with_overrides([
        "faults=[]", "duration_s=60", "traffic.qps=1600", 'dispatcher.policy="pull"',
        "dispatcher.queue_limit=100", "gateway.rate_limit_qps=30",
    ])
    engine = Engine(sc)
    frames = []
    while not engine.done:
        frames += engine.advance_to(engine.now_s + 20)
    s = engine.summary()
    reasons = s.to_dict()["shed_reasons"]
    assert reasons["queue_full"] > 0 and reasons["rate_limit"] > 0
    assert sum(reasons.values()) == s.shed
    for name, model in s.to_dict()["per_model"].items():
        assert sum(model["shed_reasons"].values()) == model["shed"], name
    totals = {
        k: sum(sum(f.m[k]) for f in frames)
        for k in ("shed", "shed_queue_full", "shed_oversized", "shed_rate_limit")
    }
    assert totals["shed_queue_full"] == reasons["queue_full"]
    assert totals["shed_rate_limit"] == reasons["rate_limit"]
    assert totals["shed"] == totals["shed_queue_full"] + totals["shed_oversized"] + totals["shed_rate_limit"]
    again = type(s).from_dict(s.to_dict())
    assert again.to_dict()["shed_reasons"] == reasons
