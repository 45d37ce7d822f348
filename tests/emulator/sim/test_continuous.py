"""The continuous worker model against the independent step-by-step reference
(``token_reference.py``), fed identical requests through trace replay, and against
hand arithmetic."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from token_reference import RooflineParams, TokenRequest, WorkerParams, simulate
from token_scenarios import (
    WORKER,
    both,
    poisson_requests,
    reference_percentiles,
    scenario,
    write_trace,
)

from emulator import Engine

#: Percentiles agree within this where both models see the same requests (the engine's
#: summary keeps a histogram with bins 0.23 % wide).
SAME_INPUTS = 0.02
#: ... and within this across different random requests of the same workload.
ACROSS_SEEDS = 0.05


def _agree(summary_stats: dict, reference: dict[str, float], tolerance: float) -> None:
    for q in ("p50", "p95", "p99"):
        assert summary_stats[q] == pytest.approx(reference[q], rel=tolerance), q


def _check_against_reference(summary, reference, tolerance: float = SAME_INPUTS) -> None:
    assert summary.ok == reference.count("ok")
    assert summary.timed_out == reference.count("timed_out")
    assert summary.preemptions == reference.preemptions
    _agree(summary.ttft_s, reference_percentiles(reference, "ttft_s"), tolerance)
    _agree(summary.tpot_s, reference_percentiles(reference, "tpot_s"), tolerance)
    _agree(summary.latency_s, reference_percentiles(reference, "latency_s"), tolerance)


@pytest.mark.parametrize(
    ("qps", "workers"),
    [(10, 4), (45, 4)],
    ids=["light", "heavy"],
)
def test_it_agrees_with_the_reference_on_constant_sizes(tmp_path: Path, qps: int, workers: int) -> None:
    requests = poisson_requests(qps=qps, duration_s=90, prompt=1000, output=200)
    summary, reference = both(requests, tmp_path, workers=workers, duration_s=90)
    _check_against_reference(summary, reference)
    assert summary.balanced()


def test_it_agrees_with_the_reference_on_lognormal_sizes(tmp_path: Path) -> None:
    requests = poisson_requests(
        qps=30, duration_s=90, prompt=1000, output=200, prompt_cv=1.0, output_cv=1.0, seed=3
    )
    summary, reference = both(requests, tmp_path, workers=4, duration_s=90)
    _check_against_reference(summary, reference)


@pytest.mark.parametrize("policy", ["round_robin", "least_loaded", "pull"])
def test_it_agrees_with_the_reference_under_kv_pressure_for_each_policy(tmp_path: Path, policy: str) -> None:
    requests = poisson_requests(qps=30, duration_s=60, prompt=1000, output=200, output_cv=0.5, seed=5)
    tight = replace(WORKER, kv_cache_tokens=20_000)
    summary, reference = both(requests, tmp_path, workers=2, duration_s=60, policy=policy, params=tight)
    assert reference.preemptions > 50  # the test is about preemption
    _check_against_reference(summary, reference)


def test_it_agrees_with_the_reference_when_clients_time_out(tmp_path: Path) -> None:
    requests = poisson_requests(qps=30, duration_s=60, prompt=1000, output=200, seed=7)
    tight = replace(WORKER, kv_cache_tokens=20_000)
    summary, reference = both(
        requests, tmp_path, workers=2, duration_s=60, policy="pull", timeout_s=15, params=tight
    )
    assert reference.count("timed_out") > 100
    _check_against_reference(summary, reference)


def test_it_agrees_with_the_reference_with_attention_and_context_terms(tmp_path: Path) -> None:
    requests = poisson_requests(qps=20, duration_s=60, prompt=3000, output=100, prompt_cv=0.8, seed=11)
    params = replace(WORKER, max_batched_tokens=2048, prefill_attn_s=1e-9, kv_token_s=2e-8)
    summary, reference = both(requests, tmp_path, workers=3, duration_s=60, params=params)
    _check_against_reference(summary, reference)


def test_its_own_traffic_agrees_with_the_reference_across_seeds() -> None:
    # The engine draws its own Poisson arrivals; the reference gets another draw of the
    # same workload: the statistics agree, not the requests.
    summary = Engine(scenario(workers=4, duration_s=300, qps=30), seed=2).run()
    requests = poisson_requests(qps=30, duration_s=300, prompt=1000, output=200, seed=99)
    reference = simulate(requests, workers=4, params=WORKER, duration_s=300)
    _agree(summary.ttft_s, reference_percentiles(reference, "ttft_s"), ACROSS_SEEDS)
    _agree(summary.tpot_s, reference_percentiles(reference, "tpot_s"), ACROSS_SEEDS)
    _agree(summary.latency_s, reference_percentiles(reference, "latency_s"), ACROSS_SEEDS)


# -- hand arithmetic ------------------------------------------------------------------


def _alone(tmp_path: Path, prompt: int, output: int, **params: float) -> tuple[float, float, float]:
    """TTFT, TPOT and latency of one request alone on one worker."""
    trace = write_trace([TokenRequest(0.0, prompt, output)], tmp_path / "one.jsonl")
    sc = scenario(workers=1, duration_s=60, trace=trace, params=replace(WORKER, **params))
    s = Engine(sc).run()
    assert s.ok == 1
    return s.ttft_s["mean"], s.tpot_s["mean"], s.latency_s["mean"]


def test_one_request_alone_takes_one_prefill_step_then_decode_steps(tmp_path: Path) -> None:
    w = replace(WORKER, prefill_attn_s=1e-8, kv_token_s=1e-6)
    ttft, tpot, latency = _alone(tmp_path, 1000, 50, prefill_attn_s=1e-8, kv_token_s=1e-6)
    assert ttft == pytest.approx(w.step_base_s + w.prefill_token_s * 1000 + w.prefill_attn_s * 1000 * 1000)
    # Decode step j (1..49) attends over prompt + j tokens.
    steps = [w.step_base_s + w.decode_seq_s + w.kv_token_s * (1000 + j) for j in range(1, 50)]
    assert tpot == pytest.approx(sum(steps) / 49)
    assert latency == pytest.approx(ttft + sum(steps))


def test_one_request_with_no_context_term_has_tpot_base_plus_decode(tmp_path: Path) -> None:
    _, tpot, _ = _alone(tmp_path, 500, 20)
    assert tpot == pytest.approx(WORKER.step_base_s + WORKER.decode_seq_s)


def test_a_long_prompt_is_prefilled_in_chunks_of_the_step_budget(tmp_path: Path) -> None:
    budget = 2048
    prompt = 5000
    ttft, _, _ = _alone(tmp_path, prompt, 10, max_batched_tokens=budget, max_num_seqs=64)
    chunks = math.ceil(prompt / budget)
    assert chunks == 3
    assert ttft == pytest.approx(chunks * WORKER.step_base_s + WORKER.prefill_token_s * prompt)


def test_littles_law_holds_for_running_sequences() -> None:
    engine = Engine(scenario(workers=4, duration_s=200, qps=20, output=100))
    running: list[float] = []
    for frame in _frames(engine):
        if frame.t_s > 20:  # past the warm-up
            running.append(frame.m["running"][0] + frame.m["waiting"][0])
    summary = engine.summary()
    # Requests in the system = throughput x time in the system (nothing waits for long
    # at this load, so latency is the time running).
    assert np.mean(running) == pytest.approx(summary.served_qps * summary.latency_s["mean"], rel=0.05)


def _frames(engine: Engine) -> list:
    frames = []
    while not engine.done:
        frames += engine.advance_to(engine.now_s + 10)
    return frames


# -- the roofline step model ------------------------------------------------------------

#: A 70B-like model on 4 GPUs of an H100's figures, given as numbers so the reference
#: can be built from the same physical figures without the engine's catalog.
GPU = {"memory_gb": 80, "hbm_tb_s": 3.35, "bf16_tflops": 989.4}
SHAPE = {"params_b": 68.98, "layers": 80, "kv_heads": 8, "head_dim": 128}


def _roofline(units: int, mbu: float, mfu: float) -> RooflineParams:
    return RooflineParams(
        weight_bytes=68.98e9 * 2,
        kv_bytes_per_token=2 * 80 * 8 * 128 * 2,
        active_params=68.98e9,
        units=units,
        bytes_per_s=3.35e12,
        flops=989.4e12,
        mbu=mbu,
        mfu=mfu,
    )


def _roofline_both(tmp_path: Path, requests: list[TokenRequest], params: WorkerParams,
                   policy: str = "round_robin"):
    return both(requests, tmp_path, workers=2, duration_s=60, policy=policy, params=params,
                units=4, arch=SHAPE, hardware=GPU)


@pytest.mark.parametrize("policy", ["round_robin", "pull"])
def test_it_agrees_with_the_reference_under_the_roofline_across_the_switch(
    tmp_path: Path, policy: str
) -> None:
    # A low mfu makes big decode batches compute-bound while their contexts are short
    # and memory-bound as they grow, so stretches meet the switch between the two.
    params = replace(WORKER, roofline=_roofline(4, mbu=0.8, mfu=0.3))
    requests = poisson_requests(qps=20, duration_s=60, prompt=500, output=500, output_cv=0.5, seed=14)
    summary, reference = _roofline_both(tmp_path, requests, params, policy)
    log = simulate(requests, workers=2, params=params, policy=policy, duration_s=60, record_steps=True)
    decode_bounds = {s.bound for s in log.step_log if s.prefill_tokens == 0}
    assert decode_bounds == {"memory", "compute"}  # the test is about the switch
    _check_against_reference(summary, reference)


def test_it_agrees_with_the_reference_under_the_roofline_with_kv_pressure(tmp_path: Path) -> None:
    params = replace(WORKER, kv_cache_tokens=30_000, roofline=_roofline(4, mbu=1.0, mfu=1.0))
    requests = poisson_requests(qps=25, duration_s=60, prompt=1000, output=200, output_cv=0.5, seed=17)
    summary, reference = _roofline_both(tmp_path, requests, params)
    assert reference.preemptions > 20
    _check_against_reference(summary, reference)


#: The same GPUs with their link given (450 GB/s each way, 61.25 us a collective) and the
#: model's hidden size: the steps pay tensor parallelism's all-reduces.
LINKED_GPU = {**GPU, "link_gb_s": 450, "collective_us": 61.25}
LINKED_SHAPE = {**SHAPE, "hidden_size": 8192}


def _linked(mbu: float, mfu: float, overhead_s: float = 0.0) -> RooflineParams:
    return replace(_roofline(4, mbu, mfu), step_overhead_s=overhead_s, layers=80, hidden=8192,
                   link_bytes_per_s=450e9, collective_s=61.25e-6)


@pytest.mark.parametrize("policy", ["round_robin", "pull"])
def test_it_agrees_with_the_reference_when_steps_pay_communication(tmp_path: Path, policy: str) -> None:
    # A low mfu again puts the switch between compute- and memory-bound decode steps
    # inside the run; the collectives add to both sides of it.
    params = replace(WORKER, kv_cache_tokens=100_000, roofline=_linked(mbu=0.8, mfu=0.3))
    requests = poisson_requests(qps=15, duration_s=60, prompt=500, output=400, output_cv=0.5, seed=23)
    summary, reference = both(requests, tmp_path, workers=2, duration_s=60, policy=policy, params=params,
                              units=4, arch=LINKED_SHAPE, hardware=LINKED_GPU)
    assert reference.preemptions > 100  # and under KV pressure
    _check_against_reference(summary, reference)


def test_one_request_alone_pays_the_collectives_of_every_step(tmp_path: Path) -> None:
    trace = write_trace([TokenRequest(0.0, 2000, 20)], tmp_path / "one.jsonl")
    sc = scenario(workers=1, duration_s=60, trace=trace,
                  params=replace(WORKER, roofline=_linked(mbu=1.0, mfu=1.0, overhead_s=0.0015)),
                  units=4, arch=LINKED_SHAPE, hardware=LINKED_GPU)
    s = Engine(sc).run()
    # 160 all-reduces a step: 9.8 ms of latency, and per token 1.5 x 8,192 x 2 bytes each
    # over 450 GB/s; and 1.5 ms to launch each step.
    fixed, per_token = 0.0015 + 160 * 61.25e-6, 160 * 1.5 * 8192 * 2 / 450e9
    prefill = 2 * 68.98e9 * 2000 / (4 * 989.4e12) + fixed + 2000 * per_token
    assert s.ttft_s["mean"] == pytest.approx(prefill)
    decode = [(68.98e9 * 2 + 327_680 * (2000 + j)) / (4 * 3.35e12) + fixed + per_token for j in range(1, 20)]
    assert s.tpot_s["mean"] == pytest.approx(sum(decode) / 19)


def test_one_request_alone_under_the_roofline_takes_the_physical_floor(tmp_path: Path) -> None:
    trace = write_trace([TokenRequest(0.0, 2000, 20)], tmp_path / "one.jsonl")
    roof = _roofline(4, mbu=1.0, mfu=1.0)
    sc = scenario(workers=1, duration_s=60, trace=trace, params=replace(WORKER, roofline=roof),
                  units=4, arch=SHAPE, hardware=GPU)
    s = Engine(sc).run()
    # The prefill of 2,000 tokens is compute-bound; each decode step of one sequence
    # reads the weights and its context: memory-bound.
    prefill = 2 * 68.98e9 * 2000 / (4 * 989.4e12)
    assert s.ttft_s["mean"] == pytest.approx(prefill)
    decode = [(68.98e9 * 2 + 327_680 * (2000 + j)) / (4 * 3.35e12) for j in range(1, 20)]
    assert s.tpot_s["mean"] == pytest.approx(sum(decode) / 19)


def _per_request(tmp_path: Path, requests: list[TokenRequest], params: WorkerParams,
                 workers: int) -> None:
    """Each request's first token and completion agree with the reference's (percentiles
    can hide offsetting errors; the engine's router records each completion as made)."""
    trace = write_trace(requests, tmp_path / "requests.jsonl")
    engine = Engine(scenario(workers=workers, duration_s=60, trace=trace, params=params, units=4,
                             arch=SHAPE, hardware=GPU))
    router = engine.disp[0]
    done: dict[int, tuple[float, float]] = {}
    record = router.complete_request

    def spy(rec: tuple) -> None:
        done[rec[0]] = (rec[1], rec[2])
        record(rec)

    router.complete_request = spy
    engine.run()
    reference = simulate(requests, workers=workers, params=params, duration_s=60, record_steps=True)
    decode_bounds = {s.bound for s in reference.step_log if s.prefill_tokens == 0}
    assert decode_bounds == {"memory", "compute"}  # the test is about the switch
    finished = [(i, r) for i, r in enumerate(reference.records) if r.outcome == "ok"]
    assert len(finished) >= len(requests) // 2
    for i, r in finished:
        assert done[i][0] == pytest.approx(r.first_token_s, abs=1e-6)
        assert done[i][1] == pytest.approx(r.done_s, abs=1e-6)


def test_it_times_every_request_as_the_reference_does_under_poisson_arrivals(tmp_path: Path) -> None:
    params = replace(WORKER, roofline=_roofline(4, mbu=0.8, mfu=0.3))
    requests = poisson_requests(qps=20, duration_s=60, prompt=500, output=500, output_cv=0.5, seed=13)
    _per_request(tmp_path, requests, params, workers=2)


def test_it_crosses_the_switch_inside_one_decode_stretch(tmp_path: Path) -> None:
    # 100 requests within 10 ms and nothing after: a stretch of 2,000 decode steps whose
    # contexts grow from 10,100 to 210,000 tokens, compute-bound (100 x 48 us = 12.9 ms)
    # until the KV read passes it (10.3 ms of weights + 0.25 to 5.1 ms of KV).
    params = replace(WORKER, roofline=_roofline(4, mbu=1.0, mfu=0.27))
    requests = [TokenRequest(i * 1e-4, 100, 2000) for i in range(100)]
    _per_request(tmp_path, requests, params, workers=1)
