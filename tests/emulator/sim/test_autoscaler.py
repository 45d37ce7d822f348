"""The autoscaler in the engine: an analytic warm-up check, agreement with the
step-by-step model of its decisions (``autoscale_reference``), scale-down by parking,
placement on free units, and faults."""

from __future__ import annotations

import math
from typing import Any

import pytest
from autoscale_reference import ReferenceAutoscaler
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emulator import Engine, Scenario
from emulator.scenario import load_scenario
from emulator.sim.results import BUSY, PARKED, WARMING

BASE = """
name = "autoscaled"
duration_s = {duration}
seed = {seed}
sample_s = 1.0

[traffic]
qps = {qps}
shape = "{shape}"
peak_qps = {peak}
step_at_s = {step_at}
period_s = {period}

[models.chat]
share = 1.0
worker_units = 2
tokens = 600
tokens_cv = 0.5
output_tokens = 120
output_tokens_cv = 0.5

[dispatcher]
policy = "{policy}"

[worker]
batching = "continuous"
max_num_seqs = 32
kv_cache_tokens = 60000
step_base_s = 0.006
prefill_token_s = 2.5e-5
decode_seq_s = 1.2e-4

[client]
timeout_s = 60

[autoscaler]
metric = "{metric}"
target = {target}
min_workers = {low}
max_workers = {high}
interval_s = {interval}
warmup_s = {warmup}
cooldown_s = {cooldown}
stabilization_s = {stabilization}

[[hosts]]
count = {hosts}
units = 8
workers = {workers}
"""


def scenario(**changes: Any) -> Scenario:
    """The test fleet: 2-unit chat workers on 8-unit hosts, one worker to start."""
    values: dict[str, Any] = {
        "duration": 600, "seed": 1, "qps": 2, "shape": "step", "peak": 40, "step_at": 120,
        "period": 600, "policy": "round_robin", "metric": "queue", "target": 4, "low": 1,
        "high": 8, "interval": 15, "warmup": 60, "cooldown": 0, "hosts": 3,
        "workers": '["chat@0"]', "stabilization": 0,
    }
    values.update(changes)
    extra = values.pop("extra", "")
    text = BASE.format(**values) + extra
    if values["hosts"] > 1:
        # Only the first host starts with a worker; the others are free units.
        text = text.replace(
            f"[[hosts]]\ncount = {values['hosts']}\nunits = 8\nworkers = {values['workers']}\n",
            f"[[hosts]]\ncount = 1\nunits = 8\nworkers = {values['workers']}\n\n"
            f"[[hosts]]\ncount = {values['hosts'] - 1}\nunits = 8\nworkers = []\n",
        )
    return load_scenario(text)


def run(s: Scenario) -> tuple[Engine, list[Any]]:
    engine = Engine(s)
    frames = engine.advance_to(s.duration_s)
    return engine, frames


def events(engine: Engine, direction: str) -> list[dict[str, Any]]:
    assert engine.autoscaler is not None
    return [e for e in engine.autoscaler.events if e["direction"] == direction]


# -- analytic: a new worker serves exactly warmup_s after the decision -----------------
def test_it_adds_the_first_worker_exactly_warmup_s_after_the_decision() -> None:
    engine, frames = run(scenario(warmup=60))
    first_up = events(engine, "up")[0]
    decided, w = first_up["t_s"], first_up["worker"]
    # The load steps up at 120 s; the first look after it that sees a queue decides.
    assert 120 < decided <= 150
    ready = [e for e in events(engine, "ready") if e["worker"] == w]
    assert ready[0]["t_s"] == decided + 60
    # Frame by frame, the worker warms up (no request) until then and serves after,
    # until it is scaled down again.
    later = [e["t_s"] for e in engine.autoscaler.events if e["worker"] == w and e["t_s"] > ready[0]["t_s"]]  # type: ignore[union-attr]
    until = min(later, default=engine.now_s + 1)
    for f in frames:
        state = int(f.w_state[w])
        if decided <= f.t_s < decided + 60:
            assert state == WARMING, f.t_s
            assert f.w_running[w] == 0
        elif decided + 60 <= f.t_s < until:
            assert state != WARMING and state != PARKED, f.t_s
    served = [f for f in frames if decided + 60 <= f.t_s < until and f.w_running[w]]
    assert served, "the new worker never ran a request"
    i = engine.names.index("chat")
    counts = {f.t_s: (f.m["active_workers"][i], f.m["warming_workers"][i]) for f in frames}
    assert counts[decided + 59][1] >= 1
    assert counts[decided + 59][0] == counts[decided - 1][0]  # not active yet


