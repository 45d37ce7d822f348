"""The router's prefix index keys (``dispatcher.prefix_index``, ``prefix_index_capacity``,
``prefix_index_ttl_s``): read, written back only when set, and each mistake refused in
one line naming the key and the fix."""

from __future__ import annotations

import pytest

from emulator import ScenarioError, load_scenario
from emulator.scenario.presets import load_preset

CHAT = load_preset("prefix-heavy-chat")  # round_robin as shipped
AWARE = ["dispatcher.policy=prefix_aware"]

# (overrides, expected key path, text the message must contain)
MISTAKES = [
    ([*AWARE, "dispatcher.prefix_index=guessed"], "dispatcher.prefix_index",
     '"guessed" is not a prefix index; use "exact"'),
    ([*AWARE, "dispatcher.prefix_index=estimated", "dispatcher.prefix_index_capacity=0"],
     "dispatcher.prefix_index_capacity", "0 is not a whole number from 1"),
    ([*AWARE, "dispatcher.prefix_index=estimated", "dispatcher.prefix_index_capacity=2.5"],
     "dispatcher.prefix_index_capacity", "2.5 is not a whole number"),
    ([*AWARE, "dispatcher.prefix_index=estimated", "dispatcher.prefix_index_ttl_s=0"],
     "dispatcher.prefix_index_ttl_s", "0 is not a number of seconds above 0; give how long"),
    ([*AWARE, "dispatcher.prefix_index=estimated", "dispatcher.prefix_index_ttl_s=-3"],
     "dispatcher.prefix_index_ttl_s", "above 0"),
    (["dispatcher.prefix_index=estimated"], "dispatcher.prefix_index",
     'applies to a policy that scores prefixes, not "round_robin"; set dispatcher.policy = "prefix_aware"'),
    ([*AWARE, "dispatcher.prefix_index_ttl_s=30"], "dispatcher.prefix_index_ttl_s",
     'applies only to prefix_index = "estimated", not "exact"; set dispatcher.prefix_index = "estimated"'),
    ([*AWARE, "dispatcher.prefix_index_capacity=30"], "dispatcher.prefix_index_capacity",
     "or remove prefix_index_capacity"),
    (["dispatcher.policy=weighted", "dispatcher.scorers={queue = 1}", "dispatcher.prefix_index=estimated"],
     "dispatcher.prefix_index", "whose weight is 0 here; give [dispatcher.scorers] prefix a weight above 0"),
]


@pytest.mark.parametrize(("overrides", "path", "text"), MISTAKES)
def test_each_mistake_names_its_key_and_the_fix_in_one_line(overrides: list[str], path: str, text: str) -> None:
    with pytest.raises(ScenarioError) as err:
        CHAT.with_overrides(overrides)
    assert err.value.path == path
    assert text in str(err.value) and "\n" not in str(err.value)
    assert err.value.fix


def test_the_keys_default_to_the_exact_index_and_are_written_only_when_set() -> None:
    assert CHAT.dispatcher.prefix_index == "exact"
    assert "prefix_index" not in CHAT.to_dict()["dispatcher"]
    sc = CHAT.with_overrides([*AWARE, "dispatcher.prefix_index=estimated", "dispatcher.prefix_index_capacity=64",
                              "dispatcher.prefix_index_ttl_s=20"])
    d = sc.dispatcher
    assert (d.prefix_index, d.prefix_index_capacity, d.prefix_index_ttl_s) == ("estimated", 64, 20.0)
    back = load_scenario(sc.to_toml())
    assert back == sc and back.to_dict()["dispatcher"]["prefix_index_capacity"] == 64


def test_the_default_weighted_scorers_count_the_prefix() -> None:
    sc = CHAT.with_overrides(["dispatcher.policy=weighted", "dispatcher.prefix_index=estimated"])
    assert sc.dispatcher.prefix_index == "estimated"


def test_a_policy_that_scores_no_prefix_drops_the_index_keys_with_a_note() -> None:
    sc = CHAT.with_overrides([*AWARE, "dispatcher.prefix_index=estimated", "dispatcher.prefix_index_ttl_s=20"])
    plain = sc.with_overrides(["dispatcher.policy=round_robin"])
    assert plain.dispatcher.prefix_index == "exact" and plain.dispatcher.prefix_index_ttl_s == 300.0
    assert plain.notes == ('dispatcher.prefix_index, prefix_index_ttl_s dropped: policy "round_robin" scores no prefix',)
    assert sc.with_overrides(["dispatcher.policy=weighted"]).dispatcher.prefix_index == "estimated"


SPLIT = load_preset("pd-prefix-aware")  # prefix_aware in both pools


def test_a_pool_takes_the_dispatchers_index_unless_it_sets_its_own() -> None:
    sc = SPLIT.with_overrides(["dispatcher.prefix_index=estimated", "dispatcher.prefix_index_ttl_s=30",
                               "pools.decode.prefix_index=exact", "pools.prefill.prefix_index_capacity=50"])
    assert sc.pool_prefix_index("prefill") == ("estimated", 50, 30.0)
    assert sc.pool_prefix_index("decode") == ("exact", 4096, 30.0)
    assert load_scenario(sc.to_toml()) == sc


@pytest.mark.parametrize(("overrides", "path", "text"), [
    (["pools.prefill.prefix_index_ttl_s=5"], "pools.prefill.prefix_index_ttl_s",
     'applies only to prefix_index = "estimated", not "exact"; set [pools.prefill] prefix_index = "estimated"'),
    (["pools.prefill.policy=least_loaded", "pools.prefill.prefix_index=estimated"], "pools.prefill.prefix_index",
     'pool prefill routes by "least_loaded" without one'),
    (["pools.decode.prefix_index=guess"], "pools.decode.prefix_index", '"guess" is not a prefix index'),
    (["pools.decode.prefix_index=estimated", "pools.decode.prefix_index_capacity=0"],
     "pools.decode.prefix_index_capacity", "is not a whole number from 1"),
])
def test_a_pools_index_mistake_names_its_key(overrides: list[str], path: str, text: str) -> None:
    with pytest.raises(ScenarioError) as err:
        SPLIT.with_overrides(overrides)
    assert err.value.path == path and text in str(err.value) and err.value.fix
