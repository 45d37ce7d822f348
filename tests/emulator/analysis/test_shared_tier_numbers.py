"""The numbers pass of a KV tier shared by a pool's workers (``shared = true``): the
store sees the pool's stream of what the workers' own levels miss, and its share of
the prefix is Che's hit rate over that stream at the store's capacity; recomputed here
by hand from the preset's groups."""

from __future__ import annotations

import numpy as np
import pytest

from emulator.analysis.fleet import analyse
from emulator.analysis.fleet.prefix import che_group_hits, partition
from emulator.analysis.numbers import compute
from emulator.scenario.presets import load_preset

PRESET = load_preset("mooncake-shared-pool", max_requests=None)
PRIVATE = '{name = "cpu", capacity_gb = 150, bandwidth_gb_s = 40}'


def test_the_shared_store_share_by_hand() -> None:
    m = analyse(PRESET).models["chat"]
    w = m.pool("prefill").worker
    ((name, share, load_s),) = w.tiers
    assert name == "remote"
    pre = m.workload.prefix
    assert pre is not None
    shares = pre.shares
    group = 6000  # whole 16-token blocks of each document
    hit = float(w.hit_rate)
    gpu = hit - share
    # Each group at its worker (the routing keeps it there): Che over the worker's own
    # groups at what the GPU leaves for them; found at the GPU with that chance.
    # The GPU's room for cached groups is the one the analysis found: solved for here
    # from the GPU's share (the mean over workers grows with the room).
    own = np.zeros(shares.size)
    owned = partition(shares, 4)
    lo, hi = 0.0, 400.0
    for _ in range(60):
        mid = (lo + hi) / 2
        for o in owned:
            own[o] = che_group_hits(shares[o], mid)
        if float(np.dot(own, shares) / shares.sum()) < gpu:
            lo = mid
        else:
            hi = mid
    for o in owned:
        own[o] = che_group_hits(shares[o], (lo + hi) / 2)
    store = 600e9 // 327_680 / group  # the store's documents
    there = che_group_hits(shares * (1 - own), store)
    expected = float(np.dot((1 - own) * there, shares) / shares.sum())
    assert share == pytest.approx(expected, rel=1e-6)
    assert 0.1 < share < 0.5
    usable = pre.prefixed * (pre.mean_tokens - 16 / 2)
    assert load_s == pytest.approx(share * usable * 327_680 / 40e9)


def test_the_figures_name_the_store_and_it_beats_no_tier() -> None:
    report = compute(PRESET)
    row = report.get("prefill_tier_remote_hit_rate", "chat")
    assert "shared by the pool" in row.label
    assert "stream of misses" in row.explain
    plain = compute(PRESET.with_overrides(["worker.kv_tiers=[]"], max_requests=None))
    assert report.value("capacity_qps", "chat") > plain.value("capacity_qps", "chat")
    private = compute(PRESET.with_overrides([f"worker.kv_tiers=[{PRIVATE}]"], max_requests=None))
    assert "shared" not in private.get("prefill_tier_cpu_hit_rate", "chat").label
