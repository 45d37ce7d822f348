"""The numbers pass with session affinity: a session is a prefix group, so affinity
keeps each group on one worker, and the expected hit rate is the prefix-routed one
(each worker's Che over its own groups), not the one of a policy spreading them."""

from __future__ import annotations

from emulator.analysis.fleet.prefix import routes_by_prefix
from emulator.analysis.numbers import compute
from emulator.scenario.presets import load_preset

CHAT = load_preset("prefix-heavy-chat", max_requests=None)


def test_affinity_keeps_groups_on_their_worker_in_the_hit_rate() -> None:
    spread = compute(CHAT.with_overrides(['dispatcher.policy="least_loaded"'], max_requests=None))
    pinned = compute(CHAT.with_overrides(['dispatcher.policy="least_loaded"', "dispatcher.session_affinity=true"],
                                         max_requests=None))
    routed = compute(CHAT.with_overrides(['dispatcher.policy="prefix_aware"'], max_requests=None))
    hit = pinned.get("prefix_hit_rate", "chat")
    assert hit.value == routed.value("prefix_hit_rate", "chat")
    assert hit.value > spread.value("prefix_hit_rate", "chat")
    assert "session affinity keeps each session" in hit.explain
    assert "dispatcher.session_affinity" in hit.inputs
    assert pinned.value("capacity_qps", "chat") > spread.value("capacity_qps", "chat")


def test_a_session_score_routes_by_group_and_other_policies_do_not() -> None:
    assert routes_by_prefix("weighted", (("session", 1.0), ("queue", 2.0)))
    assert not routes_by_prefix("weighted", (("queue", 2.0),))
    assert routes_by_prefix("round_robin", (), sessions=True)
    assert not routes_by_prefix("round_robin", ())
