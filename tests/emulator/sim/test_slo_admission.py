"""SLO-aware admission (``admission = "predicted_ttft"``): the engine refuses the
arrivals whose predicted TTFT misses the goal exactly as the step-by-step reference
(``token_reference.py``) does, request by request, and as hand arithmetic does; the
refused are shed with their reason, answered at once, and may be re-sent."""

from __future__ import annotations

from pathlib import Path

import pytest
from token_reference import ReferenceResult, TokenRequest, WorkerParams, simulate
from token_scenarios import WORKER, poisson_requests, scenario, write_trace

from emulator import Engine, Summary
from emulator.scenario.presets import load_preset
from emulator.sim.requests import LOST, OK, ORPHANED, PENDING, SHED, TIMED_OUT

_CODES = {OK: "ok", SHED: "shed", TIMED_OUT: "timed_out", LOST: "lost", ORPHANED: "orphaned",
          PENDING: "in_system"}


def _engine(requests: list[TokenRequest], tmp_path: Path, *, workers: int, policy: str, goal: float,
            params: WorkerParams = WORKER, slack: float = 1.0, duration_s: float = 60.0, **keys: dict,
            ) -> tuple[Summary, list[tuple[str, float | None]]]:
    """Run the engine with SLO-aware admission; each offered request's outcome and
    first-token time."""
    trace = write_trace(requests, tmp_path / "requests.jsonl")
    sc = scenario(workers=workers, duration_s=duration_s, trace=trace, policy=policy, params=params,
                  dispatcher={"admission": "predicted_ttft", "admission_slack": slack},
                  slo={"ttft_s": goal}, **keys)
    engine = Engine(sc)
    router = engine.disp[0]
    first: dict[int, float] = {}
    record = router.complete_request

    def spy(rec: tuple) -> None:
        first[rec[0]] = rec[1]
        record(rec)

    router.complete_request = spy  # type: ignore[method-assign]
    summary = engine.run()
    st = router.store
    assert st.base == 0  # small runs keep every row
    return summary, [(_CODES[int(st.outcome[row])], first.get(row)) for row in range(summary.offered)]


def _reference(requests: list[TokenRequest], *, workers: int, policy: str, limit: float,
               params: WorkerParams = WORKER, duration_s: float = 60.0) -> ReferenceResult:
    return simulate(requests, workers=workers, params=params, policy=policy, duration_s=duration_s,
                    admission_s=limit)


@pytest.mark.parametrize("policy", ["round_robin", "least_loaded", "pull"])
@pytest.mark.parametrize(("scheduler", "seed"), [("mixed", 1), ("mixed", 2), ("prefill_first", 3)])
def test_it_refuses_and_serves_each_request_as_the_reference_does(
        tmp_path: Path, policy: str, scheduler: str, seed: int) -> None:
    # Twice what two workers prefill, long prompts in chunks: the queues would grow
    # without the rule; with it about half the arrivals are refused.
    params = WorkerParams(**{**WORKER.__dict__, "scheduler": scheduler, "prefill_attn_s": 1e-9,
                             "max_batched_tokens": 4096})
    requests = poisson_requests(qps=40, duration_s=20, prompt=3000, output=20, prompt_cv=0.5,
                                output_cv=0.5, seed=seed)
    summary, engine = _engine(requests, tmp_path, workers=2, policy=policy, goal=0.8, params=params,
                              duration_s=20.0)
    ref = _reference(requests, workers=2, policy=policy, limit=0.8, params=params, duration_s=20.0)
    assert len(engine) == len(ref.records)
    refused = {i for i, _ in ref.refused}
    assert 0.2 * len(engine) < len(refused) < 0.8 * len(engine)
    for i, ((outcome, first), r) in enumerate(zip(engine, ref.records, strict=True)):
        assert outcome == r.outcome, (i, outcome, r)
        assert (outcome == "shed") == (i in refused), i
        if r.done_s is not None:
            assert first == pytest.approx(r.first_token_s, abs=1e-9), (i, first, r)
    adm = summary.per_model["m"].admission
    assert summary.shed == summary.shed_slo_miss == adm["rejected"] == len(refused)
    predicted = [p for _, p in ref.refused]
    assert adm["rejected_predicted_ttft_s"]["max"] == pytest.approx(max(predicted), abs=1e-9)
    assert adm["rejected_predicted_ttft_s"]["mean"] == pytest.approx(sum(predicted) / len(predicted), abs=1e-9)
    assert min(predicted) > 0.8
    assert adm["admitted_predicted_ttft_s"]["max"] <= 0.8


