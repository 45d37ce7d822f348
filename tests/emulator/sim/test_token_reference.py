"""The step-by-step reference model agrees with hand arithmetic and with Little's law."""

from __future__ import annotations

import math

import numpy as np
import pytest
from token_reference import ReferenceResult, TokenRequest, WorkerParams, simulate

# Step times that are exact binary fractions, so same-instant rules can be tested
# with exact equality instead of a tolerance.
FLAT = WorkerParams(step_base_s=0.5, prefill_token_s=0.0, decode_seq_s=0.0)


def _one(
    prompt: int, output: int, params: WorkerParams, timeout_s: float | None = None
) -> ReferenceResult:
    return simulate(
        [TokenRequest(0.0, prompt, output)], workers=1, params=params, duration_s=1e6,
        timeout_s=timeout_s, record_steps=True,
    )


def test_it_times_a_lone_request_as_one_prefill_step_then_one_decode_step_per_token() -> None:
    p = WorkerParams(
        step_base_s=0.005, prefill_token_s=2e-5, prefill_attn_s=1e-8, decode_seq_s=1e-4,
        kv_token_s=1e-7,
    )
    prompt, output = 100, 6
    res = _one(prompt, output, p)
    rec = res.records[0]
    ttft = 0.005 + 2e-5 * prompt + 1e-8 * prompt * prompt
    # Decode step k (k = 1..output-1) sees a context of prompt + k tokens.
    decodes = [0.005 + 1e-4 + 1e-7 * (prompt + k) for k in range(1, output)]
    assert rec.outcome == "ok"
    assert rec.ttft_s == pytest.approx(ttft, rel=1e-12)
    assert rec.latency_s == pytest.approx(ttft + sum(decodes), rel=1e-12)
    assert rec.tpot_s == pytest.approx(sum(decodes) / (output - 1), rel=1e-12)
    assert res.steps == output
    assert res.busy_s[0] == pytest.approx(rec.latency_s, rel=1e-12)


def test_it_gives_a_single_token_request_no_tpot() -> None:
    rec = _one(50, 1, WorkerParams()).records[0]
    assert rec.outcome == "ok"
    assert rec.tpot_s is None
    assert rec.done_s == rec.first_token_s == pytest.approx(0.005 + 2e-5 * 50)


def test_it_prefills_a_prompt_longer_than_the_budget_in_chunks() -> None:
    p = WorkerParams(max_batched_tokens=8192, kv_cache_tokens=30000, prefill_attn_s=1e-10)
    prompt = 20000
    res = _one(prompt, 2, p)
    chunks = [s.prefill_tokens for s in res.step_log]
    assert chunks == [8192, 8192, 3616, 0]
    assert res.steps == math.ceil(prompt / 8192) + 1
    # Attention of a chunk grows with everything prefilled before it.
    ttft = sum(
        0.005 + 2e-5 * c + 1e-10 * c * (before + c)
        for c, before in ((8192, 0), (8192, 8192), (3616, 16384))
    )
    assert res.records[0].ttft_s == pytest.approx(ttft, rel=1e-12)


def test_it_preempts_the_newest_request_under_kv_pressure_and_recomputes_it() -> None:
    # 800 KV tokens after prefill, 200 spare: after 100 decode steps of two requests the
    # cache is full; the newer one is preempted holding 500 tokens with 101 generated.
    p = WorkerParams(kv_cache_tokens=1000)
    reqs = [TokenRequest(0.0, 400, 300), TokenRequest(0.0, 400, 300)]
    res = simulate(reqs, workers=1, params=p, duration_s=100, record_steps=True)
    first, second = res.records
    assert res.preemptions == 1
    assert (first.preemptions, second.preemptions) == (0, 1)
    prefills = [(i, s.prefill_tokens) for i, s in enumerate(res.step_log, 1) if s.prefill_tokens]
    # The recompute covers the prompt and the 101 tokens already generated, and waits
    # for the first request to finish (step 300) because 501 tokens never fit beside it.
    assert prefills == [(1, 800), (301, 400 + 101)]
    assert res.steps == 1 + 299 + 1 + 198
    assert first.outcome == second.outcome == "ok"
    assert second.first_token_s == first.first_token_s  # kept across the recompute
    assert second.admitted_s == 0.0  # the first admission, not the readmission
    assert second.done_s is not None and first.done_s is not None
    assert second.done_s > first.done_s


