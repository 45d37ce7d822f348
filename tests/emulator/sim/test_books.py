"""The conservation law: offered = ok + timed_out + shed + lost + orphaned + in_system_end,
for the fleet and every model, on every preset and on random valid scenarios (static and
continuous batching, alone and mixed in one fleet)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scenarios import shortened

from emulator import Engine, Frame, Scenario
from emulator.scenario.presets import PRESETS, load_preset

# Long presets are cut short here; their full runs belong to the CLI and the benchmark.
SHORT = {
    "peak-sized": 15,
    "doc-as-written": 300,
    "low-traffic-no-close": 600,
    "round-robin-vs-pull": 120,
    "dispatcher-failover": 180,
    "host-loss": 200,
    "retry-storm": 300,
    "continuous-comfortable": 60,
    "kv-preemption-storm": 60,
    "roofline-70b-h100": 60,
    "spec-eagle-70b-h100": 60,
    "prefix-heavy-chat": 60,
    "autoscaled-diurnal": 3600,
    "disagg-decode-undersized": 120,
    "pd-prefix-aware": 150,
    "pd-long-prompt-admission": 60,
    "pd-slo-admission": 120,
    "mooncake-dram-tier": 120,
    "deepseek-v3-h200": 120,
    "mooncake-shared-pool": 120,
    "disagg-planner-ramp": 300,
    "prefix-router-estimated": 120,
    "dynamo-planner-ramp": 300,
    "planner-seasonal-diurnal": 900,
    "mooncake-long-context-pipeline": 120,
}


def _assert_books(engine: Engine, frames: list[Frame] | None = None) -> None:
    frames = (frames or []) + engine.advance_to(engine.duration_s)
    summary = engine.summary()
    assert summary.balanced(), summary.to_dict()
    for name, model in summary.per_model.items():
        assert model.balanced(), name
    for key in ("offered", "ok", "shed", "lost", "timed_out", "orphaned"):
        assert sum(sum(f.m[key]) for f in frames) == getattr(summary, key), key
    last = frames[-1].m
    present = (
        "queue_depth", "backlog", "in_service", "waiting", "running", "kv_transfers",
        "handoffs_waiting",
    )
    in_system_now = sum(v or 0 for key in present for v in last.get(key, []))
    # Requests physically present include those already counted as timed out.
    assert summary.in_system_end <= in_system_now


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_balances_its_books(name: str) -> None:
    _assert_books(Engine(shortened(load_preset(name), SHORT[name])))


@st.composite
def scenarios(draw: Any) -> Scenario:
    n_models = draw(st.integers(1, 2))
    names = ["a", "b"][:n_models]
    share_a = draw(st.sampled_from([1.0, 0.5, 0.3])) if n_models == 2 else 1.0
    models = {
        name: {
            "share": share_a if i == 0 else round(1 - share_a, 6),
            "worker_units": draw(st.sampled_from([2, 5])),
            "tokens": draw(st.sampled_from([200, 500, 1000])),
            "tokens_cv": draw(st.sampled_from([0.0, 0.0, 0.5, 1.2])),
        }
        for i, name in enumerate(names)
    }
    on_gpus = draw(st.booleans())  # a [hardware] table, so models may use the roofline
    for name in names:
        if draw(st.booleans()):  # this model batches continuously
            models[name]["output_tokens"] = draw(st.sampled_from([1, 8, 50]))
            models[name]["output_tokens_cv"] = draw(st.sampled_from([0.0, 0.8]))
            models[name]["worker"] = {
                "batching": "continuous",
                "max_num_seqs": draw(st.sampled_from([4, 64])),
                "max_batched_tokens": draw(st.sampled_from([512, 8192])),
                "kv_cache_tokens": draw(st.sampled_from([3000, 20000, 200000])),
                "step_base_s": draw(st.sampled_from([0.005, 0.02])),
                "kv_token_s": draw(st.sampled_from([0.0, 1e-7])),
            }
            if on_gpus and draw(st.booleans()):
                models[name]["arch"] = {"model": "Llama-3-8B"}
                models[name]["worker"].update(
                    step_model="roofline",
                    mbu=draw(st.sampled_from([1.0, 0.4])),
                    mfu=draw(st.sampled_from([1.0, 0.05])),
                )
    hosts = []
    for _ in range(draw(st.integers(1, 3))):
        slots, unit = [], 0
        for name in draw(st.lists(st.sampled_from(names), min_size=1, max_size=3)):
            size = models[name]["worker_units"]
            if unit + size <= 10:
                slots.append(f"{name}@{unit}")
                unit += size
        hosts.append({"count": draw(st.integers(1, 2)), "units": 10, "workers": slots})
    duration = draw(st.sampled_from([5.0, 12.0, 25.0]))
    n_hosts = sum(h["count"] for h in hosts)
    targets = [f"host:{i}" for i in range(n_hosts)] + [f"dispatcher:{n}" for n in names]
    faults = [
        {
            "at_s": draw(st.floats(0, duration)),
            draw(st.sampled_from(["kill", "restore"])): draw(st.sampled_from(targets)),
        }
        for _ in range(draw(st.integers(0, 4)))
    ]
    retries = draw(st.integers(0, 2))
    data: dict[str, Any] = {
        "name": "random",
        "duration_s": duration,
        "seed": draw(st.integers(0, 1000)),
        "sample_s": draw(st.sampled_from([0.5, 1.0, 3.0])),
        "traffic": {
            "qps": draw(st.sampled_from([0.5, 20.0, 150.0, 600.0])),
            "shape": draw(st.sampled_from(["constant", "ramp", "step", "diurnal", "burst"])),
            "peak_qps": draw(st.sampled_from([0.0, 300.0])),
            "ramp_s": 5.0,
            "step_at_s": 4.0,
            "burst_at_s": 2.0,
            "burst_s": 3.0,
            "period_s": 20.0,
        },
        "models": models,
        "dispatcher": {
            "max_batch_tokens": draw(st.sampled_from([2000, 10000])),
            "close_after_s": draw(st.sampled_from(["never", 0.05, 0.5])),
            "policy": draw(st.sampled_from(["round_robin", "pull", "least_loaded"])),
            "queue_limit": draw(st.sampled_from([0, 0, 15, 200])),
            "standby": draw(st.sampled_from(["cold", "replicated"])),
            "failover_s": draw(st.sampled_from([0.0, 1.0, 3.0])),
            "health_check_s": draw(st.sampled_from([0.7, 5.0])),
        },
        "worker": {
            "batch_s": draw(st.sampled_from([0.2, 1.5])),
            "service": draw(st.sampled_from(["constant", "linear", "lognormal"])),
            "service_cv": draw(st.sampled_from([0.0, 0.5])),
        },
        "client": {
            "timeout_s": draw(st.sampled_from(["none", 1.0, 6.0])),
            "retries": retries,
            "retry_backoff_s": draw(st.sampled_from([0.05, 0.3, 1.0])),
        },
        "gateway": {
            "instances": draw(st.integers(1, 3)),
            "rate_limit_qps": draw(st.sampled_from([0.0, 0.0, 5.0, 50.0])),
            "keys": draw(st.sampled_from([1, 3, 50])),
            "shared_counter": draw(st.booleans()),
        },
        "hosts": hosts,
        "faults": faults,
    }
    if on_gpus:
        data["hardware"] = {"gpu": "A100-80GB"}
    for name in names:  # a request must fit in a batch
        models[name]["tokens"] = min(models[name]["tokens"], data["dispatcher"]["max_batch_tokens"])
    if all("worker" in models[n] for n in names):
        # Batch-closing rules do not apply when no model batches statically.
        del data["dispatcher"]["max_batch_tokens"], data["dispatcher"]["close_after_s"]
    return Scenario.from_dict(data)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_random_valid_scenarios_balance_their_books(scenario: Scenario) -> None:
    _assert_books(Engine(scenario))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.floats(0.1, 0.9), st.sampled_from([0.0, 50.0, 400.0]))
def test_live_commands_keep_the_books_balanced(scenario: Scenario, at: float, qps: float) -> None:
    engine = Engine(scenario)
    frames = engine.advance_to(at * scenario.duration_s)
    engine.set_qps(qps)
    engine.inject("kill host:0")
    frames += engine.advance_to(0.95 * scenario.duration_s)
    engine.inject(f"kill dispatcher:{next(iter(scenario.models))}")
    engine.inject("restore host:0")
    _assert_books(engine, frames)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_random_scenarios_round_trip_and_run_the_same_twice(scenario: Scenario) -> None:
    assert Scenario.from_dict(scenario.to_dict()) == scenario

    def run() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        engine = Engine(scenario)
        frames = engine.advance_to(scenario.duration_s / 3) + engine.advance_to(1e9)
        summary = engine.summary().to_dict()
        summary.pop("wall_s")
        return [f.to_dict() for f in frames], summary

    assert run() == run()
