"""The two split-fleet presets do what their descriptions say."""

from __future__ import annotations

from emulator import Engine
from emulator.scenario.presets import load_preset


def _run(name: str, *overrides: str) -> dict:
    s = load_preset(name, max_requests=None)
    summary = Engine(s.with_overrides(list(overrides)) if overrides else s).run()
    return {"summary": summary, **summary.per_model["chat"].to_dict()}


def test_the_llm_d_like_fleet_loses_the_crashed_workers_requests_and_a_queue_bound_cuts_the_tail() -> None:
    # (190 s: the crash at 120.5 s and its minute, not the recovery after it.)
    shipped = _run("pd-prefix-aware", "duration_s=190")
    calm = _run("pd-prefix-aware", "duration_s=190", "faults=[]")
    bounded = _run("pd-prefix-aware", "duration_s=190", "models.chat.disaggregated.decider_max_prefill_queue=8")
    assert shipped["summary"].lost > 0 and calm["summary"].lost == 0
    assert shipped["ttft_s"]["p99"] > 10 > 1 > calm["ttft_s"]["p99"]
    assert bounded["ttft_s"]["p99"] < shipped["ttft_s"]["p99"] / 10
    assert bounded["slo_goodput"] > shipped["slo_goodput"] + 0.05
    pools = shipped["pools"]
    # The decider keeps the cached prompts off the prefill pool; the bound adds some.
    assert pools["skipped_prefill_cached"] > 0.3 * shipped["summary"].offered
    assert bounded["pools"]["skipped_prefill_queue"] > 100 and pools["skipped_prefill_queue"] == 0
    assert shipped["summary"].prefill_tokens_saved > 0.7 * shipped["summary"].prefix_tokens_seen


def test_the_mooncake_like_fleet_sheds_at_its_queue_limit_and_keeps_ttft_bounded() -> None:
    shipped = _run("pd-long-prompt-admission", "duration_s=120")
    unbounded = _run("pd-long-prompt-admission", "duration_s=120", "dispatcher.queue_limit=0")
    assert shipped["summary"].shed_queue_full > 50 and unbounded["summary"].shed == 0
    assert shipped["ttft_s"]["p50"] < 2 < 5 < unbounded["ttft_s"]["p50"]
    assert shipped["slo_goodput"] > unbounded["slo_goodput"] + 0.3
