"""Overriding the policy of a fleet whose dispatcher has scorers: the scorers the new
policy does not use are dropped, with a note; a file that pairs them is still an
error naming the key."""

from __future__ import annotations

import pytest

from emulator import Engine, ScenarioError
from emulator.scenario.presets import load_preset

WEIGHTED = load_preset("prefix-heavy-chat").with_overrides(
    ['dispatcher.policy="weighted"', "dispatcher.scorers={prefix=1, kv_free=1}"]
)


@pytest.mark.parametrize("policy", ["round_robin", "least_loaded", "pull", "prefix_aware"])
def test_setting_a_policy_without_scorers_drops_them_with_a_note(policy: str) -> None:
    assert WEIGHTED.dispatcher.scorers
    sc = WEIGHTED.with_overrides([f"dispatcher.policy={policy}"])
    assert sc.dispatcher.policy == policy
    assert sc.dispatcher.scorers == ()
    assert sc.notes == (f'dispatcher.scorers (prefix, kv_free) dropped: policy "{policy}" uses no scorers',)
    assert Engine(sc.with_overrides(["duration_s=20"])).run().ok > 0


def test_keeping_the_weighted_policy_keeps_the_scorers_and_says_nothing() -> None:
    sc = WEIGHTED.with_overrides(["dispatcher.policy=weighted", "duration_s=20"])
    assert dict(sc.dispatcher.scorers) == dict(WEIGHTED.dispatcher.scorers)
    assert sc.notes == ()


def test_scorers_given_with_a_policy_that_uses_none_are_still_an_error() -> None:
    # Only a policy override drops them: scorers set on a round_robin fleet are a mistake.
    base = load_preset("prefix-heavy-chat")
    assert base.dispatcher.policy == "round_robin"
    with pytest.raises(ScenarioError) as err:
        base.with_overrides(["dispatcher.scorers={prefix=1}"])
    assert err.value.path == "dispatcher.scorers"


def test_overriding_a_pools_policy_drops_its_scorers_with_a_note() -> None:
    from emulator.scenario.presets import load_preset

    weighted = load_preset("disagg-decode-undersized").with_overrides(
        ['pools.decode.policy="weighted"', "pools.decode.scorers={queue=1,running=1}"]
    )
    assert weighted.pool_scorers("decode") == (("queue", 1.0), ("running", 1.0))
    back = weighted.with_overrides(['pools.decode.policy="round_robin"'])
    assert back.pool_policy("decode") == "round_robin" and back.pool("decode").scorers == ()  # type: ignore[union-attr]
    assert back.notes == ('pools.decode.scorers (queue, running) dropped: policy "round_robin" uses no scorers',)


def test_overriding_the_fleets_policy_drops_the_scorers_of_the_pools_that_take_it() -> None:
    from emulator.scenario.presets import load_preset

    planned = load_preset("disagg-planner-ramp")
    assert planned.pool_policy("prefill") == planned.pool_policy("decode") == "weighted"
    pushed = planned.with_overrides(['dispatcher.policy="least_loaded"'])
    assert pushed.pool_policy("prefill") == pushed.pool_policy("decode") == "least_loaded"
    assert pushed.pool("prefill").scorers == pushed.pool("decode").scorers == ()  # type: ignore[union-attr]
    assert pushed.notes == (
        'pools.prefill.scorers (queue, running) dropped: policy "least_loaded" uses no scorers',
        'pools.decode.scorers (running, queue) dropped: policy "least_loaded" uses no scorers',
    )
    # The autoscalers stay.
    assert [p for p, _ in pushed.autoscalers()] == ["prefill", "decode"]
