"""A mixture of experts under the roofline: the engine against the step-by-step
reference (``token_reference.RooflineParams`` with experts), request by request, with
and without expert parallelism, and against hand arithmetic for one request alone."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from token_reference import RooflineParams, TokenRequest, WorkerParams, simulate
from token_scenarios import WORKER, completion_times, poisson_requests, scenario, write_trace

from emulator import Engine

#: H100 figures with their link, given as numbers.
GPU = {"memory_gb": 80, "hbm_tb_s": 3.35, "bf16_tflops": 989.4, "link_gb_s": 450, "collective_us": 61.25}
#: A made-up mixture: 24 MoE layers of 64 routed experts, 6 a token, each expert 24M
#: parameters; 3.136B parameters outside the routed experts.
EXPERT_B = 0.024
ROUTED_B = 24 * 64 * EXPERT_B
ACTIVE_B = 40 - ROUTED_B + 24 * 6 * EXPERT_B
SHAPE: dict[str, Any] = {
    "params_b": 40, "active_params_b": round(ACTIVE_B, 6), "layers": 24, "kv_heads": 4,
    "head_dim": 128, "hidden_size": 4096, "experts": 64, "experts_per_token": 6, "moe_layers": 24,
    "expert_params_b": EXPERT_B,
}


def _roofline(mbu: float, mfu: float, ep: int = 1) -> RooflineParams:
    return RooflineParams(
        weight_bytes=40e9 * 2, kv_bytes_per_token=2 * 24 * 4 * 128 * 2, active_params=round(ACTIVE_B, 6) * 1e9,
        units=4, bytes_per_s=3.35e12, flops=989.4e12, mbu=mbu, mfu=mfu, layers=24, hidden=4096,
        link_bytes_per_s=450e9, collective_s=61.25e-6, experts=64, experts_per_token=6, moe_layers=24,
        expert_bytes=EXPERT_B * 1e9 * 2, expert_parallel=ep,
    )


def _engine(tmp_path: Path, requests: list[TokenRequest], params: WorkerParams, ep: int = 1,
            policy: str = "round_robin", **arch: Any) -> Engine:
    trace = write_trace(requests, tmp_path / "requests.jsonl")
    shape = {**SHAPE, **({"expert_parallel": ep} if ep > 1 else {}), **arch}
    return Engine(scenario(workers=2, duration_s=60, trace=trace, params=params, units=4, arch=shape,
                           hardware=GPU, policy=policy))


def _done(engine: Engine) -> dict[int, tuple[float, float]]:
    """Run the engine; each request's first token and completion times."""
    return completion_times(engine)


@pytest.mark.parametrize(("ep", "policy"), [(1, "round_robin"), (4, "round_robin"), (4, "pull")])
def test_it_times_every_request_as_the_reference_does(tmp_path: Path, ep: int, policy: str) -> None:
    # A low mfu makes full batches compute-bound while small ones are memory-bound, and
    # the load lets the batch vary: the experts hit, and so the weights read, vary by step.
    params = replace(WORKER, roofline=_roofline(mbu=0.8, mfu=0.3, ep=ep))
    requests = poisson_requests(qps=30, duration_s=60, prompt=500, output=300, output_cv=0.8, seed=31)
    done = _done(_engine(tmp_path, requests, params, ep, policy))
    reference = simulate(requests, workers=2, params=params, policy=policy, duration_s=60, record_steps=True)
    decoders = {s.decoding for s in reference.step_log if s.prefill_tokens == 0}
    assert min(decoders) < 10 and max(decoders) > 60  # the experts hit span 9 % to 100 %
    finished = [(i, r) for i, r in enumerate(reference.records) if r.outcome == "ok"]
    assert len(finished) >= len(requests) // 2
    for i, r in finished:
        assert done[i][0] == pytest.approx(r.first_token_s, abs=1e-6)
        assert done[i][1] == pytest.approx(r.done_s, abs=1e-6)


def test_one_request_alone_reads_its_experts_only(tmp_path: Path) -> None:
    # One sequence's decode step hits exactly its 6 experts a layer; the 2,000-token
    # prefill hits all 64 (1 - (58/64)^2000 is 1 to 86 digits) and is compute-bound.
    params = replace(WORKER, roofline=_roofline(mbu=1.0, mfu=1.0, ep=4))
    engine = _engine(tmp_path, [TokenRequest(0.0, 2000, 20)], params, ep=4)
    s = engine.run()
    # 2 x 24 - 24 all-reduces (attention, none after a MoE layer's MLP) and 2 x 24
    # all-to-alls of 6 copies of each token, 3/4 of them to another GPU.
    fixed = (24 + 48) * 61.25e-6
    per_token = (24 * 1.5 * 4096 * 2 + 48 * 6 * 0.75 * 4096 * 2) / 450e9
    prefill = 2 * ACTIVE_B * 1e9 * 2000 / (4 * 989.4e12) + fixed + 2000 * per_token
    assert s.ttft_s["mean"] == pytest.approx(prefill)
    weights = (40 - ROUTED_B + 24 * 6 * EXPERT_B) * 1e9 * 2
    decode = [(weights + 49_152 * (2000 + j)) / (4 * 3.35e12) + fixed + per_token for j in range(1, 20)]
    assert s.tpot_s["mean"] == pytest.approx(sum(decode) / 19)


def test_reading_every_expert_costs_the_model_as_if_dense(tmp_path: Path) -> None:
    requests = poisson_requests(qps=10, duration_s=30, prompt=500, output=100, seed=5)
    params = replace(WORKER, roofline=_roofline(mbu=0.8, mfu=0.5))
    hit = _engine(tmp_path, requests, params).run()
    every = _engine(tmp_path, requests, params, experts_read="all").run()
    dense_shape = {k: v for k, v in SHAPE.items()
                   if k not in ("experts", "experts_per_token", "moe_layers", "expert_params_b")}
    trace = write_trace(requests, tmp_path / "dense.jsonl")
    dense = Engine(scenario(workers=2, duration_s=60, trace=trace, params=params, units=4, arch=dense_shape,
                            hardware=GPU)).run()
    assert every.tpot_s["mean"] == pytest.approx(dense.tpot_s["mean"], rel=1e-12)
    assert every.ttft_s["mean"] == pytest.approx(dense.ttft_s["mean"], rel=1e-12)
    # At a few sequences a worker the expected experts are a fraction of them all.
    assert hit.tpot_s["mean"] < 0.8 * every.tpot_s["mean"]


def test_the_summary_holds_the_runs_expert_figures_and_survives_a_round_trip(tmp_path: Path) -> None:
    from emulator.sim.results import Summary

    params = replace(WORKER, roofline=_roofline(mbu=0.8, mfu=0.5))
    # Four requests at once, two to each worker (round-robin): one prefill step each, then
    # 49 decode-only steps of 2 sequences, which hit 64 (1 - (58/64)^2) experts a layer.
    requests = [TokenRequest(0.0, 100, 50) for _ in range(4)]
    summary = _engine(tmp_path, requests, params).run()
    moe = summary.per_model["m"].moe
    assert moe["decode_steps"] == 2 * 49
    hit = 64 * (1 - (58 / 64) ** 2)
    assert moe["experts_hit_mean"] == pytest.approx(hit)
    assert moe["weights_read_gb_mean"] == pytest.approx((40 - ROUTED_B + 24 * hit * EXPERT_B) * 2)
    data = summary.to_dict()
    assert Summary.from_dict(data).to_dict() == data and data["per_model"]["m"]["moe"] == moe
