"""The engine's shared KV tier (``worker.kv_tiers`` with ``shared = true``: one store
for a pool's workers) against the step-by-step reference (``tier_reference.py``),
request by request; and an exact case: a document one worker evicted is loaded by
another from the shared store at exactly that tier's cost."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from prefix_reference import PrefixRequest
from test_kv_tiers import BYTES_PER_TOKEN, assert_matches_tier_reference, run_engine
from test_prefix_reference import requests_with_prefixes
from tier_reference import TierParams
from token_scenarios import WORKER


def _tier(name: str, tokens: int, gb_s: float, shared: bool) -> tuple[dict[str, Any], TierParams]:
    return (
        {"name": name, "capacity_tokens": tokens, "bandwidth_gb_s": gb_s, "shared": shared},
        TierParams(name, tokens, BYTES_PER_TOKEN / (gb_s * 1e9), shared),
    )


@pytest.mark.parametrize(
    ("policy", "workers", "levels"),
    [
        ("round_robin", 3, [("remote", 40_000, 10.0, True)]),
        ("prefix_aware", 3, [("remote", 40_000, 10.0, True)]),
        ("round_robin", 2, [("cpu", 12_000, 25.0, False), ("remote", 30_000, 5.0, True)]),
        ("pull", 3, [("cpu", 8_000, 25.0, False), ("ssd", 10_000, 8.0, True),
                     ("remote", 20_000, 2.0, True)]),
    ],
)
def test_it_agrees_with_the_reference_request_by_request(
    tmp_path: Path, policy: str, workers: int, levels: list[tuple[str, int, float, bool]]
) -> None:
    # 40,000-token GPU caches under 80 groups of 600-token prefixes: blocks one worker
    # evicts into the shared store are loaded by the others, and pushed out of it.
    params = replace(WORKER, kv_cache_tokens=40_000, kv_token_s=2e-8, prefill_attn_s=1e-9)
    requests = requests_with_prefixes(
        qps=40, duration_s=40, prompt=1000, output=300, groups=80, prefix=600,
        zipf_s=0.8, prompt_cv=0.6, output_cv=1.0, seed=11,
    )
    pairs = [_tier(*lv) for lv in levels]
    assert_matches_tier_reference(requests, tmp_path, workers, params, policy, pairs)


def test_a_private_tier_in_its_place_serves_fewer_hits(tmp_path: Path) -> None:
    # The same store split into per-worker tiers of a third each: a worker finds only
    # what it evicted itself.
    params = replace(WORKER, kv_cache_tokens=40_000, kv_token_s=2e-8, prefill_attn_s=1e-9)
    requests = requests_with_prefixes(
        qps=40, duration_s=40, prompt=1000, output=300, groups=80, prefix=600,
        zipf_s=0.8, prompt_cv=0.6, output_cv=1.0, seed=11,
    )
    loaded = {}
    for shared, tokens in ((True, 60_000), (False, 20_000)):
        summary, *_ = run_engine(
            requests, tmp_path, workers=3, duration_s=40, params=params, policy="round_robin",
            tiers=[_tier("remote", tokens, 10.0, shared)[0]], block_tokens=32,
        )
        loaded[shared] = summary.per_model["m"].kv_tiers["remote"]["hit_tokens"]
    assert loaded[True] > 1.3 * loaded[False] > 0  # (263,520 and 178,656 tokens)


def test_a_document_one_worker_evicted_is_loaded_by_another(tmp_path: Path) -> None:
    # Two workers, round-robin, each KV (5,008 tokens) holding one 5,000-token prompt.
    # Worker 0 serves group 0, then group 1, whose admission evicts group 0's 4,000
    # prefix tokens into the shared store; worker 1 serves group 2, then group 0: it
    # has never seen group 0, and loads its prefix from the store.
    params = replace(WORKER, kv_cache_tokens=5_008, max_batched_tokens=8192)
    prompt, prefix, out = 5000, 4000, 2
    requests = [
        PrefixRequest(0.0, prompt, out, 0, prefix),   # worker 0
        PrefixRequest(5.0, prompt, out, 2, prefix),   # worker 1
        PrefixRequest(10.0, prompt, out, 1, prefix),  # worker 0: group 0 goes to the store
        PrefixRequest(20.0, prompt, out, 0, prefix),  # worker 1: loads group 0
    ]
    gb_s = 8.0
    tier = {"name": "remote", "capacity_tokens": 100_000, "bandwidth_gb_s": gb_s, "shared": True}
    summary, done, hits = run_engine(
        requests, tmp_path, workers=2, duration_s=30, params=params, tiers=[tier],
    )
    load_s = prefix * BYTES_PER_TOKEN / (gb_s * 1e9)  # 0.16384 s
    p = params

    def step(c: int, start: int) -> float:  # a lone prefill step of c tokens
        return p.step_base_s + p.prefill_token_s * c + p.prefill_attn_s * c * (start + c)

    for i, at in enumerate((0.0, 5.0, 10.0)):
        assert done[i][0] - at == pytest.approx(step(prompt, 0), abs=1e-9)
    assert done[3][0] - 20.0 == pytest.approx(load_s + step(prompt - prefix, prefix), abs=1e-9)
    assert hits == {0: 0, 1: 0, 2: 0, 3: 0}  # no GPU cache held its group
    tiers = summary.per_model["m"].kv_tiers
    assert tiers["remote"] == {"hit_tokens": prefix, "load_s": pytest.approx(load_s),
                               "hit_rate": prefix / (4 * prefix), "shared_by": 2}
    # With a private tier of the same size, worker 1 finds nothing: it prefills again.
    private = {**tier, "shared": False}
    _, done, _ = run_engine(requests, tmp_path, workers=2, duration_s=30, params=params, tiers=[private])
    assert done[3][0] - 20.0 == pytest.approx(step(prompt, 0), abs=1e-9)
