"""Disaggregated serving under faults and overload: stranded KV, a lost decode worker,
an undersized decode pool backing up into the prefill pool, and the frames that show it."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from emulator import Engine
from emulator.scenario.presets import load_preset
from emulator.sim.workers.disaggregated import HELD, LANDED, MOVING, QUEUED, DisaggregatedWorkers

BASE = load_preset("disagg-decode-undersized").with_overrides(
    ["duration_s=120", 'client.timeout_s="none"']
)


def _workers(engine: Engine) -> DisaggregatedWorkers:
    wm = engine.worker_models["continuous"]
    assert isinstance(wm, DisaggregatedWorkers)
    return wm


def _lost_after(engine: Engine, act: Callable[[], None]) -> int:
    router = engine.disp[0]
    before = router.frame.lost + router.total.lost
    act()
    return router.frame.lost + router.total.lost - before


def test_a_dead_prefill_worker_strands_the_kv_it_held_for_transfer() -> None:
    engine = Engine(BASE)
    engine.advance_to(60.0)
    wm = _workers(engine)
    held = {mv for mv in wm.moves.values() if mv.src.index == 0 and mv.ps.at == HELD}
    at_worker = len(wm.workers[0].running) + len(wm.workers[0].waiting)
    assert len(held) > 5  # the decode worker is full: handoffs wait with their KV held
    lost = _lost_after(engine, lambda: engine.inject("kill worker:chat:0"))
    assert lost == len(held) + at_worker
    assert wm.pools[0].stranded == len(held)
    assert all(mv.src.index != 0 for mv in wm.moves.values() if mv.ps.at == HELD)
    frames = engine.advance_to(61.0)
    assert frames[0].m["stranded"] == [len(held)]
    summary = engine.run()
    assert summary.per_model["chat"].pools["stranded"] == len(held)
    assert summary.balanced()


def test_a_dead_decode_worker_loses_its_requests_and_frees_the_prefill_workers_kv() -> None:
    engine = Engine(BASE)
    engine.advance_to(60.0)
    wm = _workers(engine)
    decode = wm.workers[3]
    routed = {mv for mv in wm.moves.values() if mv.dst is decode and mv.ds.at in (QUEUED, MOVING, LANDED)}
    present = len(decode.running) + len(decode.waiting) + len(routed)
    held_kv = sum(mv.ps.kv for mv in routed if mv.ps.at == HELD)
    kv_before = sum(wm.workers[w].kv_prefill for w in (0, 1, 2))
    assert routed and held_kv > 0
    lost = _lost_after(engine, lambda: engine.inject("kill worker:chat:3"))
    assert lost == present
    assert sum(wm.workers[w].kv_prefill for w in (0, 1, 2)) == kv_before - held_kv
    assert wm.pools[0].stranded == 0
    assert not wm.moves or all(mv.dst is not decode for mv in wm.moves.values())
    # Until the health check the prefill workers keep handing off to the dead worker.
    engine.advance_to(62.0)
    assert wm.pools[0].handoffs_lost > 0
    summary = engine.run()
    assert summary.balanced()
    assert summary.per_model["chat"].pools["handoffs_lost"] == wm.pools[0].handoffs_lost


def _frames(overrides: list[str]) -> list:
    engine = Engine(BASE.with_overrides(["duration_s=240", *overrides]))
    return engine.advance_to(engine.duration_s)


def test_an_undersized_decode_pool_backs_up_into_the_prefill_pool() -> None:
    small, large = _frames([]), _frames(["hosts[1].count=3"])

    def series(frames: list, key: str) -> np.ndarray:
        return np.array([f.m[key][0] for f in frames], dtype=float)

    # One decode worker: handoffs wait for its KV while the prefill workers hold theirs;
    # once the prefill caches are full of it, the prefill queues and TTFT grow too.
    waiting = series(small, "handoffs_waiting")
    assert waiting[:20].max() <= 2 and waiting[-30:].min() > 200  # (2: for a step start)
    assert series(small, "kv_used")[-1] > 0.95
    assert series(small, "prefill_backlog")[-1] - waiting[-1] > 100  # prefill queues
    assert np.nanmedian(series(small, "prefill_ttft_p50_s")[-30:]) > 5.0
    assert np.nanmedian(series(small, "decode_ttft_p50_s")[-30:]) > 10.0
    # Three decode workers: no backlog, and the prefill pool's TTFT is one prefill.
    assert series(large, "prefill_backlog")[-30:].max() <= 5
    assert np.nanmedian(series(large, "prefill_ttft_p50_s")[-30:]) < 0.2
    assert np.nanmedian(series(large, "decode_ttft_p50_s")[-30:]) < 0.1
    assert series(large, "kv_transfers").max() >= 1


def test_the_decider_sends_short_prompts_straight_to_the_decode_pool() -> None:
    s = Engine(BASE.with_overrides(["models.chat.disaggregated.decider_threshold_tokens=1000000",
                                    "duration_s=20", "hosts[1].count=3"])).run()
    pools = s.per_model["chat"].pools
    assert pools["transfers"] == 0 and pools["prefill_ttft_s"]["p50"] is None
    assert pools["skipped_prefill"] == s.offered - s.per_model["chat"].shed_oversized > 200
    assert s.ok > 200 and s.balanced()


def test_a_mixed_fleet_gives_pool_figures_to_the_split_model_only() -> None:
    data = BASE.to_dict()
    data["models"]["chat"]["share"] = 0.7
    data["models"]["plain"] = {"share": 0.3, "worker_units": 4, "tokens": 500, "output_tokens": 50}
    data["hosts"].append({"count": 1, "units": 4, "workers": ["plain@0"]})
    data["duration_s"] = 20
    engine = Engine(BASE.from_dict(data, max_requests=None))
    frames = engine.advance_to(20.0)
    assert frames[-1].m["kv_transfers"][1] is None and frames[-1].m["stranded"][1] is None
    assert frames[-1].m["stranded"][0] == 0
    s = engine.summary()
    assert s.per_model["plain"].pools == {} and s.per_model["plain"].ok > 50
    assert s.per_model["chat"].pools["transfers"] > 100
    assert s.balanced()


def _check_kv(wm: DisaggregatedWorkers) -> int:
    """Every worker's KV books agree with the requests it holds; returns how many
    handoffs are under way."""
    moves = list(dict.fromkeys(wm.moves.values()))
    for wk in wm.workers.values():
        if wm.fleet.state[wk.index] == 2:  # dead: holds nothing
            assert wk.kv_prefill == 0 and not wk.incoming and not wk.landed
            assert not [mv for mv in moves if (mv.src is wk and mv.ps.at == HELD)
                        or (mv.dst is wk and mv.ds.at in (QUEUED, MOVING, LANDED))]
            continue
        held = sum(mv.ps.kv for mv in moves if mv.src is wk and mv.ps.at == HELD)
        reserved = [mv.ds for mv in moves if mv.dst is wk and mv.ds.at in (MOVING, LANDED)]
        assert wk.kv_prefill == sum(s.kv for s in wk.prefilling) + held + sum(s.kv for s in reserved)
        assert wm.handoffs.reserved.get(wk.index, 0) == sum(1 for s in reserved if s.at == MOVING)
        assert [s for s in reserved if s.at == LANDED] == wk.landed
        assert {id(mv.ds) for mv in moves if mv.dst is wk and mv.ds.at == QUEUED} == {
            id(s) for s in wk.incoming}
        assert wk.kv_used() <= wk.spec.kv_cache_tokens
    return len(moves)


def test_timeouts_retries_and_faults_keep_every_workers_kv_books_exact() -> None:
    scenario = BASE.with_overrides([
        "client.timeout_s=8", "client.retries=1", "duration_s=90",
        "models.chat.disaggregated.kv_transfer_gb_s=4",  # slow: transfers queue on the link
        'faults=[{at_s=30, kill="worker:chat:0"}, {at_s=38, restore="worker:chat:0"}, '
        '{at_s=50, kill="worker:chat:3"}, {at_s=56, restore="worker:chat:3"}, '
        '{at_s=70, kill="host:1"}, {at_s=75, restore="host:1"}]',
    ])
    engine = Engine(scenario)
    wm = _workers(engine)
    in_flight = []
    while not engine.done:
        engine.advance_to(engine.now_s + 0.25)
        in_flight.append(_check_kv(wm))
    summary = engine.summary()
    assert max(in_flight) > 50  # the checks saw handoffs in every state, not an idle fleet
    assert summary.timed_out > 100 and summary.lost > 10 and summary.retried > 100
    assert summary.per_model["chat"].pools["stranded"] > 0
    assert summary.balanced()


def test_a_statically_batching_model_runs_beside_a_split_one() -> None:
    data = BASE.to_dict()
    data["models"]["chat"]["share"] = 0.5
    data["models"]["stat"] = {"share": 0.5, "worker_units": 1, "tokens": 500,
                              "worker": {"batching": "static"}}
    data["hosts"].append({"count": 2, "units": 4, "workers": ["stat@0", "stat@1"]})
    data["duration_s"] = 30
    engine = Engine(BASE.from_dict(data, max_requests=None))
    frames = engine.advance_to(30.0)
    s = engine.summary()
    assert frames[-1].m["stranded"] == [0, None] and frames[-1].m["prefill_backlog"][1] is None
    assert s.per_model["stat"].ok > 100 and s.per_model["chat"].pools["transfers"] > 100
    assert s.balanced()


def test_a_split_run_is_a_pure_function_of_scenario_and_seed() -> None:
    import json

    scenario = BASE.with_overrides(["duration_s=40", 'faults=[{at_s=20, kill="worker:chat:1"}]'])
    first, second = (
        [json.dumps(f.to_dict(), sort_keys=True) for f in Engine(scenario).advance_to(40.0)]
        for _ in range(2)
    )
    assert first == second and len(first) == 40
    other = [json.dumps(f.to_dict(), sort_keys=True) for f in Engine(scenario, seed=2).advance_to(40.0)]
    assert other != first