@pytest.mark.parametrize("policy", ["round_robin", "pull"])
def test_it_puts_a_preempted_request_first_and_lets_it_block_those_behind(policy: str) -> None:
    # As above, with a small third request held back by max_num_seqs=2: in the worker's
    # queue (round_robin) or the dispatcher's (pull). It would fit beside the survivor,
    # but the recompute at the head does not, so it waits until the survivor finishes.
    p = WorkerParams(kv_cache_tokens=1000, max_num_seqs=2)
    reqs = [TokenRequest(0.0, 400, 300), TokenRequest(0.0, 400, 300), TokenRequest(0.01, 100, 5)]
    res = simulate(reqs, workers=1, params=p, policy=policy, duration_s=100)
    survivor, _, small = res.records
    assert res.preemptions == 1
    assert small.admitted_s == survivor.done_s


def test_it_takes_the_decoding_tokens_out_of_the_prefill_budget() -> None:
    p = WorkerParams(max_batched_tokens=100)
    reqs = [TokenRequest(0.0, 10, 50), TokenRequest(0.1, 200, 2)]
    res = simulate(reqs, workers=1, params=p, duration_s=100, record_steps=True)
    chunks = [s.prefill_tokens for s in res.step_log if s.running == 2 and s.prefill_tokens]
    assert chunks == [99, 99, 2]


def test_it_holds_littles_law_for_running_sequences_over_busy_time() -> None:
    rng = np.random.default_rng(7)
    n = 600
    arrivals = np.cumsum(rng.exponential(1 / 40.0, n))
    reqs = [
        TokenRequest(float(a), int(rng.integers(50, 2000)), int(rng.integers(1, 200)))
        for a in arrivals
    ]
    res = simulate(reqs, workers=2, params=WorkerParams(), duration_s=float(arrivals[-1]) + 120,
                   record_steps=True)
    assert res.count("ok") == n and res.preemptions == 0
    busy = sum(s.end_s - s.start_s for s in res.step_log)
    assert busy == pytest.approx(sum(res.busy_s), rel=1e-9)
    mean_running = sum(s.running * (s.end_s - s.start_s) for s in res.step_log) / busy
    throughput = n / busy
    residence = np.mean([(r.done_s or 0.0) - (r.admitted_s or 0.0) for r in res.records])
    assert mean_running > 2.0  # enough batching for the check to mean something
    assert mean_running == pytest.approx(throughput * residence, rel=0.02)


def test_it_sheds_a_request_larger_than_the_kv_cache_and_serves_one_that_just_fits() -> None:
    p = WorkerParams(kv_cache_tokens=1000)
    reqs = [TokenRequest(0.0, 900, 101), TokenRequest(0.0, 900, 100)]
    res = simulate(reqs, workers=1, params=p, duration_s=100)
    shed, fits = res.records
    assert (shed.outcome, shed.worker, shed.first_token_s) == ("shed", None, None)
    assert fits.outcome == "ok"


def test_it_routes_round_robin_cyclically() -> None:
    reqs = [TokenRequest(0.1 * i, 10, 2) for i in range(7)]
    res = simulate(reqs, workers=3, params=WorkerParams(), duration_s=10)
    assert [r.worker for r in res.records] == [0, 1, 2, 0, 1, 2, 0]


def test_it_routes_least_loaded_to_the_emptiest_worker_and_the_lowest_index_on_ties() -> None:
    reqs = [
        TokenRequest(0.0, 10, 1000),  # w0, ties at 0
        TokenRequest(0.0, 10, 2),  # w1, done long before 0.5
        TokenRequest(0.0, 10, 1000),  # w2
        TokenRequest(0.5, 10, 1000),  # w1: the only empty worker
        TokenRequest(0.6, 10, 1000),  # all hold one: lowest index
    ]
    res = simulate(reqs, workers=3, params=WorkerParams(), policy="least_loaded", duration_s=30)
    assert [r.worker for r in res.records] == [0, 1, 2, 1, 0]


def test_it_counts_load_after_the_steps_ending_at_the_arrival_instant() -> None:
    reqs = [
        TokenRequest(0.0, 10, 4),  # w0 until 2.0
        TokenRequest(0.0, 10, 1),  # w1, done at 0.5
        TokenRequest(0.5, 10, 1),  # w1 is already empty at 0.5
    ]
    res = simulate(reqs, workers=2, params=FLAT, policy="least_loaded", duration_s=10)
    assert [r.worker for r in res.records] == [0, 1, 1]


def test_it_pulls_into_the_lowest_index_idle_worker_and_queues_when_none_is_idle() -> None:
    reqs = [
        TokenRequest(0.0, 10, 3),  # w0
        TokenRequest(0.0, 10, 3),  # w1: w0 was handed work at this instant
        TokenRequest(0.001, 10, 3),  # w2
        TokenRequest(0.002, 10, 3),  # queued; w0 and w1 start steps together, w0 first
        TokenRequest(5.0, 10, 1000),  # all idle again: w0, not the next in a rotation
        TokenRequest(5.001, 10, 3),  # w1
    ]
    res = simulate(reqs, workers=3, params=WorkerParams(), policy="pull", duration_s=60)
    assert [r.worker for r in res.records] == [0, 1, 2, 0, 0, 1]
    queued = res.records[3]
    assert queued.admitted_s is not None and queued.admitted_s > 0.002
    assert queued.admitted_s == res.records[0].first_token_s  # at w0's next step start


