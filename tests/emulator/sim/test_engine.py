"""The Engine's interface: advancing, frames, summary, layout, live commands, determinism."""

from __future__ import annotations

import json

import pytest
from scenarios import shortened, single_model

from emulator import Engine, Frame, ScenarioError, Summary
from emulator.scenario.presets import load_preset
from emulator.sim.events import EventQueue

M_KEYS = {
    "offered",
    "ok",
    "shed",
    "lost",
    "timed_out",
    "orphaned",
    "shed_queue_full",
    "shed_oversized",
    "shed_rate_limit",
    "shed_slo_miss",
    "queue_depth",
    "backlog",
    "in_service",
    "busy_workers",
    "alive_workers",
    "p50_s",
    "p90_s",
    "p95_s",
    "p99_s",
    "batch_fill",
}


def _doc(duration_s: float = 300, seed: int | None = None, **overrides: str) -> Engine:
    doc = load_preset("doc-as-written")
    scenario = shortened(doc, duration_s, *(f"{k}={v}" for k, v in overrides.items()))
    return Engine(scenario, seed=seed)


def test_it_gives_identical_frames_and_summary_for_the_same_scenario_and_seed() -> None:
    def run(seed: int | None) -> tuple[str, str]:
        engine = _doc(240, seed=seed)
        frames = engine.advance_to(100.5) + engine.advance_to(1000)
        summary = engine.summary().to_dict()
        summary.pop("wall_s")
        return json.dumps([f.to_dict() for f in frames]), json.dumps(summary)

    assert run(None) == run(None)
    assert run(None) != run(2)


