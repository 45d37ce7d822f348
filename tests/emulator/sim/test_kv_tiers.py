"""The engine's lower KV tiers (``worker.kv_tiers``) against the step-by-step reference
(``tier_reference.py``), request by request through trace replay; an exact analytic
case (one group evicted to the CPU tier and hit again costs exactly its load); and
runs without tiers unchanged by the tier code."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from prefix_reference import PrefixRequest, simulate_prefix
from test_prefix_reference import check_agreement, requests_with_prefixes
from test_prefix_reference import run_engine as run_prefix_engine
from tier_reference import TierParams, simulate_tiers
from token_reference import WorkerParams
from token_scenarios import WORKER

from emulator import Summary

#: Llama-2-70B in BF16: 2 (K, V) x 80 layers x 8 KV heads x 128 x 2 bytes.
ARCH = {"model": "Llama-2-70B", "dtype_bytes": 2}
BYTES_PER_TOKEN = 327_680


def run_engine(
    requests: list[PrefixRequest], tmp_path: Path, *, workers: int, duration_s: float,
    params: WorkerParams, tiers: list[dict[str, Any]], policy: str = "round_robin",
    block_tokens: int = 16,
) -> tuple[Summary, dict[int, tuple[float, float]], dict[int, int]]:
    """``test_prefix_reference.run_engine`` with the model's architecture (for the
    tiers' bytes a token) and its ``worker.kv_tiers``."""
    return run_prefix_engine(requests, tmp_path, workers=workers, duration_s=duration_s, policy=policy,
                             params=params, block_tokens=block_tokens, tiers=tiers, arch=ARCH)


def _tier(name: str, tokens: int, gb_s: float) -> tuple[dict[str, Any], TierParams]:
    return (
        {"name": name, "capacity_tokens": tokens, "bandwidth_gb_s": gb_s},
        TierParams(name, tokens, BYTES_PER_TOKEN / (gb_s * 1e9)),
    )


@pytest.mark.parametrize(
    ("policy", "levels"),
    [
        ("round_robin", [("cpu", 60_000, 25.0)]),
        ("prefix_aware", [("cpu", 60_000, 25.0)]),
        ("round_robin", [("cpu", 20_000, 25.0), ("ssd", 50_000, 4.0)]),
        ("pull", [("cpu", 8_000, 25.0), ("ssd", 16_000, 4.0), ("remote", 30_000, 1.0)]),
    ],
)
def test_it_agrees_with_the_reference_request_by_request(
    tmp_path: Path, policy: str, levels: list[tuple[str, int, float]]
) -> None:
    # A 40,000-token GPU cache under 80 groups of 600-token prefixes: blocks are
    # evicted to the tiers, evicted further down, and loaded back.
    params = replace(WORKER, kv_cache_tokens=40_000, kv_token_s=2e-8, prefill_attn_s=1e-9)
    requests = requests_with_prefixes(
        qps=30, duration_s=40, prompt=1000, output=300, groups=80, prefix=600,
        zipf_s=0.8, prompt_cv=0.6, output_cv=1.0, seed=9,
    )
    pairs = [_tier(*lv) for lv in levels]
    assert_matches_tier_reference(requests, tmp_path, 2, params, policy, pairs)


def assert_matches_tier_reference(requests: list[PrefixRequest], tmp_path: Path, workers: int,
                                  params: WorkerParams, policy: str,
                                  pairs: list[tuple[dict[str, Any], TierParams]]) -> None:
    """The engine with the tiers of ``pairs`` (its table, the reference's) against the
    tier reference over 40 s: request by request, each tier's hits and load seconds,
    and every tier serving some."""
    summary, done, hits = run_engine(
        requests, tmp_path, workers=workers, duration_s=40, params=params, policy=policy,
        tiers=[a for a, _ in pairs], block_tokens=32,
    )
    ref = simulate_tiers(
        requests, workers=workers, params=params, policy=policy, duration_s=40, block_tokens=32,
        tiers=[b for _, b in pairs],
    )
    check_agreement(summary, done, hits, ref.prefix)
    tiers = summary.per_model["m"].kv_tiers
    names = [b.name for _, b in pairs]
    for name in names:
        assert tiers[name]["hit_tokens"] == ref.loaded[name]
        assert tiers[name]["load_s"] == pytest.approx(ref.load_s[name], rel=1e-12)
    assert all(ref.loaded[name] > 0 for name in names)  # each tier served hits
    assert sum(tiers[t]["hit_tokens"] for t in tiers) == summary.prefill_tokens_saved


def test_one_group_evicted_then_hit_again_costs_exactly_its_load(tmp_path: Path) -> None:
    # One worker whose KV (5,008 tokens) holds one 5,000-token prompt: group 0, then
    # group 1 (its admission evicts all of group 0's 250 blocks to the CPU tier), then
    # group 0 again (evicting group 1), each alone. The third request loads its 4,000
    # prefix tokens from the tier and computes the other 1,000 in one step.
    params = replace(WORKER, kv_cache_tokens=5_008, max_batched_tokens=8192)
    prompt, prefix, out = 5000, 4000, 2
    requests = [
        PrefixRequest(0.0, prompt, out, 0, prefix),
        PrefixRequest(10.0, prompt, out, 1, prefix),
        PrefixRequest(20.0, prompt, out, 0, prefix),
    ]
    gb_s = 20.0
    summary, done, hits = run_engine(
        requests, tmp_path, workers=1, duration_s=30, params=params,
        tiers=[{"name": "cpu", "capacity_tokens": 100_000, "bandwidth_gb_s": gb_s}],
    )
    load_s = prefix * BYTES_PER_TOKEN / (gb_s * 1e9)  # 0.065536 s
    p = params
    # A lone prefill step of c tokens (no decoders, no KV read, the linear model).
    def step(c: int, start: int) -> float:
        return p.step_base_s + p.prefill_token_s * c + p.prefill_attn_s * c * (start + c)

    full = step(prompt, 0)
    assert done[0][0] == pytest.approx(full, abs=1e-12)
    assert done[1][0] - 10.0 == pytest.approx(full, abs=1e-9)
    assert done[2][0] - 20.0 == pytest.approx(load_s + step(prompt - prefix, prefix), abs=1e-9)
    assert hits == {0: 0, 1: 0, 2: 0}  # the GPU cache held neither group when it came
    tiers = summary.per_model["m"].kv_tiers
    assert tiers["cpu"] == {"hit_tokens": prefix, "load_s": pytest.approx(load_s), "hit_rate": prefix / (3 * prefix)}
    assert tiers["gpu"] == {"hit_tokens": 0, "hit_rate": 0.0}


def test_without_tiers_the_reference_hooks_change_nothing(tmp_path: Path) -> None:
    params = replace(WORKER, kv_cache_tokens=40_000)
    requests = requests_with_prefixes(
        qps=20, duration_s=20, prompt=1000, output=100, groups=40, prefix=600, seed=3,
    )
    summary, done, hits = run_engine(
        requests, tmp_path, workers=2, duration_s=20, params=params, tiers=[], block_tokens=32,
    )
    check_agreement(summary, done, hits, simulate_prefix(
        requests, workers=2, params=params, duration_s=20, block_tokens=32))
    ref = simulate_tiers(requests, workers=2, params=params, duration_s=20, block_tokens=32, tiers=[])
    check_agreement(summary, done, hits, ref.prefix)
    assert summary.per_model["m"].kv_tiers == {}
