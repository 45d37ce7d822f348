"""The scenario format: loading, round trips, overrides, expansion, presets."""

from __future__ import annotations

import json

import pytest
from scenarios import EXAMPLE, REPO, SHARED_EXAMPLE

from emulator import DEFAULT_REQUEST_BUDGET, Scenario, ScenarioError, load_scenario
from emulator.scenario.presets import PRESETS, load_preset


def test_it_loads_the_shared_example_unchanged_with_its_values() -> None:
    s = load_scenario(EXAMPLE)
    assert s.name == "doc-as-written"
    assert (s.duration_s, s.seed, s.sample_s) == (300, 1, 1.0)
    assert list(s.models) == ["small", "big"]
    assert s.models["big"].worker_units == 5
    assert s.dispatcher.close_after_s is None
    assert s.dispatcher.policy == "round_robin"
    assert s.client.timeout_s == 60
    assert [(f.at_s, f.action, f.target) for f in s.faults] == [
        (120, "kill", "dispatcher:small"),
        (200, "kill", "host:2"),
        (260, "restore", "host:2"),
    ]


def test_it_accepts_a_path_a_string_path_toml_text_and_a_preset_name() -> None:
    by_path = load_scenario(EXAMPLE)
    assert load_scenario(str(EXAMPLE)) == by_path
    assert load_scenario(EXAMPLE.read_text()) == by_path
    assert load_scenario("doc-as-written") == by_path
    assert load_preset("doc-as-written") == by_path


def test_it_round_trips_through_a_json_safe_dict_and_toml() -> None:
    s = load_scenario(EXAMPLE)
    d = s.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["dispatcher"]["close_after_s"] == "never"
    assert d["client"]["timeout_s"] == "none" or d["client"]["timeout_s"] == 60
    assert d["hosts"][1]["workers"][0] == "small@0"
    assert d["faults"][2] == {"at_s": 260, "restore": "host:2"}
    assert Scenario.from_dict(json.loads(json.dumps(d))) == s
    assert load_scenario(s.to_toml()) == s


def test_it_round_trips_every_preset() -> None:
    for name in PRESETS:
        s = load_preset(name)
        assert Scenario.from_dict(s.to_dict()) == s, name
        assert load_scenario(s.to_toml()) == s, name


def test_it_expands_host_groups_in_file_order() -> None:
    hosts = load_scenario(EXAMPLE).expanded_hosts()
    assert [(i, units) for i, units, _ in hosts] == [(0, 10), (1, 10), (2, 10)]
    assert [w.spelling() for w in hosts[0][2]] == ["big@0", "big@5"]
    assert len(hosts[2][2]) == 5


def test_it_applies_overrides_by_dotted_path() -> None:
    s = load_scenario(EXAMPLE).with_overrides(
        [
            "traffic.qps=10000",
            "dispatcher.policy=pull",
            "hosts[0].count=150",
            "dispatcher.close_after_s=0.05",
            "client.timeout_s=none",
            'hosts[1].workers=["small@0", "big@5"]',
            "models.small.tokens_cv=0.3",
        ]
    )
    assert s.traffic.qps == 10000
    assert s.dispatcher.policy == "pull"
    assert s.hosts[0].count == 150
    assert s.dispatcher.close_after_s == 0.05
    assert s.client.timeout_s is None
    assert [w.spelling() for w in s.hosts[1].workers] == ["small@0", "big@5"]
    assert s.models["small"].tokens_cv == 0.3
    assert len(s.expanded_hosts()) == 151


def test_it_fills_added_keys_with_defaults_and_keeps_them_on_round_trip() -> None:
    s = load_scenario(EXAMPLE)
    assert s.dispatcher.health_check_s == 5.0
    assert s.traffic.ramp_s == 60.0
    t = s.with_overrides(["dispatcher.health_check_s=2", "traffic.shape=burst"])
    assert Scenario.from_dict(t.to_dict()).dispatcher.health_check_s == 2


def test_it_lets_callers_choose_the_run_budget() -> None:
    text = EXAMPLE.read_text()
    assert load_scenario(text, max_requests=None).duration_s == 300
    with pytest.raises(ScenarioError) as err:
        load_scenario(text, max_requests=1000)
    assert err.value.path == "duration_s"
    assert DEFAULT_REQUEST_BUDGET >= 6_000_000  # the peak-sized benchmark fits


def test_it_describes_every_preset_in_one_line_and_ships_each() -> None:
    assert set(PRESETS) == {
        "doc-as-written",
        "peak-sized",
        "low-traffic-no-close",
        "round-robin-vs-pull",
        "dispatcher-failover",
        "host-loss",
        "retry-storm",
        "continuous-comfortable",
        "kv-preemption-storm",
        "roofline-70b-h100",
        "spec-eagle-70b-h100",
        "prefix-heavy-chat",
        "autoscaled-diurnal",
        "disagg-decode-undersized",
        "pd-prefix-aware",
        "pd-long-prompt-admission",
        "pd-slo-admission",
        "mooncake-dram-tier",
        "deepseek-v3-h200",
        "mooncake-shared-pool",
        "disagg-planner-ramp",
        "prefix-router-estimated",
        "dynamo-planner-ramp",
        "planner-seasonal-diurnal",
        "mooncake-long-context-pipeline",
    }
    for description in PRESETS.values():
        assert "\n" not in description and description


def test_it_sizes_the_peak_preset_near_750_workers_with_pull_and_a_max_wait() -> None:
    s = load_preset("peak-sized")
    workers = sum(s.worker_count(m) for m in s.models)
    assert 750 <= workers <= 850
    assert s.traffic.qps == 10000
    assert s.dispatcher.policy == "pull"
    assert s.dispatcher.close_after_s is not None


@pytest.mark.skipif(not SHARED_EXAMPLE.exists(), reason="no shared/ folder beside this clone")
def test_it_ships_the_shared_example_as_the_doc_as_written_preset_byte_for_byte() -> None:
    shipped = REPO / "emulator" / "scenario" / "presets" / "doc-as-written.toml"
    assert shipped.read_bytes() == SHARED_EXAMPLE.read_bytes()