def test_a_prediction_is_the_step_in_flight_the_prefill_ahead_and_a_full_step_for_its_own(
        tmp_path: Path) -> None:
    # Steps of 0.01 s + 1e-4 s a token, budget 1000: A (1500 tokens) at 0 takes steps
    # of 1000 and 500 (+ 500 of filler): 0.11 + 0.11, predicted 0.22 s. B (800 tokens) at 0.05 s: 0.06 s left of A's first step,
    # then A's 500 and 500 of B (0.11 s), then B's last 300 with 700 of filler (0.11 s):
    # predicted 0.28 s, refused. C (100 tokens) at 0.06 s: 0.05 s left, then A's 500,
    # C's 100 and 400 of filler (0.11 s): predicted 0.16 s.
    params = WorkerParams(max_batched_tokens=1000, step_base_s=0.01, prefill_token_s=1e-4,
                          decode_seq_s=0.0, kv_cache_tokens=100_000)
    requests = [TokenRequest(0.0, 1500, 1), TokenRequest(0.05, 800, 1), TokenRequest(0.06, 100, 1)]
    summary, engine = _engine(requests, tmp_path, workers=1, policy="round_robin", goal=0.275,
                              params=params, duration_s=5.0)
    assert [o for o, _ in engine] == ["ok", "shed", "ok"]
    adm = summary.per_model["m"].admission
    assert adm["rejected_predicted_ttft_s"]["max"] == pytest.approx(0.28, abs=1e-12)
    assert adm["admitted_predicted_ttft_s"]["max"] == pytest.approx(0.22, abs=1e-12)
    assert adm["admitted_predicted_ttft_s"]["mean"] == pytest.approx((0.22 + 0.16) / 2, abs=1e-12)
    # C shares A's last step, as the filler foresaw: both first tokens at 0.11 + 0.07.
    assert engine[0][1] == pytest.approx(0.18, abs=1e-12)
    assert engine[2][1] == pytest.approx(0.18, abs=1e-12)
    ref = _reference(requests, workers=1, policy="round_robin", limit=0.275, params=params, duration_s=5.0)
    assert [p for _, p in ref.refused] == [pytest.approx(0.28, abs=1e-12)]


def test_a_split_models_prediction_adds_the_transfer_and_the_decode_workers_step() -> None:
    # A lone prompt on an idle split fleet: one full prefill step, its KV over the
    # link, and the decode worker's one-token step; the goal just under it refuses it.
    sc = load_preset("pd-slo-admission").with_overrides([
        "traffic.shape=\"constant\"", "traffic.qps=0.05", "duration_s=30", "models.chat.tokens_cv=0",
        "models.chat.tokens=4000",
    ])
    w = sc.worker_for("chat")
    per_token = 327_680 / 100e9
    prefill = w.step_base_s + w.prefill_token_s * 8192 + w.prefill_attn_s * (4000 * 4000 + 4192 * 4192)
    decode = w.step_base_s + w.prefill_token_s * 1 + w.prefill_attn_s * 4000
    predicted = prefill + 4000 * per_token + decode
    s = Engine(sc).run()
    adm = s.per_model["chat"].admission
    assert s.offered >= 1 and s.shed == 0
    assert adm["admitted_predicted_ttft_s"]["max"] == pytest.approx(predicted, rel=1e-12)
    # Its real TTFT has the prefill step without the filler.
    real = predicted - w.prefill_token_s * 4192 - w.prefill_attn_s * 4192 * 4192
    assert s.ttft_s["max"] == pytest.approx(real, rel=1e-9)
    tight = Engine(sc.with_overrides([f"slo.ttft_s={predicted * 0.999}"])).run()
    assert tight.ok == 0 and tight.shed == tight.shed_slo_miss == tight.offered


