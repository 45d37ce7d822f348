"""Mistakes in the session affinity keys (``dispatcher.session_affinity``,
``session_ttl_s`` and a pool's own): one line naming the key path and the fix; sound
keys are read, written back and read again unchanged, and left out when off."""

from __future__ import annotations

import pytest

from emulator import Scenario, ScenarioError, load_scenario
from emulator.scenario.presets import load_preset

CHAT = load_preset("prefix-heavy-chat")
SPLIT = load_preset("pd-prefix-aware")

MISTAKES = [
    (CHAT, ["dispatcher.session_affinity=1"], "dispatcher.session_affinity", "1 is not true or false"),
    (CHAT, ["dispatcher.session_affinity=true", "dispatcher.session_ttl_s=0"], "dispatcher.session_ttl_s",
     "0 is not a number of seconds above 0 and at most a day; give how long"),
    (CHAT, ["dispatcher.session_affinity=true", "dispatcher.session_ttl_s=1e9"], "dispatcher.session_ttl_s",
     "at most a day"),
    (CHAT, ["dispatcher.session_ttl_s=60"], "dispatcher.session_ttl_s",
     "applies only with session affinity on (or a session scorer); set dispatcher.session_affinity = true"),
    (load_preset("continuous-comfortable"), ['dispatcher.policy="weighted"', "dispatcher.scorers={session = 2}"],
     "dispatcher.scorers.session", "needs sessions, and no request carries one: a session is a prefix group; give "
     "a model [models.NAME.prefixes] (its groups are the sessions), or remove the session scorer"),
    (CHAT, ["dispatcher.session_affinity=true", 'dispatcher.policy="pull"'], "dispatcher.session_affinity",
     'but "pull" holds requests for workers to take; use a pushing policy'),
    (SPLIT, ["pools.prefill.session_ttl_s=30"], "pools.prefill.session_ttl_s",
     "set pools.prefill.session_affinity = true, or remove session_ttl_s"),
    (SPLIT, ["pools.prefill.session_affinity=true", 'pools.prefill.policy="pull"',
             'models.chat.disaggregated.decider="prompt"'], "pools.prefill.session_affinity",
     '"pull" holds requests'),
]


@pytest.mark.parametrize(("base", "overrides", "path", "text"), MISTAKES)
def test_it_names_the_key_and_the_fix_in_one_line(base: Scenario, overrides: list[str], path: str, text: str) -> None:
    with pytest.raises(ScenarioError) as err:
        base.with_overrides(overrides)
    assert err.value.path == path
    assert text in str(err.value)
    assert "\n" not in str(err.value)


def test_without_sessions_it_is_refused_at_its_key() -> None:
    plain = load_preset("continuous-comfortable")
    with pytest.raises(ScenarioError) as err:
        plain.with_overrides(["dispatcher.session_affinity=true"])
    assert err.value.path == "dispatcher.session_affinity"
    assert "a session is a prefix group; give a model [models.NAME.prefixes]" in str(err.value)


def test_a_session_scorer_takes_a_ttl_without_affinity() -> None:
    sc = CHAT.with_overrides(['dispatcher.policy="weighted"', "dispatcher.scorers={session = 2, queue = 1}",
                              "dispatcher.session_ttl_s=30"])
    assert sc.dispatcher.session_ttl_s == 30.0 and not sc.dispatcher.session_affinity


def test_sound_keys_survive_a_round_trip_and_are_left_out_when_off() -> None:
    sc = CHAT.with_overrides(["dispatcher.session_affinity=true", "dispatcher.session_ttl_s=120"])
    assert sc.dispatcher.session_affinity and sc.dispatcher.session_ttl_s == 120.0
    again = load_scenario(sc.to_toml())
    assert again.dispatcher == sc.dispatcher and again.to_dict() == sc.to_dict()
    assert "session_affinity" not in CHAT.to_dict()["dispatcher"]
    pools = SPLIT.with_overrides(["pools.prefill.session_affinity=true", "pools.prefill.session_ttl_s=45"])
    assert pools.pool_session("prefill") == (True, 45.0)
    assert pools.pool_session("decode") == (False, 600.0)
    assert load_scenario(pools.to_toml()).pools == pools.pools
