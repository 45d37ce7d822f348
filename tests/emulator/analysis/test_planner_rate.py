"""The SLO planner's per-worker rate at its target: within the target on the step
model, tighter targets give less, impossible ones 0."""

from __future__ import annotations

from dataclasses import replace

from emulator.analysis.fleet.analysis import GOODPUT
from emulator.analysis.fleet.capacity import continuous_worker, direct_prompts
from emulator.analysis.fleet.planner import per_worker_rate
from emulator.analysis.fleet.queueing import good_share, prefill_times
from emulator.analysis.fleet.steps import step_cost
from emulator.analysis.fleet.workload import workload_of
from emulator.scenario.presets import load_preset

S = load_preset("disagg-planner-ramp")
_scalers = [p.autoscaler for p in S.pools if p.autoscaler is not None]
PRE, DEC = _scalers


def test_it_takes_a_given_rate_as_is() -> None:
    rate = per_worker_rate(S, replace(PRE, metric="slo", per_worker_qps=3.5), "prefill")
    assert (rate.qps, rate.target_s) == (3.5, None)


def test_a_tighter_tbt_target_gives_a_smaller_batch_and_rate() -> None:
    rates = [per_worker_rate(S, replace(DEC, metric="slo", target_tbt_s=g), "decode").qps
             for g in (0.1, 0.012, 0.01, 0.008)]
    assert rates == sorted(rates, reverse=True)
    assert rates[1] > rates[2] > rates[3] > 0
    assert per_worker_rate(S, replace(DEC, metric="slo", target_tbt_s=0.005), "decode").qps == 0.0


def test_the_ttft_rate_keeps_the_goodput_of_first_tokens_within_the_target() -> None:
    spec = replace(PRE, metric="slo", target_ttft_s=0.5)
    rate = per_worker_rate(S, spec, "prefill")
    assert rate.qps > 0 and rate.target_s == 0.5
    assert rate.qps < per_worker_rate(S, replace(spec, target_ttft_s=2.0), "prefill").qps
    assert per_worker_rate(S, replace(spec, target_ttft_s=0.05), "prefill").qps == 0.0


def test_the_bound_is_tight() -> None:
    # On the queueing model directly: at the rate the goodput of first tokens is
    # within the target's slack, and 10% more falls short of it.
    spec = replace(PRE, metric="slo", target_ttft_s=0.5)
    rate = per_worker_rate(S, spec, "prefill")
    load, cost = workload_of(S, "chat"), step_cost(S, "chat")
    split = S.models["chat"].disaggregated
    assert split is not None
    sent = direct_prompts(load, split.decider_threshold_tokens, None, S.worker_for("chat").block_tokens)
    w = continuous_worker(S, "chat", load, cost, role="prefill", pool_workers=PRE.max_workers,
                          direct_share=sent.share if sent else 0.0, transfer_s=0.0, direct=sent)
    assert w.prefill_s is not None
    times, weights = prefill_times(load, cost, float(w.hit_rate or 0), 0.0, float(w.prefill_s))
    move_s = load.prompt.mean * 327_680 / (split.kv_transfer_gb_s * 1e9)
    slack = 0.5 - move_s - float(cost.decode_alone_s(round(load.prompt.mean) + 1))
    limit = S.dispatcher.queue_limit
    assert good_share(rate.qps, 1, times, weights, slack, limit) >= GOODPUT - 1e-9
    assert good_share(rate.qps * 1.1, 1, times, weights, slack, limit) < GOODPUT
