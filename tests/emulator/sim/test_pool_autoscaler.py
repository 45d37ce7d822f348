"""Each pool of a split model scales on its own (``[pools.NAME.autoscaler]``), as a
planner scales prefill and decode separately: every look of each pool's autoscaler
agrees with the step-by-step model of the decisions (``autoscale_reference``), new
workers go on the pool's own hosts, and the books balance."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from autoscale_reference import ReferenceAutoscaler
from disagg_scenarios import pd_data
from token_scenarios import WORKER

from emulator import Engine
from emulator.scenario import Scenario


def _scenario(prefill: dict[str, Any] | None, decode: dict[str, Any] | None) -> Scenario:
    params = replace(WORKER, kv_cache_tokens=80_000, max_num_seqs=16)
    data = pd_data(prefill=2, decode=1, duration_s=240, qps=2.0, prompt=6000, output=120,
                   policy="least_loaded", params=params)
    data["traffic"].update(shape="ramp", peak_qps=16.0, ramp_s=120.0)
    for group in data["hosts"]:
        group["units"] = 4  # room for three more workers on each host of the pool
    data["pools"] = {
        name: {"autoscaler": spec} for name, spec in (("p", prefill), ("d", decode)) if spec
    }
    return Scenario.from_dict(data, max_requests=None)


PREFILL = {"metric": "queue", "target": 2, "min_workers": 1, "max_workers": 6,
           "interval_s": 10, "warmup_s": 15}
DECODE = {"metric": "running", "target": 6, "min_workers": 1, "max_workers": 3,
          "interval_s": 10, "warmup_s": 15, "cooldown_s": 20}


def test_each_pool_scales_by_its_own_rules_on_its_own_hosts() -> None:
    sc = _scenario(PREFILL, DECODE)
    engine = Engine(sc)
    summary = engine.run()
    assert summary.balanced()
    pools_of_host = [g.pool for g in sc.hosts for _ in range(g.count)]
    seen = {}
    for scaler in engine.autoscalers:
        spec = sc.pool(scaler.pool).autoscaler  # type: ignore[union-attr]
        initial = sum(g.count for g in sc.hosts if g.pool == scaler.pool)
        reference = ReferenceAutoscaler.of(spec, initial).run(scaler.samples)
        ups = [e for e in scaler.events if e["direction"] == "up"]
        downs = [e for e in scaler.events if e["direction"] == "down"]
        for got, want in zip(scaler.samples, reference, strict=True):
            where = f"pool {scaler.pool}, look at {got['t_s']}"
            assert (got["active"], got["warming"]) == (want.active, want.warming), where
            assert (got["wanted"], got["desired"], got["action"]) == (want.wanted, want.desired, want.action), where
            assert sum(1 for e in ups if e["t_s"] == got["t_s"]) == want.up, where
            assert sum(1 for e in downs if e["t_s"] == got["t_s"]) == want.down, where
        assert ups, f"pool {scaler.pool} never scaled up"
        assert all(pools_of_host[e["host"]] == scaler.pool for e in ups)
        assert all(engine.fleet.pool[w] == scaler.pool for w in scaler.slots)
        seen[scaler.pool] = summary.pool_autoscale[scaler.pool]
    assert set(seen) == {"p", "d"}
    assert seen["p"]["metric"] == "queue" and seen["d"]["metric"] == "running"
    assert seen["p"]["peak_workers"] > 2 and seen["d"]["peak_workers"] > 1


def test_scaling_one_pool_leaves_the_other_as_it_is() -> None:
    # Never below the two prefill workers it starts with: it can only add capacity.
    engine = Engine(_scenario({**PREFILL, "min_workers": 2}, None))
    summary = engine.run()
    assert [a.pool for a in engine.autoscalers] == ["p"]
    decode = [w for w, p in enumerate(engine.fleet.pool) if p == "d"]
    assert len(decode) == 1  # no spare slot for the decode pool
    assert set(summary.pool_autoscale) == {"p"}
    fixed = Engine(_scenario(None, None)).run()
    # The scaled prefill pool serves the ramp with a shorter time to first token.
    assert summary.ttft_s["p99"] < fixed.ttft_s["p99"]
    assert summary.balanced() and fixed.balanced()


def test_frames_add_the_pools_worker_counts_and_events_name_the_pool() -> None:
    engine = Engine(_scenario(PREFILL, DECODE))
    frames = engine.advance_to(engine.duration_s)
    last = frames[-1].m
    counts = [a.counts() for a in engine.autoscalers]
    assert last["active_workers"] == [sum(c["active"] for c in counts)]
    assert last["parked_workers"] == [sum(c["parked"] for c in counts)]
    events = [e for f in frames for e in f.events if e.startswith("scale up")]
    assert any(": pool p:" in e for e in events) and any(": pool d:" in e for e in events)
    # Worker positions are sent while slots move, spare slots included.
    w = frames[-1].to_dict()["w"]
    assert len(w["host"]) == len(engine.fleet) and w["host"].count(-1) == last["parked_workers"][0]