@pytest.mark.parametrize(
    ("overrides", "lane"),
    [
        ({}, True),  # one constant service time: completions in order of time
        ({"models.big.worker.batch_s": "2.5"}, False),  # two: not in order
        ({"worker.service": '"lognormal"', "worker.service_cv": "0.3"}, False),
        ({"worker.service": '"linear"'}, False),
    ],
)
def test_completions_take_the_queue_s_lane_only_when_in_order_with_the_heap_s_results(
    overrides: dict[str, str], lane: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    def run() -> tuple[str, str, object]:
        engine = _doc(400, seed=3, **overrides)  # kills and restores hosts on the way
        frames = engine.advance_to(150.25) + engine.advance_to(1000)
        summary = engine.summary().to_dict()
        summary.pop("wall_s")
        frames_json = json.dumps([f.to_dict() for f in frames])
        return frames_json, json.dumps(summary), engine.queue.lane_kind

    *results, kind = run()
    assert (kind is not None) == lane
    monkeypatch.setattr(EventQueue, "fifo_scheduler", EventQueue.scheduler)  # the heap alone
    *heap_results, heap_kind = run()
    assert heap_kind is None and results == heap_results


def test_it_emits_one_frame_per_sample_and_never_runs_past_the_duration() -> None:
    engine = _doc(10.5, sample_s="2")
    frames = engine.advance_to(3.0)
    assert [f.t_s for f in frames] == [2.0]
    assert engine.now_s == 3.0 and not engine.done
    frames = engine.advance_to(99)
    assert [f.i for f in frames] == [1, 2, 3, 4, 5]
    assert [f.t_s for f in frames] == [4.0, 6.0, 8.0, 10.0, 10.5]
    assert engine.now_s == 10.5 and engine.done
    assert engine.advance_to(200) == []


def test_its_frames_are_compact_json_with_the_agreed_keys() -> None:
    engine = _doc(205)
    frames = engine.advance_to(205)
    d = frames[-1].to_dict()
    assert set(d) == {"i", "t_s", "models", "m", "w", "h", "events"}
    assert set(d["m"]) == M_KEYS
    assert d["models"] == ["small", "big"]
    assert all(len(v) == 2 for v in d["m"].values())
    assert len(d["w"]["state"]) == len(d["w"]["backlog"]) == 9
    assert d["h"]["alive"] == [1, 1, 0]
    assert d["w"]["state"][4:] == [2, 2, 2, 2, 2]  # the small workers of host 2 are dead
    assert frames[199].events == ["kill host:2"]
    assert frames[119].events == ["kill dispatcher:small"]
    assert json.loads(json.dumps(d)) == d
    assert Frame.from_dict(d).to_dict() == d


def test_frame_counts_add_up_to_the_summary() -> None:
    engine = _doc(150)
    frames = engine.advance_to(150)
    summary = engine.summary()
    for key in ("offered", "ok", "shed", "lost", "timed_out", "orphaned"):
        assert sum(sum(f.m[key]) for f in frames) == getattr(summary, key), key


def test_it_describes_the_static_layout() -> None:
    layout = _doc().layout()
    assert layout["models"] == ["small", "big"]
    assert layout["hosts"] == [{"index": i, "units": 10} for i in range(3)]
    assert layout["workers"] == {
        "model": [1, 1, 1, 1, 0, 0, 0, 0, 0],
        "host": [0, 0, 1, 1, 2, 2, 2, 2, 2],
        "first_unit": [0, 5, 0, 5, 0, 2, 4, 6, 8],
        "units": [5, 5, 5, 5, 2, 2, 2, 2, 2],
    }
    assert json.loads(json.dumps(layout)) == layout


def test_its_summary_has_the_agreed_keys_and_round_trips() -> None:
    summary = _doc(30).run()
    d = summary.to_dict()
    for key in (
        "offered",
        "ok",
        "timed_out",
        "shed",
        "lost",
        "orphaned",
        "in_system_end",
        "wasted_batches",
        "served_qps",
        "latency_s",
        "per_model",
        "sim_s",
        "wall_s",
        "events",
    ):
        assert key in d
    assert set(d["latency_s"]) == {"p50", "p90", "p95", "p99", "max", "mean"}
    assert set(d["per_model"]) == {"small", "big"}
    assert d["sim_s"] == 30 and d["events"] > 0
    assert json.loads(json.dumps(d)) == d
    assert Summary.from_dict(d).to_dict() == d


def test_live_commands_apply_at_the_current_time_and_show_in_the_frame() -> None:
    engine = _doc(20)
    engine.advance_to(5.5)
    engine.inject("kill host:0")
    frames = engine.advance_to(7)
    assert frames[0].events == ["kill host:0"]
    assert frames[0].to_dict()["h"]["alive"] == [0, 1, 1]
    engine.inject("restore host:0")
    engine.inject("kill worker:small:3")
    frames = engine.advance_to(8)
    assert frames[0].to_dict()["w"]["state"][7] == 2
    assert frames[0].to_dict()["h"]["alive"] == [1, 1, 1]


@pytest.mark.parametrize(
    "command",
    ["explode host:1", "kill host:9", "kill dispatcher:tiny", "kill worker:big:4", "kill"],
)
def test_it_refuses_commands_it_does_not_understand(command: str) -> None:
    with pytest.raises(ScenarioError):
        _doc().inject(command)


def test_set_qps_changes_the_offered_load_from_now_on() -> None:
    engine = Engine(single_model(qps=100, workers=20, duration_s=60))
    before = engine.advance_to(20.5)
    engine.set_qps(300)
    after = engine.advance_to(60)
    rate_before = sum(f.m["offered"][0] for f in before[:20]) / 20
    rate_after = sum(f.m["offered"][0] for f in after[1:]) / len(after[1:])
    assert abs(rate_before / 100 - 1) < 0.1
    assert abs(rate_after / 300 - 1) < 0.1
    assert after[0].events == ["set qps 300"]
    assert engine.summary().balanced()
    with pytest.raises(ScenarioError):
        engine.set_qps(-1)


@pytest.mark.parametrize("qps", [float("inf"), float("nan"), "10"])
def test_set_qps_refuses_what_is_not_a_finite_rate(qps: object) -> None:
    engine = Engine(single_model(qps=100, workers=20, duration_s=10))
    engine.advance_to(2.5)
    with pytest.raises(ScenarioError):
        engine.set_qps(qps)  # type: ignore[arg-type]


@pytest.mark.parametrize("shape", ["constant", "ramp", "step", "burst", "diurnal"])
def test_traffic_shapes_move_the_offered_rate(shape: str) -> None:
    s = single_model(
        qps=100,
        workers=40,
        duration_s=120,
        traffic={
            "qps": 100,
            "peak_qps": 400,
            "shape": shape,
            "ramp_s": 60,
            "step_at_s": 60,
            "period_s": 240,
            "burst_at_s": 30,
            "burst_s": 10,
        },
    )
    frames = Engine(s).advance_to(120)
    offered = [f.m["offered"][0] for f in frames]
    for a, b in [(0, 10), (30, 40), (55, 65), (100, 120)]:
        measured = sum(offered[a:b]) / (b - a)
        expected = sum(s.traffic.rate_at(a + (k + 0.5) / 100) for k in range(100 * (b - a)))
        expected /= 100 * (b - a)
        assert abs(measured / expected - 1) < 0.1, (a, b, measured, expected)
    if shape != "constant":
        assert max(offered) > 300