@pytest.mark.parametrize("warmup", [0, 30, 90])
def test_every_worker_placed_serves_warmup_s_later(warmup: float) -> None:
    engine, _ = run(scenario(warmup=warmup))
    ups = events(engine, "up")
    assert ups
    ready = events(engine, "ready")
    for up in ups:
        if up["t_s"] + warmup <= engine.now_s:
            mine = [e["t_s"] for e in ready if e["worker"] == up["worker"] and e["t_s"] >= up["t_s"]]
            assert mine[0] == up["t_s"] + warmup


# -- agreement with the step-by-step model ----------------------------------------------
AGREEMENT = [
    {"metric": "queue", "target": 4},
    {"metric": "queue", "target": 2, "cooldown": 45, "policy": "pull"},
    {"metric": "running", "target": 12, "policy": "least_loaded"},
    {"metric": "running", "target": 6, "stabilization": 120, "interval": 20, "shape": "diurnal",
     "qps": 1, "peak": 25, "duration": 900},
    {"metric": "running", "target": 20, "cooldown": 30, "warmup": 20, "interval": 10},
    {"metric": "kv", "target": 0.3, "shape": "diurnal", "qps": 1, "peak": 30, "duration": 1200},
    {"metric": "queue", "target": 3, "shape": "diurnal", "qps": 0, "peak": 25, "low": 0,
     "duration": 1200, "warmup": 45, "cooldown": 60},
]


