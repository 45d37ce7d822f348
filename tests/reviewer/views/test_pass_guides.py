"""The pass guides follow the system under review: the seed-shaped prompts for a fleet
that batches statically, others for continuous batching, with more for split pools and
an autoscaler."""

from __future__ import annotations

from emulator.scenario import load_scenario
from reviewer.views.pass_guides import PASS_GUIDES, guides_for


def _preset(name: str) -> dict:
    return load_scenario(name, max_requests=None).to_dict()


def _prompts(guides: dict, key: str) -> str:
    return " | ".join(guides[key]["prompts"])


def test_a_static_fleet_or_none_keeps_the_batch_prompts() -> None:
    assert guides_for(None) is PASS_GUIDES
    assert guides_for(_preset("doc-as-written")) is PASS_GUIDES
    assert "one batch at a time" in _prompts(PASS_GUIDES, "trace")


def test_a_continuous_fleet_is_asked_about_tokens_kv_and_routing() -> None:
    guides = guides_for(_preset("continuous-comfortable"))
    assert "TPOT" in _prompts(guides, "numbers") and "KV cache" in _prompts(guides, "numbers")
    assert "batch" not in _prompts(guides, "trace") and "router" in _prompts(guides, "trace")
    assert "TTFT" in _prompts(guides, "break")
    assert "KV transfer" not in _prompts(guides, "trace") and "warm-up" not in _prompts(guides, "break")
    # The shared guides are not changed by it.
    assert "one batch at a time" in _prompts(PASS_GUIDES, "trace")
    assert guides["restate"] == PASS_GUIDES["restate"] and guides["rank"] == PASS_GUIDES["rank"]


def test_split_pools_and_an_autoscaler_add_their_prompts() -> None:
    assert "KV transfer" in _prompts(guides_for(_preset("disagg-decode-undersized")), "trace")
    assert "warm-up" in _prompts(guides_for(_preset("autoscaled-diurnal")), "break")
