"""KV in blocks with a watermark, the prefill-first scheduler and the times between
tokens: the engine against the step-by-step reference (``token_reference.py``) on
identical requests, under KV pressure with vLLM's 16-token blocks and 1 % watermark."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from token_reference import ReferenceResult, TokenRequest, simulate
from token_scenarios import WORKER, poisson_requests, reference_percentiles, scenario, write_trace

from emulator import Engine, Summary
from emulator.scenario import ScenarioError
from emulator.sim.workers.entities import Worker

#: The engine's summary keeps histograms with bins 0.23 % wide.
SAME_INPUTS = 0.02

#: vLLM's block manager: blocks of 16 tokens, 1 % of them left free at admission.
VLLM = replace(WORKER, kv_cache_tokens=20_000, kv_block_tokens=16, kv_watermark=0.01)


def _run(requests: list[TokenRequest], tmp_path: Path, params, *, workers: int, duration_s: float,
         policy: str = "round_robin", timeout_s: float | None = None,
         slo: dict | None = None) -> tuple[Summary, Engine, ReferenceResult]:
    trace = write_trace(requests, tmp_path / "requests.jsonl")
    extra = {"slo": slo} if slo else {}
    sc = scenario(workers=workers, duration_s=duration_s, trace=trace, policy=policy,
                  timeout_s=timeout_s, params=params, **extra)
    engine = Engine(sc)
    summary = engine.run()
    reference = simulate(requests, workers=workers, params=params, policy=policy,
                         timeout_s=timeout_s, duration_s=duration_s)
    return summary, engine, reference


def _agree(summary: Summary, engine: Engine, reference: ReferenceResult) -> None:
    assert summary.ok == reference.count("ok")
    assert summary.timed_out == reference.count("timed_out")
    assert summary.in_system_end == reference.count("in_system")
    assert summary.preemptions == reference.preemptions
    for name in ("ttft_s", "tpot_s", "latency_s"):
        ours = getattr(summary, name)
        theirs = reference_percentiles(reference, name)
        for q in ("p50", "p95", "p99"):
            assert ours[q] == pytest.approx(theirs[q], rel=SAME_INPUTS), (name, q)
        values = [getattr(r, name) for r in reference.records if r.outcome == "ok" and getattr(r, name) is not None]
        assert ours["p90"] == pytest.approx(float(np.percentile(values, 90)), rel=SAME_INPUTS), name
    # Every time between tokens, counted and spread as the reference has them.
    gaps = np.array(reference.gaps)
    booked = engine.disp[0].tbt.run_histogram(engine.workers.open_gaps(0))  # type: ignore[union-attr, attr-defined]
    assert booked.count == gaps.size
    for q in (50, 90, 99):
        assert summary.tbt_s[f"p{q}"] == pytest.approx(float(np.percentile(gaps, q)), rel=SAME_INPUTS), q
    assert summary.tbt_s["mean"] == pytest.approx(float(gaps.mean()), rel=1e-9)
    assert summary.tbt_s["max"] == pytest.approx(float(gaps.max()), rel=1e-9)


@pytest.mark.parametrize("scheduler", ["mixed", "prefill_first"])
def test_blocks_and_watermark_under_kv_pressure_agree_with_the_reference(tmp_path: Path, scheduler: str) -> None:
    requests = poisson_requests(qps=30, duration_s=40, prompt=1000, output=200, output_cv=0.5, seed=5)
    params = replace(VLLM, scheduler=scheduler)
    summary, engine, reference = _run(requests, tmp_path, params, workers=2, duration_s=40)
    assert reference.preemptions > 20  # the test is about preemption
    _agree(summary, engine, reference)


@pytest.mark.parametrize("scheduler", ["mixed", "prefill_first"])
def test_blocks_with_timeouts_and_pull_agree_with_the_reference(tmp_path: Path, scheduler: str) -> None:
    requests = poisson_requests(qps=32, duration_s=40, prompt=1000, output=250, prompt_cv=0.6, seed=7)
    params = replace(VLLM, scheduler=scheduler, kv_token_s=2e-8, prefill_attn_s=1e-9)
    summary, engine, reference = _run(requests, tmp_path, params, workers=2, duration_s=40,
                                      policy="pull", timeout_s=12)
    assert reference.count("timed_out") > 20
    _agree(summary, engine, reference)


def test_prefill_first_without_kv_pressure_agrees_and_pauses_the_decoders(tmp_path: Path) -> None:
    requests = poisson_requests(qps=20, duration_s=40, prompt=2000, output=100, prompt_cv=0.5, seed=3)
    params = replace(WORKER, max_batched_tokens=2048, kv_token_s=2e-8, scheduler="prefill_first")
    summary, engine, reference = _run(requests, tmp_path, params, workers=2, duration_s=40)
    assert reference.preemptions == 0
    _agree(summary, engine, reference)
    mixed, _, _ = _run(requests, tmp_path, replace(params, scheduler="mixed"), workers=2, duration_s=40)
    # Paused decoders: longer gaps between tokens, a shorter wait for the first.
    assert summary.tbt_s["p99"] > 1.5 * mixed.tbt_s["p99"]
    assert summary.tpot_s["p50"] > mixed.tpot_s["p50"]
    assert summary.ttft_s["p50"] < mixed.ttft_s["p50"]


def test_blocks_preempt_more_than_tokens_and_the_watermark_blocks_admission(tmp_path: Path) -> None:
    # Rounding every request up to whole blocks holds more KV for the same requests.
    requests = poisson_requests(qps=30, duration_s=40, prompt=1000, output=200, output_cv=0.5, seed=5)
    by_token, _, ref_token = _run(requests, tmp_path, replace(VLLM, kv_block_tokens=1, kv_watermark=0.0),
                                  workers=2, duration_s=40)
    blocks, _, ref_blocks = _run(requests, tmp_path, replace(VLLM, kv_block_tokens=64, kv_watermark=0.0),
                                 workers=2, duration_s=40)
    assert by_token.preemptions == ref_token.preemptions
    assert blocks.preemptions == ref_blocks.preemptions
    assert ref_blocks.preemptions != ref_token.preemptions


def test_slo_on_the_time_between_tokens_counts_requests_whose_every_gap_met_it(tmp_path: Path) -> None:
    requests = poisson_requests(qps=20, duration_s=30, prompt=2000, output=100, prompt_cv=0.5, seed=3)
    params = replace(WORKER, max_batched_tokens=2048, kv_token_s=2e-8, scheduler="prefill_first")
    ref = simulate(requests, workers=2, params=params, duration_s=30)
    longest = sorted(r.longest_gap_s for r in ref.records if r.outcome == "ok")
    limit = longest[len(longest) // 2]  # about half the requests meet it
    summary, _, reference = _run(requests, tmp_path, params, workers=2, duration_s=30,
                                 slo={"tbt_s": limit})
    met = sum(1 for r in reference.records if r.outcome == "ok" and r.longest_gap_s <= limit * (1 - 1e-9))
    near = sum(1 for r in reference.records if r.outcome == "ok" and abs(r.longest_gap_s - limit) <= limit * 1e-9)
    assert met <= summary.slo_met <= met + near
    assert 0.3 < summary.slo_goodput < 0.7


def test_scenario_errors_name_the_block_and_watermark_keys() -> None:
    with pytest.raises(ScenarioError, match=r"worker\.kv_watermark"):
        scenario(workers=1, duration_s=10, qps=1, params=replace(WORKER, kv_watermark=1.0))
    with pytest.raises(ScenarioError, match=r"worker\.kv_block_tokens"):
        scenario(workers=1, duration_s=10, qps=1, params=replace(WORKER, kv_block_tokens=0))
    with pytest.raises(ScenarioError, match=r"worker\.scheduler"):
        scenario(workers=1, duration_s=10, qps=1, params=replace(WORKER, scheduler="v0"))
    # A watermark that leaves too little room for one request.
    with pytest.raises(ScenarioError, match=r"worker\.kv_watermark.*lower kv_watermark"):
        scenario(workers=1, duration_s=10, qps=1, prompt=1000, output=200,
                 params=replace(WORKER, kv_cache_tokens=1300, kv_watermark=0.2))
    with pytest.raises(ScenarioError, match=r"worker\.block_tokens.*multiple of kv_block_tokens"):
        scenario(workers=1, duration_s=10, qps=1,
                 params=replace(WORKER, kv_block_tokens=32), worker={"prefix_cache": True, "block_tokens": 16})
    with pytest.raises(ScenarioError, match=r"slo\.tbt_s"):
        scenario(workers=1, duration_s=10, qps=1, slo={"tbt_s": -1})


def test_the_defaults_are_vllms_blocks_and_watermark() -> None:
    sc = scenario(workers=1, duration_s=10, qps=1)
    spec = sc.worker_for("m")
    assert (spec.kv_block_tokens, spec.kv_watermark, spec.scheduler) == (1, 0.0, "mixed")  # pinned here
    from emulator.scenario import WorkerSpec

    w = WorkerSpec()
    assert (w.kv_block_tokens, w.kv_watermark, w.scheduler) == (16, 0.01, "mixed")
    w = replace(w, kv_cache_tokens=524_288)
    assert (w.kv_blocks, w.kv_watermark_blocks, w.kv_request_limit) == (32_768, 327, (32_768 - 327) * 16)


def test_the_decoders_blocks_follow_each_decoder_rounded_up() -> None:
    rng = random.Random(4)
    for _ in range(300):
        b = rng.choice([2, 3, 16, 32])
        es = [rng.randint(-50, 400) for _ in range(rng.randint(1, 12))]
        wk = Worker(0, 0, None, None)  # type: ignore[arg-type]
        wk.blk, wk.dcnt, wk.n_dec = b, [0] * b, len(es)
        for e in es:
            q, p = divmod(e, b)
            wk.dq += q
            wk.dcnt[p] += 1
        t0 = max(1 - e for e in es)  # every decoder holds a token or more
        for t in range(t0, t0 + 3 * b):
            assert wk.dec_blocks(t) == sum(-(-(e + t) // b) for e in es)
        avail = wk.dec_blocks(t0) + rng.randint(0, 5 * len(es))
        last = wk.dec_last_clock(avail)
        assert wk.dec_blocks(last) <= avail < wk.dec_blocks(last + 1)


@pytest.mark.parametrize("case", range(8))
def test_random_small_fleets_agree_with_the_reference_exactly(tmp_path: Path, case: int) -> None:
    rng = random.Random(100 + case)
    params = replace(
        WORKER,
        kv_cache_tokens=rng.choice([5_000, 8_000]),
        kv_block_tokens=rng.choice([1, 2, 16, 64]),
        kv_watermark=rng.choice([0.0, 0.01, 0.05]),
        scheduler=rng.choice(["mixed", "prefill_first"]),
        max_batched_tokens=rng.choice([1024, 4096]),
        max_num_seqs=rng.choice([16, 64]),
        kv_token_s=rng.choice([0.0, 3e-8]),
    )
    requests = poisson_requests(qps=rng.choice([20, 30]), duration_s=20, prompt=600, output=200,
                                prompt_cv=0.7, output_cv=0.7, seed=case)
    requests = [r for r in requests if r.prompt_tokens + r.output_tokens < 4_000]
    policy = rng.choice(["round_robin", "least_loaded", "pull"])
    timeout = rng.choice([None, 6.0])
    summary, engine, reference = _run(requests, tmp_path, params, workers=2, duration_s=20,
                                      policy=policy, timeout_s=timeout)
    assert (summary.ok, summary.timed_out, summary.shed, summary.in_system_end, summary.preemptions) == (
        reference.count("ok"), reference.count("timed_out"), reference.count("shed"),
        reference.count("in_system"), reference.preemptions), params
    booked = engine.disp[0].tbt.run_histogram(engine.workers.open_gaps(0))  # type: ignore[union-attr, attr-defined]
    assert booked.count == len(reference.gaps)
    if reference.gaps:
        assert booked.total_s == pytest.approx(sum(reference.gaps), rel=1e-9)