def test_refused_clients_resend_after_the_backoff_and_are_counted_as_retries(tmp_path: Path) -> None:
    # Steps of 0.11 s (1000 tokens), goal 2.5 s. A (20,000 tokens) at 0: 20 steps, 2.2 s.
    # Nine of 500 tokens at 0.01 s, 0.1 s left of A's first step: the first four are
    # predicted 2.3, 2.3, 2.41 and 2.41 s, the other five 2.52 s and more, refused. Re-sent
    # 0.2 s later (0.01 s left of A's second step, 20,000 tokens ahead): 2.32, 2.32,
    # 2.43, 2.43 s admitted, the fifth 2.54 s refused again; re-sent at 0.41 s (0.03 s
    # left, 20,000 ahead) it is predicted 2.34 s and admitted.
    params = WorkerParams(max_batched_tokens=1000, step_base_s=0.01, prefill_token_s=1e-4,
                          decode_seq_s=0.0, kv_cache_tokens=100_000)
    requests = [TokenRequest(0.0, 20_000, 1)] + [TokenRequest(0.01, 500, 1) for _ in range(9)]
    summary, _ = _engine(requests, tmp_path, workers=1, policy="round_robin", goal=2.5, params=params,
                         duration_s=10.0, client={"retries": 2, "retry_backoff_s": 0.2})
    adm = summary.per_model["m"].admission
    assert (summary.offered, summary.retried, summary.shed_slo_miss, summary.ok) == (16, 6, 6, 10)
    assert adm["rejected_predicted_ttft_s"]["max"] == pytest.approx(0.01 + 23 * 0.11, abs=1e-9)
    assert summary.balanced()


def test_shed_reasons_and_frames_carry_the_refusals() -> None:
    sc = load_preset("pd-slo-admission").with_overrides(["duration_s=90"])
    engine = Engine(sc)
    frames = []
    while not engine.done:
        frames += engine.advance_to(engine.now_s + 30)
    s = engine.summary()
    d = s.to_dict()
    assert d["shed_reasons"]["slo_miss"] == s.shed_slo_miss == s.shed > 0
    assert sum(sum(f.m["shed_slo_miss"]) for f in frames) == s.shed_slo_miss
    per_s = [f.m["rejected_per_s"][0] for f in frames]
    assert sum(per_s) * sc.sample_s == pytest.approx(s.shed_slo_miss)
    assert all(v is None or v > sc.slo.ttft_s for v in (f.m["rejected_predicted_ttft_s"][0] for f in frames))
    adm = d["per_model"]["chat"]["admission"]
    assert adm["rejected"] == s.shed_slo_miss and adm["limit_s"] == sc.slo.ttft_s
    again = type(s).from_dict(d)
    assert again.per_model["chat"].admission == adm and again.shed_slo_miss == s.shed_slo_miss


def test_without_the_key_nothing_is_predicted_and_frames_keep_their_keys() -> None:
    sc = load_preset("pd-slo-admission").with_overrides(["duration_s=20", 'dispatcher.admission="queue_limit"'])
    engine = Engine(sc)
    frames = engine.advance_to(20)
    s = engine.summary()
    assert engine.disp[0].admission is None  # type: ignore[union-attr]
    assert "rejected_per_s" not in frames[0].m
    assert s.shed_slo_miss == 0 and "admission" not in s.to_dict()["per_model"]["chat"]
