"""The numbers pass of lower KV tiers: each tier's expected share of the prefix found
there and the load time it adds to a prefill worker's request, against hand arithmetic."""

from __future__ import annotations

import pytest

from emulator.analysis.fleet import analyse
from emulator.analysis.numbers import compute
from emulator.scenario.presets import load_preset

PRESET = load_preset("mooncake-dram-tier", max_requests=None)


def test_the_tier_figures_are_shown_with_tiers_and_absent_without() -> None:
    report = compute(PRESET)
    assert 0 < float(report.value("prefill_tier_cpu_hit_rate", "chat")) < 1
    assert float(report.value("prefill_tier_cpu_load_s", "chat")) > 0
    assert "worker.kv_tiers" in report.get("prefill_tier_cpu_load_s", "chat").inputs
    plain = compute(PRESET.with_overrides(["worker.kv_tiers=[]"], max_requests=None))
    assert not plain.has("prefill_tier_cpu_hit_rate", "chat")
    assert not plain.has("prefill_tier_cpu_load_s", "chat")
    # The tier's hits save prefill: the pool with the tier serves more.
    assert report.value("capacity_qps", "chat") > plain.value("capacity_qps", "chat")


def test_a_tiers_share_and_load_time_by_hand() -> None:
    # One prefill worker per pool share, prefix-routed: 200 groups of 6,000 tokens.
    m = analyse(PRESET).models["chat"]
    w = m.pool("prefill").worker
    ((name, share, load_s),) = w.tiers
    assert name == "cpu"
    # The tier's share is Che's hit rate over the GPU and the tier less that over the
    # GPU alone; 200 x 6,000 tokens fit both, so the levels together find it all.
    assert float(w.hit_rate) == pytest.approx(1.0)
    assert 0 < share < 1
    # Load time: the share x the usable prefix (its mean tokens, cut by short prompts,
    # less half a 16-token block) x 327,680 bytes / 25 GB/s.
    pre = m.workload.prefix
    usable = pre.prefixed * (pre.mean_tokens - 16 / 2)
    assert load_s == pytest.approx(share * usable * 327_680 / 25e9)
    assert load_s == pytest.approx(share * 5992 * 1.31072e-5, rel=0.05)
