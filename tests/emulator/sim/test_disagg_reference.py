"""The step-by-step reference of disaggregated serving agrees with hand arithmetic, and
the engine with both on the same hand-checked cases."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from disagg_reference import simulate_disagg
from disagg_scenarios import KV_BYTES, run_both
from token_reference import TokenRequest
from token_scenarios import WORKER

S_PER_TOKEN = KV_BYTES / 50e9  # 6.55 us a token at 50 GB/s
BASE, PER_TOKEN, PER_SEQ = WORKER.step_base_s, WORKER.prefill_token_s, WORKER.decode_seq_s


def test_a_lone_request_prefills_moves_then_recomputes_one_position_and_decodes() -> None:
    res = simulate_disagg([TokenRequest(0.0, 1000, 10)], prefill_workers=1, decode_workers=1,
                          params=WORKER, transfer_s_per_token=S_PER_TOKEN, duration_s=10)
    r = res.records[0]
    prefill = BASE + PER_TOKEN * 1000
    first = prefill + 1000 * S_PER_TOKEN + BASE + PER_TOKEN * 1
    assert r.prefill_token_s == pytest.approx(prefill, rel=1e-12)
    assert r.first_token_s == pytest.approx(first, rel=1e-12)
    assert r.done_s == pytest.approx(first + 9 * (BASE + PER_SEQ), rel=1e-12)
    assert (r.prefill_worker, r.decode_worker, res.transfers) == (0, 0, 1)


def _chain() -> list[float]:
    """Two requests of 1,000 + 10 tokens at t = 0 on workers of 1,500 KV tokens: the
    prefill worker holds the first one's KV until it has moved, so the second waits to
    be admitted; the decode worker cannot hold both, so the second's transfer waits
    for the first to finish. The expected (first token, done) of each, by hand."""
    prefill, move = BASE + PER_TOKEN * 1000, 1000 * S_PER_TOKEN
    one_position, decode = BASE + PER_TOKEN, BASE + PER_SEQ
    first_token = prefill + move + one_position
    first_done = first_token + 9 * decode
    second_token = first_done + move + one_position
    return [first_token, first_done, second_token, second_token + 9 * decode]


def test_a_full_decode_worker_makes_the_prefill_worker_hold_the_kv() -> None:
    params = replace(WORKER, kv_cache_tokens=1500)
    reqs = [TokenRequest(0.0, 1000, 10), TokenRequest(0.0, 1000, 10)]
    res = simulate_disagg(reqs, prefill_workers=1, decode_workers=1, params=params,
                          transfer_s_per_token=S_PER_TOKEN, duration_s=10)
    a, b = res.records
    prefill, move = BASE + PER_TOKEN * 1000, 1000 * S_PER_TOKEN
    # The second is admitted when the first's KV has left the prefill worker.
    assert b.prefill_token_s == pytest.approx(prefill + move + prefill, rel=1e-12)
    got = [a.first_token_s, a.done_s, b.first_token_s, b.done_s]
    assert got == pytest.approx(_chain(), rel=1e-12)


def test_the_engine_follows_the_same_chain(tmp_path: Path) -> None:
    params = replace(WORKER, kv_cache_tokens=1500)
    reqs = [TokenRequest(0.0, 1000, 10), TokenRequest(0.0, 1000, 10)]
    engine, done, _ = run_both(reqs, tmp_path, prefill=1, decode=1, duration_s=10, params=params)
    got = [done[0][0], done[0][1], done[1][0], done[1][1]]
    assert got == pytest.approx(_chain(), rel=1e-12)


def test_transfers_to_one_decode_worker_take_its_link_in_turn() -> None:
    # Two prompts prefilled in one step move one after the other: the second lands a
    # transfer later than the first.
    slow = 1e-4  # 0.1 s a thousand tokens
    reqs = [TokenRequest(0.0, 1000, 1), TokenRequest(0.0, 1000, 1)]
    res = simulate_disagg(reqs, prefill_workers=1, decode_workers=1, params=WORKER,
                          transfer_s_per_token=slow, duration_s=10)
    a, b = res.records
    prefill = BASE + PER_TOKEN * 2000
    assert a.prefill_token_s == b.prefill_token_s == pytest.approx(prefill)
    assert a.first_token_s == pytest.approx(prefill + 0.1 + BASE + PER_TOKEN, rel=1e-12)
    assert b.first_token_s == pytest.approx(prefill + 0.2 + BASE + PER_TOKEN, rel=1e-12)


def test_the_decider_serves_short_prompts_on_the_decode_pool_alone() -> None:
    reqs = [TokenRequest(0.0, 100, 5), TokenRequest(1.0, 1000, 5)]
    res = simulate_disagg(reqs, prefill_workers=1, decode_workers=1, params=WORKER,
                          transfer_s_per_token=S_PER_TOKEN, threshold_tokens=100, duration_s=10)
    short, long = res.records
    assert short.prefill_worker is None and short.prefill_token_s is None
    assert short.ttft_s == pytest.approx(BASE + PER_TOKEN * 100, rel=1e-12)
    assert long.prefill_worker == 0 and res.transfers == 1