@pytest.mark.parametrize("changes", AGREEMENT, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_it_agrees_with_the_step_by_step_model(changes: dict[str, Any]) -> None:
    s = scenario(**changes)
    engine, _ = run(s)
    scaler = engine.autoscaler
    assert scaler is not None and s.autoscaler is not None
    samples = scaler.samples
    assert len(samples) == math.floor(s.duration_s / s.autoscaler.interval_s)
    reference = ReferenceAutoscaler.of(s.autoscaler, s.worker_count("chat")).run(samples)
    ups = {t: 0 for t in (x["t_s"] for x in samples)}
    downs = dict(ups)
    for e in scaler.events:
        if e["direction"] == "up":
            ups[e["t_s"]] += 1
        elif e["direction"] == "down":
            downs[e["t_s"]] += 1
    actions = set()
    for got, want in zip(samples, reference, strict=True):
        where = f"look at {got['t_s']}"
        assert (got["active"], got["warming"]) == (want.active, want.warming), where
        assert (got["wanted"], got["desired"]) == (want.wanted, want.desired), where
        assert got["action"] == want.action, where
        assert (ups[got["t_s"]], downs[got["t_s"]]) == (want.up, want.down), where
        actions.add(want.action)
    # The cases reach both directions, and the cooldown where one is set.
    assert {"up", "down"} <= actions or changes["metric"] == "kv" and "up" in actions
    if changes.get("cooldown"):
        assert "cooldown" in actions
    if changes.get("stabilization"):
        assert any(x.wanted < x.desired for x in reference), "the window never held a scale-down"
    assert engine.summary().balanced()


def test_the_model_disagrees_with_a_wrong_record() -> None:
    """The agreement test can fail: a recorded decision changed by one worker is caught."""
    s = scenario()
    engine, _ = run(s)
    assert engine.autoscaler is not None and s.autoscaler is not None
    samples = [dict(x) for x in engine.autoscaler.samples]
    k = next(i for i, x in enumerate(samples) if x["action"] == "up")
    samples[k]["load"] = samples[k]["waiting"] = 0  # as if nothing waited then
    reference = ReferenceAutoscaler.of(s.autoscaler, 1).run(samples)
    assert reference[k].up != sum(1 for e in events(engine, "up") if e["t_s"] == samples[k]["t_s"])


# -- scale-down parks a worker once its requests are done --------------------------------
def test_a_worker_scaled_down_takes_no_new_request_and_parks_when_done() -> None:
    s = scenario(shape="burst", qps=2, peak=40, extra="", period=600)
    s = s.replace(traffic=s.traffic.__class__(qps=2, shape="burst", peak_qps=40, burst_at_s=60, burst_s=120))
    engine = Engine(s)
    frames = engine.advance_to(s.duration_s)
    downs = [e for e in events(engine, "down") if "still warming" not in e["reason"]]
    assert downs, "the load fell but nothing scaled down"
    parked = {e["worker"]: e["t_s"] for e in events(engine, "parked")}
    for down in downs:
        w, t = down["worker"], down["t_s"]
        assert w in parked and parked[w] >= t
        # Between the decision and parking its requests only go down: no new ones.
        running = [f.w_running[w] + int(f.w_backlog[w]) for f in frames if t < f.t_s < parked[w]]
        assert running == sorted(running, reverse=True)
        after = [f for f in frames if f.t_s > parked[w] and f.t_s < parked[w] + 30]
        for f in after:
            if int(f.w_state[w]) == PARKED:
                assert f.w_host[w] == -1 and f.w_running[w] == 0
    assert engine.summary().balanced()


def test_it_scales_to_zero_and_wakes_on_a_request() -> None:
    s = scenario(low=0, qps=0, shape="step", peak=3, step_at=200, warmup=30)
    engine, frames = run(s)
    first_down = events(engine, "down")[0]
    assert first_down["t_s"] == 15.0  # idle at the first look: parked
    wake = events(engine, "up")[0]
    assert 200 < wake["t_s"] <= 215
    assert "no active worker" in wake["reason"]
    i = engine.names.index("chat")
    idle = [f for f in frames if 20 <= f.t_s < 200]
    assert all(f.m["active_workers"][i] == 0 for f in idle)
    assert engine.summary().ok > 0
    assert engine.summary().balanced()


# -- placement -----------------------------------------------------------------------
def test_a_new_worker_takes_adjacent_free_units_of_a_live_host() -> None:
    engine, _ = run(scenario())
    fleet = engine.fleet
    for up in events(engine, "up"):
        assert up["host"] >= 0 and 0 <= up["first_unit"] <= 8 - 2
    # No two workers placed at once share a unit.
    taken: set[tuple[int, int]] = set()
    for w in range(len(fleet)):
        if fleet.host[w] >= 0:
            cells = {(int(fleet.host[w]), int(fleet.first_unit[w]) + u) for u in range(int(fleet.units[w]))}
            assert not cells & taken
            taken |= cells


def test_no_free_block_means_no_scale_up_and_says_so() -> None:
    # The only free units are on host 1, which dies before the load steps up.
    s = scenario(
        hosts=2, low=1, high=8, metric="running", target=2, step_at=60,
        workers='["chat@0", "chat@2", "chat@4", "chat@6"]',
        extra='\n[[faults]]\nat_s = 10\nkill = "host:1"\n'
        '\n[[faults]]\nat_s = 300\nrestore = "host:1"\n',
    )
    s = s.replace(autoscaler=s.autoscaler.__class__(**{**s.autoscaler.__dict__, "min_workers": 4}))  # type: ignore[union-attr]
    engine, _ = run(s)
    blocked = events(engine, "blocked")
    assert blocked and all(10 < e["t_s"] < 300 for e in blocked)
    assert "no free block of 2 adjacent units on a live host" in blocked[0]["reason"]
    assert not [e for e in events(engine, "up") if e["t_s"] < 300]
    samples = engine.autoscaler.samples  # type: ignore[union-attr]
    assert [x["action"] for x in samples if 60 < x["t_s"] < 300 and x["desired"] > 4] == [
        "blocked" for x in samples if 60 < x["t_s"] < 300 and x["desired"] > 4
    ]
    # Once host 1 is back, its units take the new workers.
    later = [e for e in events(engine, "up") if e["t_s"] >= 300]
    assert later and all(e["host"] == 1 for e in later)


# -- faults ----------------------------------------------------------------------------
def test_a_host_lost_while_scaled_up_is_replaced_on_free_units_elsewhere() -> None:
    s = scenario(hosts=4, high=6, extra='\n[[faults]]\nat_s = 400\nkill = "host:1"\n')
    engine, frames = run(s)
    before = [e for e in events(engine, "ready") if e["t_s"] < 400]
    lost = [e for e in before if e["host"] == 1]
    assert lost, "nothing was serving on host 1 when it died"
    i = engine.names.index("chat")
    after_ups = [e for e in events(engine, "up") if e["t_s"] > 400]
    assert after_ups, "the lost capacity was not replaced"
    assert all(e["host"] != 1 for e in after_ups)
    # The look right after the loss counts fewer workers and scales up.
    look = next(x for x in engine.autoscaler.samples if x["t_s"] > 400)  # type: ignore[union-attr]
    at_loss = next(f for f in frames if f.t_s == 399)
    on_host = [w for w, h in enumerate(at_loss.w_host) if h == 1 and int(at_loss.w_state[w]) != PARKED]
    assert on_host and look["dead"] == len(on_host)
    final = frames[-1]
    assert final.m["active_workers"][i] >= 1
    assert engine.summary().balanced()


def test_a_worker_dying_while_warming_up_loads_again_when_restored() -> None:
    s = scenario(hosts=2, high=4)
    probe, _ = run(s)
    up = events(probe, "up")[0]
    host, t = up["host"], up["t_s"]
    faulted = scenario(
        hosts=2, high=4,
        extra=f'\n[[faults]]\nat_s = {t + 3}\nkill = "host:{host}"\n'
        f'\n[[faults]]\nat_s = {t + 6}\nrestore = "host:{host}"\n',
    )
    engine, _ = run(faulted)
    w = up["worker"]
    mine = [e for e in engine.autoscaler.events if e["worker"] == w]  # type: ignore[union-attr]
    kinds = [e["direction"] for e in mine]
    assert kinds[:4] == ["up", "lost", "rewarm", "ready"]
    assert mine[3]["t_s"] == t + 6 + 60  # warm-up starts again at the restore
    assert engine.summary().balanced()


def test_frames_and_summary_report_the_autoscaler() -> None:
    engine, frames = run(scenario())
    f = frames[-1].to_dict()
    for key in ("active_workers", "warming_workers", "draining_workers", "parked_workers"):
        assert key in f["m"]
    assert len(f["w"]["host"]) == len(engine.fleet)
    assert any(e.startswith("scale up chat worker") for fr in frames for e in fr.events)
    summary = engine.summary().to_dict()
    auto = summary["autoscale"]
    assert auto["model"] == "chat" and auto["scaled_up"] == len(events(engine, "up"))
    c = auto["workers_end"]
    assert sum(c.values()) == 8  # every slot up to max_workers is in exactly one state
    assert 0 < auto["worker_s"] <= 8 * 600
    assert auto["peak_workers"] >= c["active"]


def test_busy_state_is_kept_for_serving_workers() -> None:
    engine, frames = run(scenario())
    states = {int(s) for f in frames for s in f.w_state}
    assert BUSY in states and WARMING in states


def test_a_run_is_a_pure_function_of_scenario_and_seed() -> None:
    a, _ = run(scenario(metric="kv", target=0.3))
    b, _ = run(scenario(metric="kv", target=0.3))
    assert a.autoscaler.events == b.autoscaler.events  # type: ignore[union-attr]
    assert a.summary().to_dict()["ok"] == b.summary().to_dict()["ok"]


def test_workers_lost_with_their_host_are_recreated_elsewhere_and_not_brought_back() -> None:
    # Every slot is in use on host 0 when it dies; host 1 is free.
    s = scenario(
        hosts=2, high=4, metric="running", target=2, step_at=30,
        extra='\n[[faults]]\nat_s = 200\nkill = "host:0"\n'
        '\n[[faults]]\nat_s = 400\nrestore = "host:0"\n',
    )
    engine, frames = run(s)
    before = [e for e in events(engine, "up") if e["t_s"] < 200]
    assert before and all(e["host"] == 0 for e in before)
    moved = [e for e in events(engine, "up") if 200 < e["t_s"] < 400]
    assert moved and all(e["host"] == 1 and "lost with host 0" in e["reason"] for e in moved)
    for f in frames:
        placed = [w for w, h in enumerate(f.w_host) if h >= 0]
        assert len(placed) <= 4, f.t_s  # never more workers than slots
    # The moved workers stay on host 1 after host 0 comes back.
    at_end = frames[-1]
    for e in moved:
        assert at_end.w_host[e["worker"]] in (1, -1)
    assert engine.summary().balanced()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    metric=st.sampled_from(["queue", "kv", "running"]),
    policy=st.sampled_from(["round_robin", "pull", "least_loaded"]),
    interval=st.sampled_from([5, 10, 15]),
    warmup=st.sampled_from([0, 12.5, 40]),
    cooldown=st.sampled_from([0, 20]),
    stabilization=st.sampled_from([0, 30]),
    low=st.integers(0, 1),
    shape=st.sampled_from(["step", "diurnal"]),
    seed=st.integers(0, 50),
)
def test_random_autoscaled_runs_agree_with_the_model_and_balance_their_books(
    metric: str, policy: str, interval: float, warmup: float, cooldown: float,
    stabilization: float, low: int, shape: str, seed: int,
) -> None:
    target = {"queue": 3, "kv": 0.2, "running": 8}[metric]
    s = scenario(
        metric=metric, target=target, policy=policy, interval=interval, warmup=warmup,
        cooldown=cooldown, stabilization=stabilization, low=low, shape=shape, seed=seed,
        duration=240, step_at=60, period=240, qps=1, peak=30,
    )
    engine, _ = run(s)
    assert engine.summary().balanced()
    scaler = engine.autoscaler
    assert scaler is not None and s.autoscaler is not None
    reference = ReferenceAutoscaler.of(s.autoscaler, 1).run(scaler.samples)
    for got, want in zip(scaler.samples, reference, strict=True):
        assert (got["active"], got["warming"], got["desired"], got["action"]) == (
            want.active, want.warming, want.desired, want.action,
        ), got["t_s"]