def test_it_ends_steps_before_arrivals_and_arrivals_before_starts_at_the_same_instant() -> None:
    reqs = [TokenRequest(0.0, 10, 2), TokenRequest(0.5, 10, 2)]
    res = simulate(reqs, workers=1, params=FLAT, duration_s=10, record_steps=True)
    first, second = res.records
    assert second.admitted_s == 0.5  # joins the step that starts as the first one ends
    assert second.first_token_s == 1.0
    assert first.done_s == 1.0
    assert res.step_log[1].running == 2


def test_it_applies_a_step_ending_exactly_at_the_horizon_but_not_one_ending_after() -> None:
    reqs = [TokenRequest(0.0, 10, 2)]
    on_time = simulate(reqs, workers=1, params=FLAT, duration_s=1.0)
    cut = simulate(reqs, workers=1, params=FLAT, duration_s=0.99)
    assert on_time.records[0].outcome == "ok"
    assert (on_time.steps, on_time.busy_s) == (2, (1.0,))
    assert cut.records[0].outcome == "in_system"
    assert cut.records[0].first_token_s == 0.5
    assert (cut.steps, cut.busy_s) == (1, (0.99,))


def test_it_does_not_offer_requests_arriving_after_the_horizon() -> None:
    reqs = [TokenRequest(0.0, 10, 2), TokenRequest(2.0, 10, 2), TokenRequest(3.0, 10, 2)]
    res = simulate(reqs, workers=1, params=FLAT, duration_s=2.0)
    assert [r.outcome for r in res.records] == ["ok", "in_system"]


def test_it_times_out_a_request_that_cannot_finish_and_frees_its_kv_for_the_next() -> None:
    # The first request holds 900 of 1100 KV tokens, so the second cannot be admitted
    # beside it; it gets in only once the first is dropped at its 0.5 s deadline.
    p = WorkerParams(kv_cache_tokens=1100)
    reqs = [TokenRequest(0.0, 900, 200), TokenRequest(0.1, 300, 5)]
    timed = simulate(reqs, workers=1, params=p, timeout_s=0.5, duration_s=10)
    blocked, behind = timed.records
    assert blocked.outcome == "timed_out"
    assert blocked.done_s is None and blocked.first_token_s is not None
    assert behind.outcome == "ok"
    assert behind.admitted_s is not None
    assert 0.5 <= behind.admitted_s < 0.5 + 0.006  # the first step start after the deadline
    patient = simulate(reqs, workers=1, params=p, duration_s=10).records
    assert patient[1].admitted_s == patient[0].done_s  # without a timeout it waits it out


def test_it_times_out_a_request_that_completes_after_its_deadline() -> None:
    # One step of 0.005 + 100 * 2e-5 = 0.007 s straddles a 0.006 s deadline.
    res = _one(100, 1, WorkerParams(), timeout_s=0.006)
    rec = res.records[0]
    assert rec.outcome == "timed_out"
    assert rec.done_s == pytest.approx(0.007)
    on_the_dot = simulate([TokenRequest(0.0, 10, 2)], workers=1, params=FLAT, timeout_s=1.0,
                          duration_s=10).records[0]
    assert (on_the_dot.outcome, on_the_dot.done_s) == ("ok", 1.0)


def test_it_times_out_requests_in_the_pull_queue_and_unfinished_ones_at_the_horizon() -> None:
    # A prefill step of 8 s holds the only worker far past both early deadlines.
    reqs = [
        TokenRequest(0.0, 8000, 2),  # w0
        TokenRequest(0.1, 10, 5),  # max_num_seqs=1: waits in the dispatcher queue
        TokenRequest(9.5, 10, 1000),  # deadline 10.5 > horizon 10: still in the system
    ]
    p = WorkerParams(max_num_seqs=1, prefill_token_s=1e-3)
    res = simulate(reqs, workers=1, params=p, policy="pull", timeout_s=1.0, duration_s=10)
    first, queued, late = res.records
    assert first.outcome == "timed_out"
    assert (queued.outcome, queued.worker, queued.admitted_s) == ("timed_out", None, None)
    assert late.outcome == "in_system"


def test_it_refuses_unsorted_requests_and_unknown_policies() -> None:
    with pytest.raises(ValueError, match="sorted"):
        simulate([TokenRequest(1.0, 1, 1), TokenRequest(0.0, 1, 1)], workers=1,
                 params=WorkerParams(), duration_s=5)
    with pytest.raises(ValueError, match="policy"):
        simulate([], workers=1, params=WorkerParams(), policy="random", duration_s=5)
