"""The numbers pass under speculative decoding: k, alpha, tau, the verification step
and the draft's passes at capacity, and the TPOT floor, against hand arithmetic and a
run of the engine; absent without speculation."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
from token_reference import SpeculativeParams, TokenRequest
from token_scenarios import WORKER, scenario, write_trace

from emulator import Engine
from emulator.analysis.fleet import analyse
from emulator.analysis.fleet.steps import step_cost
from emulator.analysis.numbers import compute
from emulator.scenario.presets import load_preset

PRESET = load_preset("spec-eagle-70b-h100", max_requests=None)
PLAIN = PRESET.with_overrides(["worker.speculative=false"], max_requests=None)
KEYS = ("speculative_draft_tokens", "speculative_acceptance_rate", "speculative_tokens_per_step",
        "verification_step_at_capacity_s", "draft_at_capacity_s", "speculative_gain_at_capacity")


def test_the_speculation_figures_are_shown_with_it_and_absent_without() -> None:
    report = compute(PRESET)
    assert report.value("speculative_draft_tokens", "chat") == 3
    assert report.value("speculative_acceptance_rate", "chat") == Fraction(0.7)
    assert float(report.value("speculative_tokens_per_step", "chat")) == pytest.approx(2.533, abs=1e-12)
    assert "worker.speculative" in report.get("verification_step_at_capacity_s", "chat").inputs
    plain = compute(PLAIN)
    for key in KEYS:
        assert report.has(key, "chat")
        assert not plain.has(key, "chat")


def test_the_verification_step_and_the_draft_at_capacity_by_hand() -> None:
    m = analyse(PRESET).models["chat"]
    w = m.pools[0].worker
    roof = PRESET.roofline_for("chat")
    assert roof is not None
    n, context = float(w.concurrency), m.workload.kv_running
    weights, kv, token = float(roof.weights_read_s), float(roof.kv_token_read_s), float(roof.token_compute_s)
    fixed, comm = float(roof.fixed_step_s), float(roof.comm_token_s)
    # 4 tokens computed a sequence, the contexts' KV read once.
    verify = max(weights + kv * n * context, token * 4 * n) + fixed + comm * 4 * n
    draft = 3 * (0.0006 + 0.000002 * n)
    report = compute(PRESET)
    assert float(report.value("verification_step_at_capacity_s", "chat")) == pytest.approx(verify, rel=1e-12)
    assert float(report.value("draft_at_capacity_s", "chat")) == pytest.approx(draft, rel=1e-12)
    # The decode step shown is the time between a decoder's tokens: (verify + draft) / tau.
    assert float(w.step_s) == pytest.approx((verify + draft) / (1 + 0.7 + 0.49 + 0.343), rel=1e-12)


def test_speculation_raises_the_capacity_less_than_it_cuts_tpot_at_light_load() -> None:
    spec, plain = analyse(PRESET).models["chat"], analyse(PLAIN).models["chat"]
    assert spec.capacity_qps > plain.capacity_qps
    assert spec.capacity_qps < plain.capacity_qps * Fraction(12, 10)
    # At the average load (16 QPS on 4 workers) TPOT falls by more than half.
    assert float(spec.floors["tpot_s"]) < float(plain.floors["tpot_s"]) / 2


def test_the_tpot_floor_is_what_one_request_alone_gets_in_the_engine(tmp_path: Path) -> None:
    sp = SpeculativeParams(draft_tokens=4, acceptance_rate=0.6, draft_step_s=5e-4, draft_seq_s=1e-5)
    params = WORKER.__class__(**{**WORKER.__dict__, "speculative": sp})
    trace = write_trace([TokenRequest(0.0, 400, 60)], tmp_path / "one.jsonl")
    sc = scenario(workers=1, duration_s=30, trace=trace, params=params, prompt=400, output=60)
    floor = step_cost(sc, "m").token_alone_s(401)
    # 5 ms + 0.1 ms + 4 x 20 us verifying, 4 x (0.5 ms + 10 us) drafting, over
    # tau = 1 + 0.6 + 0.36 + 0.216 + 0.1296.
    assert floor == (Fraction("0.00518") + Fraction("0.00204")) / Fraction("2.3056")
    run = Engine(sc).run()
    assert run.tpot_s["mean"] == pytest.approx(float(floor), rel=1e-12)
