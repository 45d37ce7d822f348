"""Drawn split fleets (pool sizes, each pool's policy and waiting bound, prefix caches,
KV sizes, the decider's rules, client timeouts) and drawn request streams: the engine against the step-by-step
reference (``disagg_reference.py``), request by request.

A longer run: ``DISAGG_EXAMPLES=2000 python -m pytest tests/emulator/sim/test_disagg_property.py``.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from disagg_scenarios import run_both
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prefix_reference import PrefixRequest
from token_scenarios import WORKER

EXAMPLES = int(os.environ.get("DISAGG_EXAMPLES", "40"))


@st.composite
def cases(draw: st.DrawFn) -> dict:
    cache = draw(st.booleans())
    threshold = draw(st.sampled_from([0, 200, 800]))
    pushing = ["round_robin", "least_loaded", "prefix_aware", "weighted"]
    policy = draw(st.sampled_from(pushing))
    # Each pool its own policy (pull only in front of the prefill pool) and bound, or
    # the dispatcher's for both.
    pools: dict = {}
    if draw(st.booleans()):
        pools["prefill"] = {"policy": draw(st.sampled_from([*pushing, "pull"])),
                            "queue_limit": draw(st.sampled_from([0, 2, 5]))}
        pools["decode"] = {"policy": draw(st.sampled_from(pushing))}
        if threshold:  # (a decode pool's bound needs arrivals routed there)
            pools["decode"]["queue_limit"] = draw(st.sampled_from([0, 2]))
    pulled = pools.get("prefill", {}).get("policy") == "pull"
    decider = "uncached" if cache and threshold and not pulled and draw(st.booleans()) else "prompt"
    weighted = "weighted" in (policy, *(t["policy"] for t in pools.values()))
    n = draw(st.integers(4, 40))
    gaps = draw(st.lists(st.floats(0.001, 1.5, allow_nan=False), min_size=n, max_size=n))
    groups = draw(st.integers(0, 4))
    requests, t = [], 0.0  # (a trace replays from its first arrival: the first is at 0)
    for k, gap in enumerate(gaps):
        t += gap if k else 0.0
        prompt = draw(st.integers(20, 3000))
        output = draw(st.integers(1, 200))
        group = draw(st.integers(-1, groups - 1)) if groups else -1
        prefix = draw(st.integers(1, prompt)) if group >= 0 else 0
        requests.append(PrefixRequest(round(t, 6), prompt, output, group, prefix))
    return {
        "requests": requests,
        "prefill": draw(st.integers(1, 3)),
        "decode": draw(st.integers(1, 3)),
        "policy": "weighted" if weighted else policy,  # (the scorers are the dispatcher's)
        "pools": pools,
        "scorers": draw(st.sampled_from([None, {"prefix": 1.0, "kv_free": 1.0}, {"queue": 1.0, "kv_free": 2.0},
                                         {"running": 1.0, "prefix": 2.0}]))
        if weighted else None,
        "params": replace(WORKER, kv_cache_tokens=draw(st.sampled_from([4000, 9000, 40_000])),
                          max_num_seqs=draw(st.sampled_from([2, 8, 256]))),
        "gb_s": draw(st.sampled_from([2.0, 50.0])),
        "threshold": threshold,
        "cache": cache,
        "block_tokens": draw(st.sampled_from([16, 64])),
        "decider": decider,
        "max_prefill_queue": draw(st.sampled_from([0, 0, 2, 5])),
        "timeout_s": draw(st.sampled_from([None, None, 1.5, 6.0])),
    }


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_drawn_split_fleets_agree_with_the_reference(case: dict) -> None:
    keys = {k: v for k, v in case.items() if k != "requests"}
    with tempfile.TemporaryDirectory() as tmp:
        engine, done, ref = run_both(case["requests"], Path(tmp), duration_s=60, **keys)
    s = engine.summary()
    assert s.ok == ref.count("ok")
    assert s.timed_out == ref.count("timed_out")
    assert s.shed == ref.count("shed")
    assert s.shed_queue_full == ref.sheds
    assert s.preemptions == ref.preemptions
    finished = [(i, r) for i, r in enumerate(ref.records) if r.done_s is not None]
    assert sorted(done) == [i for i, _ in finished]
    for i, r in finished:
        assert done[i][0] == pytest.approx(r.first_token_s, abs=1e-9), i
        assert done[i][1] == pytest.approx(r.done_s, abs=1e-9), i
    pools = s.per_model["m"].pools
    assert (pools["transfers"], pools["skipped_prefill"]) == (ref.transfers, ref.skipped)
    assert (s.prefix_tokens_seen, s.prefill_tokens_saved) == (ref.seen, ref.hit)
