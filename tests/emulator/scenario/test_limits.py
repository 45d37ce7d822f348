"""Bounds on the sizes a scenario's author controls: nesting depth in TOML, dicts and overrides."""

from __future__ import annotations

import pytest

from emulator.scenario import Scenario, ScenarioError, load_scenario
from emulator.scenario.limits import MAX_NESTING, check_nesting, loads_toml
from emulator.scenario.overrides import apply_overrides


def test_it_refuses_toml_nested_900_deep_with_a_scenario_error():
    with pytest.raises(ScenarioError, match=f"more than {MAX_NESTING} deep"):
        loads_toml("x = " + "[" * 900 + "]" * 900)


def test_load_scenario_refuses_toml_nested_900_deep():
    with pytest.raises(ScenarioError, match="deep"):
        load_scenario("x = " + "[" * 900 + "]" * 900 + "\n")


def test_it_names_the_key_path_of_a_value_nested_too_deep():
    value: object = 1
    for _ in range(MAX_NESTING + 2):
        value = [value]
    with pytest.raises(ScenarioError) as caught:
        check_nesting({"traffic": {"qps": value}})
    assert caught.value.path.startswith("traffic.qps[0]")


def test_a_dict_nested_thousands_deep_is_refused_not_a_crash():
    value: object = 1
    for _ in range(50_000):
        value = {"a": value}
    with pytest.raises(ScenarioError, match="deep"):
        Scenario.from_dict({"name": "deep", "traffic": value})


def test_an_override_nested_too_deep_is_a_scenario_error():
    with pytest.raises(ScenarioError, match="too deep"):
        apply_overrides({"traffic": {}}, ["traffic.qps=" + "[" * 5000 + "]" * 5000])


def test_a_preset_nests_within_the_bound():
    check_nesting(load_scenario("doc-as-written").to_dict())


@pytest.mark.parametrize(
    ("override", "key", "message"),
    [
        ("hosts[0].units=1000000000", "hosts[0].units", "over the limit of 128"),
        ("models.small.worker_units=1000000000", "models.small.worker_units", "over the limit of 128"),
        ("models.small.tokens=100000000000", "models.small.tokens", "over the limit of 10,000,000"),
        ("models.small.output_tokens=100000000000", "models.small.output_tokens", "over the limit"),
        ("dispatcher.max_batch_tokens=100000000000", "dispatcher.max_batch_tokens", "over the limit"),
        ("hosts[0].count=20000", "hosts[0].count", "more than 20,000 workers"),
    ],
)
def test_sizes_a_user_controls_are_bounded_with_the_key_and_the_fix(override, key, message):
    import tomllib

    from support import TINY_SCENARIO

    data = apply_overrides(tomllib.loads(TINY_SCENARIO), [override])
    with pytest.raises(ScenarioError) as caught:
        Scenario.from_dict(data, max_requests=None)
    assert caught.value.path == key and message in str(caught.value) and caught.value.fix


def test_more_models_than_the_bound_are_refused():
    import tomllib

    from support import TINY_SCENARIO

    data = tomllib.loads(TINY_SCENARIO)
    body = data["models"]["small"]
    data["models"] = {f"m{i}": {**body, "share": 1 / 65} for i in range(65)}
    with pytest.raises(ScenarioError, match="over the limit of 64"):
        Scenario.from_dict(data, max_requests=None)
