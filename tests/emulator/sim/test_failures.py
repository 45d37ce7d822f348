"""Failures: dispatcher failover (cold vs replicated), host loss in both Part 2 layouts,
worker death under round-robin (health checks) and pull."""

from __future__ import annotations

from scenarios import shortened, single_model

from emulator import Engine
from emulator.scenario.presets import load_preset

RESILIENT = 'hosts=[{count=3, units=10, workers=["big@0", "small@5", "small@7"]}]'
FAULTS_KILL_HOST_2 = 'faults=[{at_s=60.5, kill="host:2"}]'


def _failover(standby: str) -> tuple[Engine, dict[str, list[int]]]:
    """Run the failover preset to 60.25 s, read the state, then kill the small dispatcher."""
    scenario = shortened(
        load_preset("dispatcher-failover"),
        100,
        f"dispatcher.standby={standby}",
        "faults=[]",
        "sample_s=0.05",
    )
    engine = Engine(scenario)
    before = engine.advance_to(60.25)[-1]
    assert before.t_s == 60.25
    engine.inject("kill dispatcher:small")
    return engine, before.m


def test_cold_failover_loses_the_dispatchers_queue_and_orphans_batches_in_flight() -> None:
    engine, at_kill = _failover("cold")
    engine.advance_to(100)
    small = engine.summary().per_model["small"]
    assert at_kill["queue_depth"][0] > 0 and at_kill["in_service"][0] > 0
    assert small.lost == at_kill["queue_depth"][0]
    assert small.orphaned == at_kill["in_service"][0] + at_kill["backlog"][0]
    assert engine.summary().per_model["big"].lost == 0
    assert engine.summary().balanced()


def test_replicated_failover_loses_and_orphans_nothing() -> None:
    engine, _ = _failover("replicated")
    summary = engine.advance_to(100) and engine.summary()
    assert summary.lost == 0 and summary.orphaned == 0
    assert summary.balanced()


def test_failover_stops_dispatching_for_failover_s() -> None:
    engine, _ = _failover("replicated")
    frames = {round(f.t_s, 2): f.m for f in engine.advance_to(70)}
    # Batches in service at 60.25 s finish by 61.75 s; nothing new starts before 63.25 s.
    assert frames[62]["busy_workers"][0] == 0 and frames[62]["ok"][0] == 0
    assert frames[62]["queue_depth"][0] > 0
    assert frames[65]["busy_workers"][0] > 0
    assert frames[62]["busy_workers"][1] > 0  # the big model's dispatcher is unaffected


def test_losing_the_host_with_every_small_worker_stops_the_small_model() -> None:
    scenario = shortened(load_preset("host-loss"), 120, FAULTS_KILL_HOST_2)
    frames = Engine(scenario).advance_to(120)
    after = [f for f in frames if f.t_s > 61]
    assert sum(f.m["ok"][0] for f in after) == 0
    assert sum(f.m["ok"][1] for f in after) > 0
    assert all(f.m["alive_workers"][0] == 0 for f in after)
    assert sum(f.m["ok"][0] for f in frames if f.t_s <= 60) > 0


def test_one_big_and_two_small_on_every_host_keeps_both_models_serving() -> None:
    scenario = shortened(load_preset("host-loss"), 120, FAULTS_KILL_HOST_2, RESILIENT)
    engine = Engine(scenario)
    frames = engine.advance_to(120)
    # Two big workers left for 40 QPS: big is overloaded, but both models keep serving.
    for start in range(65, 90, 5):
        window = [f for f in frames if start < f.t_s <= start + 5]
        assert sum(f.m["ok"][0] for f in window) > 0
        assert sum(f.m["ok"][1] for f in window) > 0
    assert frames[70].m["alive_workers"] == [4, 2]
    assert engine.summary().balanced()


def _rr_worker_death(health_check_s: float) -> dict[int, int]:
    scenario = single_model(
        qps=100,
        workers=10,
        duration_s=40,
        policy="round_robin",
        dispatcher={"health_check_s": health_check_s},
        faults=[{"at_s": 10.2, "kill": "worker:m:0"}],
    )
    return {round(f.t_s): f.m["lost"][0] for f in Engine(scenario).advance_to(40)}


def test_round_robin_keeps_pushing_to_a_dead_worker_until_a_health_check() -> None:
    slow = _rr_worker_death(5.0)
    fast = _rr_worker_death(0.1)
    # One batch in ten (20 requests) goes to the dead worker until the check at 15 s:
    # about two batches, on top of the one it was running.
    assert sum(slow.values()) >= sum(fast.values()) + 2 * 20
    assert sum(fast.values()) <= 2 * 20
    assert sum(slow[t] for t in range(16, 41)) == 0


def test_pull_loses_only_the_batch_the_dead_worker_was_running() -> None:
    scenario = single_model(
        qps=100,
        workers=10,
        duration_s=40,
        policy="pull",
        faults=[{"at_s": 10.2, "kill": "worker:m:0"}],
    )
    summary = Engine(scenario).run()
    assert 0 < summary.lost <= 20


def test_a_restored_host_works_again_but_first_on_requests_whose_clients_left() -> None:
    engine = Engine(shortened(load_preset("host-loss"), 200))
    frames = engine.advance_to(200)
    assert sum(f.m["ok"][0] for f in frames if 62 < f.t_s <= 150) == 0
    after = [f for f in frames if f.t_s > 152]
    assert all(f.m["alive_workers"][0] == 5 and f.m["busy_workers"][0] == 5 for f in after)
    # Pull serves the oldest first: the backlog built while the host was down has
    # passed its 30 s timeout, so the restored workers' batches are wasted.
    assert engine.summary().per_model["small"].wasted_batches > 100
    assert frames[-1].to_dict()["h"]["alive"] == [1, 1, 1]


def test_least_loaded_avoids_a_dead_worker_after_one_push() -> None:
    scenario = single_model(
        qps=100,
        workers=10,
        duration_s=40,
        policy="least_loaded",
        faults=[{"at_s": 10.2, "kill": "worker:m:0"}],
    )
    summary = Engine(scenario).run()
    assert summary.balanced()
    assert summary.lost <= 3 * 20
