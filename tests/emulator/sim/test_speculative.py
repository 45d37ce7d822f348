"""Speculative decoding in the continuous worker model (``worker.speculative``): the
engine against the step-by-step reference (``token_reference.py`` with
``SpeculativeParams``) request by request, on drawn fleets and request streams too,
and against hand arithmetic."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from token_reference import RooflineParams, SpeculativeParams, TokenRequest, WorkerParams, simulate
from token_scenarios import WORKER, completion_times, poisson_requests, scenario, write_trace

from emulator import Engine
from emulator.sim.requests import OK

#: An EAGLE-like draft: 3 tokens a step, 0.7 accepted each, 0.4 ms a pass plus 10 us
#: a sequence.
EAGLE = SpeculativeParams(draft_tokens=3, acceptance_rate=0.7, draft_step_s=4e-4, draft_seq_s=1e-5,
                          method="eagle")
LINEAR = replace(WORKER, max_batched_tokens=8192, kv_token_s=3e-7, speculative=EAGLE)

GPU = {"memory_gb": 80, "hbm_tb_s": 3.35, "bf16_tflops": 989.4}
SHAPE = {"params_b": 68.98, "layers": 80, "kv_heads": 8, "head_dim": 128}


def _roofline(mbu: float, mfu: float) -> RooflineParams:
    return RooflineParams(
        weight_bytes=68.98e9 * 2, kv_bytes_per_token=2 * 80 * 8 * 128 * 2, active_params=68.98e9,
        units=4, bytes_per_s=3.35e12, flops=989.4e12, mbu=mbu, mfu=mfu,
    )


def _engine_times(tmp_path: Path, requests: list[TokenRequest], params: WorkerParams, *,
                  workers: int, duration_s: float, policy: str = "round_robin",
                  timeout_s: float | None = None, **keys: Any) -> dict[int, tuple[float, float]]:
    """Each request the engine completed in time: its first-token and completion times."""
    trace = write_trace(requests, tmp_path / "requests.jsonl")
    engine = Engine(scenario(workers=workers, duration_s=duration_s, trace=trace, params=params,
                             policy=policy, timeout_s=timeout_s, **keys))
    router = engine.disp[0]
    done = completion_times(engine)
    outcome = router.store.outcome
    return {i: times for i, times in done.items() if int(outcome[i - router.store.base]) == OK}


def _agree(tmp_path: Path, requests: list[TokenRequest], params: WorkerParams, *, workers: int,
           duration_s: float, policy: str = "round_robin", timeout_s: float | None = None,
           least: int = 1, **keys: Any) -> None:
    """Every request the reference completes, the engine completes at the same first
    token and end (and nothing else)."""
    done = _engine_times(tmp_path, requests, params, workers=workers, duration_s=duration_s,
                         policy=policy, timeout_s=timeout_s, **keys)
    reference = simulate(requests, workers=workers, params=params, policy=policy,
                         timeout_s=timeout_s, duration_s=duration_s)
    finished = {i: r for i, r in enumerate(reference.records) if r.outcome == "ok"}
    assert len(finished) >= least
    assert set(done) == set(finished)
    for i, r in finished.items():
        assert done[i][0] == pytest.approx(r.first_token_s, abs=1e-9), i
        assert done[i][1] == pytest.approx(r.done_s, abs=1e-9), i


@pytest.mark.parametrize(("qps", "workers"), [(10, 2), (40, 2)], ids=["light", "heavy"])
def test_it_times_every_request_as_the_reference_under_the_linear_model(
    tmp_path: Path, qps: int, workers: int
) -> None:
    requests = poisson_requests(qps=qps, duration_s=40, prompt=800, output=200, prompt_cv=1.0,
                                output_cv=1.0, seed=5)
    _agree(tmp_path, requests, LINEAR, workers=workers, duration_s=40, least=len(requests) // 2)


def test_it_times_every_request_as_the_reference_under_kv_pressure(tmp_path: Path) -> None:
    params = replace(LINEAR, kv_cache_tokens=12_000)
    requests = poisson_requests(qps=20, duration_s=30, prompt=1000, output=400, output_cv=1.0, seed=8)
    _agree(tmp_path, requests, params, workers=2, duration_s=30, policy="pull", least=20)
    assert simulate(requests, workers=2, params=params, policy="pull", duration_s=30).preemptions


@pytest.mark.parametrize("policy", ["round_robin", "least_loaded"])
def test_it_times_every_request_as_the_reference_under_the_roofline_across_the_switch(
    tmp_path: Path, policy: str
) -> None:
    # A low mfu, and 4 tokens verified a sequence, make big decode batches compute-bound
    # while their contexts are short.
    params = replace(WORKER, roofline=_roofline(0.8, 0.3), speculative=EAGLE, max_batched_tokens=8192)
    requests = poisson_requests(qps=20, duration_s=40, prompt=500, output=500, output_cv=0.5, seed=14)
    log = simulate(requests, workers=2, params=params, policy=policy, duration_s=40, record_steps=True)
    assert {s.bound for s in log.step_log if s.prefill_tokens == 0} == {"memory", "compute"}
    _agree(tmp_path, requests, params, workers=2, duration_s=40, policy=policy, least=200,
           units=4, arch=SHAPE, hardware=GPU)


def _alone(tmp_path: Path, params: WorkerParams, prompt: int, output: int) -> tuple[float, float]:
    """TTFT and TPOT of one request alone on one worker."""
    trace = write_trace([TokenRequest(0.0, prompt, output)], tmp_path / "one.jsonl")
    s = Engine(scenario(workers=1, duration_s=60, trace=trace, params=params)).run()
    assert s.ok == 1
    return s.ttft_s["mean"], s.tpot_s["mean"]


def test_one_request_alone_decodes_at_verification_plus_draft_over_tau(tmp_path: Path) -> None:
    sp = SpeculativeParams(draft_tokens=4, acceptance_rate=0.5, draft_step_s=1e-3, draft_seq_s=2e-4)
    params = replace(WORKER, speculative=sp)
    ttft, tpot = _alone(tmp_path, params, 1000, 101)
    # The prefill step runs no draft: 5 ms + 1000 x 20 us.
    assert ttft == pytest.approx(0.025, rel=1e-12)
    # tau = 1 + 1/2 + 1/4 + 1/8 + 1/16 = 1.9375; a verification step is 5 ms + 0.1 ms +
    # 4 x 20 us, the draft 4 x (1 ms + 0.2 ms): (5.18 + 4.8) / 1.9375 ms a token.
    assert tpot == pytest.approx(9.98e-3 / 1.9375, rel=1e-12)


def test_with_nothing_accepted_and_a_free_draft_it_decodes_as_plain_steps_plus_verification(
    tmp_path: Path,
) -> None:
    # alpha = 0: tau = 1, and each step pays only the k drafted tokens' verification.
    sp = SpeculativeParams(draft_tokens=3, acceptance_rate=0.0)
    plain_ttft, plain_tpot = _alone(tmp_path, WORKER, 700, 40)
    ttft, tpot = _alone(tmp_path, replace(WORKER, speculative=sp), 700, 40)
    assert ttft == plain_ttft
    assert tpot == pytest.approx(plain_tpot + 3 * WORKER.prefill_token_s, rel=1e-12)


def test_speculation_cuts_tpot_at_light_load_by_tau_less_its_costs(tmp_path: Path) -> None:
    requests = poisson_requests(qps=2, duration_s=30, prompt=500, output=300, seed=3)
    trace = write_trace(requests, tmp_path / "r.jsonl")
    plain = Engine(scenario(workers=1, duration_s=30, trace=trace, params=WORKER)).run()
    fast = Engine(scenario(workers=1, duration_s=30, trace=trace, params=replace(WORKER, speculative=EAGLE))).run()
    assert fast.ok >= plain.ok
    assert fast.tpot_s["p50"] < plain.tpot_s["p50"] / 1.5


PROFILE = settings(max_examples=60, derandomize=True, deadline=None, database=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def cases(draw: st.DrawFn) -> tuple[WorkerParams, list[TokenRequest], int, str, float | None, float]:
    k = draw(st.integers(1, 5))
    sp = SpeculativeParams(
        draft_tokens=k,
        acceptance_rate=draw(st.sampled_from([0.0, 0.3, 0.61, 0.85])),
        draft_step_s=draw(st.sampled_from([0.0, 4e-4])),
        draft_seq_s=draw(st.sampled_from([0.0, 3e-5])),
    )
    seqs = draw(st.integers(1, 8))
    params = WorkerParams(
        max_num_seqs=seqs,
        max_batched_tokens=draw(st.integers(seqs * (k + 1), 1024)),
        kv_cache_tokens=draw(st.integers(200, 4000)),
        step_base_s=draw(st.sampled_from([0.005, 0.012])),
        prefill_token_s=draw(st.sampled_from([2e-5, 1e-4])),
        decode_seq_s=draw(st.sampled_from([1e-4, 1e-3])),
        kv_token_s=draw(st.sampled_from([0.0, 3e-7])),
        scheduler=draw(st.sampled_from(["mixed", "prefill_first"])),
        speculative=sp,
    )
    t = 0
    requests = []
    for i in range(draw(st.integers(1, 25))):
        t += draw(st.integers(0, 60)) if i else 0
        prompt = draw(st.integers(1, max(1, params.kv_cache_tokens // 3)))
        requests.append(TokenRequest(t * 0.0073137, prompt, draw(st.integers(1, 80))))
    timeout = draw(st.none() | st.integers(1, 60))
    return (params, requests, draw(st.integers(1, 3)), draw(st.sampled_from(["round_robin", "least_loaded", "pull"])),
            None if timeout is None else timeout * 0.0171093, t * 0.0073137 + draw(st.integers(1, 300)) * 0.0519)


@PROFILE
@given(cases())
def test_every_drawn_request_ends_as_in_the_reference(
    tmp_path_factory: pytest.TempPathFactory,
    case: tuple[WorkerParams, list[TokenRequest], int, str, float | None, float],
) -> None:
    params, requests, workers, policy, timeout, duration = case
    note(f"{params}\n{requests}\n{workers} {policy} {timeout} {duration}")
    _agree(tmp_path_factory.mktemp("s"), requests, params, workers=workers, duration_s=duration,
           policy=policy, timeout_s=timeout, least=0, prompt=1, output=1)


def test_the_run_counts_decode_tokens_by_the_kind_of_step_that_gave_them(tmp_path: Path) -> None:
    sp = SpeculativeParams(draft_tokens=4, acceptance_rate=0.5)
    params = replace(WORKER, speculative=sp)
    # Alone: 100 decode tokens after the prefill's first, every one from verification.
    trace = write_trace([TokenRequest(0.0, 300, 101)], tmp_path / "one.jsonl")
    fig = Engine(scenario(workers=1, duration_s=30, trace=trace, params=params)).run().per_model["m"].speculative
    assert fig["verified_tokens"] == 100 and fig["plain_tokens"] == 0
    assert fig["verified_token_share"] == 1.0
    assert fig["tokens_per_decode_step"] == pytest.approx(1.9375, rel=1e-12)
    # A second request arriving while the first decodes: the step that prefills it gives
    # the first one plain token; the rest verify.
    trace = write_trace([TokenRequest(0.0, 300, 101), TokenRequest(0.2, 300, 11)], tmp_path / "two.jsonl")
    fig = Engine(scenario(workers=1, duration_s=30, trace=trace, params=params)).run().per_model["m"].speculative
    assert fig["plain_tokens"] == 1
    assert fig["verified_tokens"] == 100 + 10 - 1
    assert fig["tokens_per_decode_step"] == pytest.approx(110 / (109 / 1.9375 + 1), rel=1e-12)


def test_frames_carry_the_speculation_figures_only_when_a_model_speculates(tmp_path: Path) -> None:
    requests = poisson_requests(qps=8, duration_s=10, prompt=300, output=100, seed=2)
    trace = write_trace(requests, tmp_path / "r.jsonl")
    engine = Engine(scenario(workers=1, duration_s=10, trace=trace, params=LINEAR))
    frames = engine.advance_to(10)
    fig = engine.summary().per_model["m"].speculative
    shares = [f.m["verified_token_share"][0] for f in frames]
    steps = [f.m["tokens_per_decode_step"][0] for f in frames]
    tau = 1 + 0.7 + 0.49 + 0.343
    assert all(0 < s < 1 for s in shares[1:]) and all(1 < s < tau for s in steps[1:])
    assert len(set(shares)) > 3  # they move with the prompts each frame takes
    assert 0 < fig["verified_token_share"] < 1
    plain = Engine(scenario(workers=1, duration_s=10, trace=trace, params=WORKER))
    assert "verified_token_share" not in plain.advance_to(10)[0].m
    assert plain.summary().per_model["m"].speculative == {}


def test_split_pools_speculate_in_the_decode_pool() -> None:
    from emulator.analysis.numbers import compute
    from emulator.scenario.presets import load_preset

    base = load_preset("disagg-decode-undersized", max_requests=None).with_overrides(
        ["duration_s=60", "worker.max_batched_tokens=8192"], max_requests=None)
    spec = base.with_overrides(["worker.speculative={draft_tokens=3, acceptance_rate=0.7, draft_step_s=0.0006}"],
                               max_requests=None)
    plain_run, spec_run = Engine(base).run(), Engine(spec).run()
    fig = spec_run.per_model["chat"].speculative
    assert fig["verified_tokens"] > 0 and 1 < fig["tokens_per_decode_step"] < fig["tokens_per_step"]
    assert spec_run.tpot_s["p50"] < plain_run.tpot_s["p50"] / 2
    assert compute(spec).value("decode_speculative_draft_tokens", "chat") == 3
