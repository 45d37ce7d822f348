"""The numbers pass of a mixture of experts: parameters, experts hit and weights read at
the decode batch and in a prefill chunk, the all-to-alls' cost, against hand
arithmetic; and the step figures of the analysis against the engine's step model."""

from __future__ import annotations

from fractions import Fraction

import pytest

from emulator.analysis.fleet.steps import step_cost
from emulator.analysis.numbers import compute
from emulator.scenario.presets import load_preset

PRESET = load_preset("deepseek-v3-h200", max_requests=None)


def _hit(tokens: float) -> float:
    return 256 * (1 - (1 - 8 / 256) ** tokens)


def test_the_expert_figures_by_hand() -> None:
    report = compute(PRESET)
    assert report.value("moe_params_b", "chat") == 671
    assert report.value("moe_active_params_b", "chat") == 37
    running = float(report.value("running_avg", "chat"))
    assert 20 < running < 256  # a decode batch whose experts are not all hit
    assert float(report.value("experts_hit_decode_avg", "chat")) == pytest.approx(_hit(running))
    assert float(report.value("experts_hit_prefill_chunk", "chat")) == pytest.approx(256)
    # 671 GB less the routed experts no token picks: 58 layers x (256 - hit) x 3 x 7168 x 2048 bytes.
    expert = 3 * 7168 * 2048
    read = 671e9 - 58 * (256 - _hit(running)) * expert
    assert float(report.value("weights_read_decode_avg_gb", "chat")) == pytest.approx(read / 1e9)
    # A dispatch and a combine a MoE layer at 61.25 us; each token's 8 copies, 7/8 away,
    # of 7,168 FP8 values over 450 GB/s.
    assert report.value("all_to_all_latency_s", "chat") == Fraction(2 * 58 * 6125, 10**8)
    assert report.value("all_to_all_per_token_s", "chat") == Fraction(2 * 58 * 8 * 7 * 7168, 8 * 450 * 10**9)
    # One token's decode floor reads the non-routed weights and 8 experts a layer.
    floor = (671e9 - 58 * 248 * expert) / (8 * 4.8e12)
    assert float(report.value("decode_step_floor_s", "chat")) == pytest.approx(floor)


def test_the_figures_are_absent_for_a_dense_model_and_all_experts_read_when_asked() -> None:
    dense = compute(load_preset("roofline-70b-h100", max_requests=None))
    assert not dense.has("experts_hit_decode_avg", "chat")
    assert not dense.has("all_to_all_latency_s", "chat")
    every = compute(PRESET.with_overrides(['models.chat.arch.experts_read="all"'], max_requests=None))
    assert every.value("experts_hit_decode_avg", "chat") == 256
    assert every.value("weights_read_decode_avg_gb", "chat") == 671
    # Reading every expert costs capacity only where batches leave experts unhit.
    assert every.value("capacity_qps", "chat") <= compute(PRESET).value("capacity_qps", "chat")


def test_the_analysis_step_agrees_with_the_exact_roofline() -> None:
    cost = step_cost(PRESET, "chat")
    roof = PRESET.roofline_for("chat")
    assert roof is not None and "models.chat.arch.expert_parallel" in cost.inputs
    for n in (1, 3, 16, 100, 256):
        exact = roof.step_s(n * 2500, n)
        assert cost.decode(n, 2500) == pytest.approx(float(exact), rel=1e-12)
    assert cost.prefill_steps(3000) == pytest.approx(float(cost.prefill_alone_s(3000)), rel=1e-12)


def test_a_tpot_goal_under_one_tokens_experts_is_found_and_one_above_is_a_question() -> None:
    # One sequence reads 37.5 GB (8 experts a layer and the rest): 0.98 ms over 8 H200s.
    below = {f["title"]: f for f in compute(PRESET.with_overrides(["slo.tpot_s=0.0005"])).findings}
    verdict = below["The TPOT goal is under the time chat's GPUs take to read its weights"]
    assert "one sequence's decode step reads 37.5 GB" in verdict["body"] and "8 experts a layer" in verdict["body"]
    # 2 ms is above that floor, but under the 12.7 ms a step takes at mbu 0.6 with its collectives.
    above = {f["title"] for f in compute(PRESET.with_overrides(["slo.tpot_s=0.002"])).findings}
    assert "The TPOT goal is under the time chat's GPUs take to read its weights" not in above
