"""Disaggregated prefill and decode against the independent step-by-step reference
(``disagg_reference.py``), request by request, and against hand arithmetic."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from disagg_scenarios import KV_BYTES, pd_data, run_both
from token_reference import RooflineParams, TokenRequest
from token_scenarios import WORKER, poisson_requests, write_trace

from emulator import Engine
from emulator.scenario import Scenario


def _agree_per_request(done: dict, reference, least: int) -> None:
    finished = [(i, r) for i, r in enumerate(reference.records) if r.outcome == "ok"]
    assert len(finished) >= least
    assert sorted(done) == [i for i, _ in finished]
    for i, r in finished:
        assert done[i][0] == pytest.approx(r.first_token_s, abs=1e-9), i
        assert done[i][1] == pytest.approx(r.done_s, abs=1e-9), i


@pytest.mark.parametrize("policy", ["round_robin", "least_loaded"])
def test_it_times_every_request_as_the_reference_does(tmp_path: Path, policy: str) -> None:
    requests = poisson_requests(qps=20, duration_s=60, prompt=1500, output=150, prompt_cv=1.0,
                                output_cv=1.0, seed=5)
    engine, done, reference = run_both(requests, tmp_path, prefill=2, decode=2, duration_s=60,
                                       policy=policy)
    _agree_per_request(done, reference, least=len(requests) * 9 // 10)
    s = engine.summary()
    assert s.per_model["m"].pools["transfers"] == reference.transfers
    assert s.balanced()


def test_it_agrees_with_the_reference_when_the_decode_pool_is_too_small(tmp_path: Path) -> None:
    # One decode worker with room for about 14 requests behind two prefill workers: the
    # handoffs queue for KV room and the prefill workers hold their KV meanwhile.
    params = replace(WORKER, kv_cache_tokens=30_000)
    requests = poisson_requests(qps=12, duration_s=40, prompt=1500, output=400, seed=8)
    engine, done, reference = run_both(requests, tmp_path, prefill=2, decode=1, duration_s=40,
                                       params=params, policy="least_loaded")
    _agree_per_request(done, reference, least=50)
    assert reference.preemptions == engine.summary().preemptions
    assert reference.count("in_system") > 50  # the backlog the test is about


def test_it_agrees_with_the_reference_with_a_decider_and_a_slow_link(tmp_path: Path) -> None:
    # Half the prompts are at most 400 tokens and skip the prefill pool; a 2 GB/s link
    # makes each transfer of 1,000 tokens last 164 ms, so they queue on the link.
    requests = poisson_requests(qps=15, duration_s=40, prompt=500, output=100, prompt_cv=1.0,
                                seed=11)
    engine, done, reference = run_both(requests, tmp_path, prefill=1, decode=2, duration_s=40,
                                       gb_s=2.0, threshold=400)
    _agree_per_request(done, reference, least=len(requests) * 8 // 10)
    skipped = sum(1 for r in reference.records if r.prefill_worker is None and r.outcome != "shed")
    assert engine.summary().per_model["m"].pools["skipped_prefill"] == skipped > 100


def _alone(tmp_path: Path, gb_s: float, prompt: int = 2000, output: int = 20) -> dict:
    """One request on an empty fleet: the summary's figures."""
    trace = write_trace([TokenRequest(0.0, prompt, output)], tmp_path / f"one-{gb_s}.jsonl")
    data = pd_data(prefill=1, decode=1, duration_s=10, trace=trace, gb_s=gb_s)
    return Engine(Scenario.from_dict(data, max_requests=None)).run().per_model["m"].to_dict()


def test_at_light_load_the_transfer_adds_exactly_its_time_to_ttft(tmp_path: Path) -> None:
    prompt = 2000
    slow, fast = _alone(tmp_path, 5.0, prompt), _alone(tmp_path, 500.0, prompt)
    transfer = prompt * KV_BYTES / 5e9 - prompt * KV_BYTES / 500e9
    assert slow["ttft_s"]["mean"] - fast["ttft_s"]["mean"] == pytest.approx(transfer, rel=1e-9)
    # ... and nothing to the time per output token, nor to the prefill pool's TTFT.
    assert slow["tpot_s"]["mean"] == pytest.approx(fast["tpot_s"]["mean"], rel=1e-12)
    pools = slow["pools"]
    assert pools["prefill_ttft_s"]["mean"] == pytest.approx(fast["pools"]["prefill_ttft_s"]["mean"])
    # By hand: the prefill step, the transfer, then one step of one prompt position.
    w = WORKER
    prefill = w.step_base_s + w.prefill_token_s * prompt
    first = w.step_base_s + w.prefill_token_s * 1
    assert pools["prefill_ttft_s"]["mean"] == pytest.approx(prefill, rel=1e-9)
    assert pools["transfer_s"]["mean"] == pytest.approx(prompt * KV_BYTES / 5e9, rel=1e-9)
    assert slow["ttft_s"]["mean"] == pytest.approx(prefill + prompt * KV_BYTES / 5e9 + first, rel=1e-9)
    assert pools["decode_ttft_s"]["mean"] == pytest.approx(prompt * KV_BYTES / 5e9 + first, rel=1e-9)
    assert slow["tpot_s"]["mean"] == pytest.approx(w.step_base_s + w.decode_seq_s, rel=1e-9)


def test_it_agrees_with_the_reference_when_running_slots_bind(tmp_path: Path) -> None:
    # Eight running sequences a worker: decode slots, not KV, hold the handoffs back.
    params = replace(WORKER, max_num_seqs=8)
    requests = poisson_requests(qps=10, duration_s=40, prompt=800, output=300, seed=21)
    engine, done, reference = run_both(requests, tmp_path, prefill=1, decode=2, duration_s=40,
                                       params=params)
    _agree_per_request(done, reference, least=100)
    assert reference.count("in_system") > 30


def test_it_agrees_with_the_reference_under_the_roofline_with_the_kv_size_of_the_arch(
    tmp_path: Path,
) -> None:
    # A 70B model on 4 GPUs of an H100's figures: the steps follow the roofline and the
    # KV bytes per token (327,680) come from the arch block, not kv_bytes_per_token.
    roof = RooflineParams(weight_bytes=68.98e9 * 2, kv_bytes_per_token=KV_BYTES,
                          active_params=68.98e9, units=4, bytes_per_s=3.35e12, flops=989.4e12,
                          mbu=0.8, mfu=0.4)
    params = replace(WORKER, roofline=roof)
    # About 0.17 s of compute a 2,000-token prefill: 4 QPS keeps the prefill worker busy
    # most of the time without a growing queue.
    requests = poisson_requests(qps=4, duration_s=60, prompt=2000, output=200, prompt_cv=1.0,
                                seed=17)
    engine, done, reference = run_both(
        requests, tmp_path, prefill=1, decode=2, duration_s=60, params=params, units=4,
        arch={"params_b": 68.98, "layers": 80, "kv_heads": 8, "head_dim": 128},
        hardware={"memory_gb": 80, "hbm_tb_s": 3.35, "bf16_tflops": 989.4},
    )
    assert engine.scenario.models["m"].disaggregated.kv_bytes_per_token is None
    _agree_per_request(done, reference, least=len(requests) * 9 // 10)
