"""Mistakes in the KV tier keys (``[[worker.kv_tiers]]``): one line naming the key path
and the fix; a sound list of tiers is read, written back and read again unchanged."""

from __future__ import annotations

import pytest

from emulator import ScenarioError, load_scenario
from emulator.scenario.kv_tier_checks import tier_tokens
from emulator.scenario.presets import load_preset
from emulator.scenario.specs import KvTierSpec

CHAT = load_preset("prefix-heavy-chat")
ARCH = 'models.chat.arch={model = "Llama-2-70B", dtype_bytes = 2}'
CPU = '{name = "cpu", capacity_tokens = 1000000, bandwidth_gb_s = 20}'
SSD = '{name = "ssd", capacity_gb = 2000, bandwidth_gb_s = 5}'

MISTAKES = [
    ([ARCH, "worker.kv_tiers=3"], "worker.kv_tiers", "must be a list of tier tables"),
    ([ARCH, 'worker.kv_tiers=[{name = "gpu", capacity_tokens = 5}]'], "worker.kv_tiers[0].name",
     '"gpu" is not one of cpu, ssd, remote'),
    ([ARCH, f"worker.kv_tiers=[{SSD}, {CPU}]"], "worker.kv_tiers[1].name",
     '"cpu" comes after "ssd"; list each tier once, fastest first: cpu, ssd, remote'),
    ([ARCH, f"worker.kv_tiers=[{CPU}, {CPU}]"], "worker.kv_tiers[1].name", '"cpu" comes after "cpu"'),
    ([ARCH, 'worker.kv_tiers=[{name = "cpu"}]'], "worker.kv_tiers[0]",
     "needs exactly one of capacity_tokens and capacity_gb; give the tier's size"),
    ([ARCH, 'worker.kv_tiers=[{name = "cpu", capacity_tokens = 5, capacity_gb = 1}]'],
     "worker.kv_tiers[0]", "needs exactly one of capacity_tokens and capacity_gb"),
    ([ARCH, 'worker.kv_tiers=[{name = "cpu", capacity_tokens = 0}]'],
     "worker.kv_tiers[0].capacity_tokens", "must be at least 1"),
    ([ARCH, 'worker.kv_tiers=[{name = "cpu", capacity_gb = -2}]'],
     "worker.kv_tiers[0].capacity_gb", "must be greater than 0"),
    ([ARCH, 'worker.kv_tiers=[{name = "cpu", capacity_tokens = 9, bandwidth_gb_s = 0}]'],
     "worker.kv_tiers[0].bandwidth_gb_s", "must be greater than 0"),
    ([ARCH, 'worker.kv_tiers=[{name = "cpu", capacity_tokens = 9, speed = 1}]'],
     "worker.kv_tiers[0].speed", "known keys here: name, capacity_tokens, capacity_gb"),
    ([ARCH, f'worker.kv_tiers=[{{name = "cpu", capacity_tokens = 9, shared = true}}, {SSD}]'],
     "worker.kv_tiers[1].shared", '"ssd" is private but comes after the shared "cpu"; a shared tier '
     "sits below every private tier: list private tiers first, or set shared = true here too"),
    ([ARCH, 'worker.kv_tiers=[{name = "remote", capacity_tokens = 9, shared = 1}]'],
     "worker.kv_tiers[0].shared", "1 is not true or false"),
    ([f"worker.kv_tiers=[{CPU}]"], "worker.kv_tiers",
     "needs model chat's KV bytes per token to turn GB into tokens; give models.chat.arch"),
    ([ARCH, "worker.prefix_cache=false", f"worker.kv_tiers=[{CPU}]"], "worker.kv_tiers",
     "has no prefix cache; set prefix_cache = true"),
    ([ARCH, "worker.prefix_cache=false", f"models.chat.worker.kv_tiers=[{CPU}]"],
     "models.chat.worker.kv_tiers", "has no prefix cache"),
]


@pytest.mark.parametrize(("overrides", "path", "text"), MISTAKES)
def test_it_names_the_key_and_the_fix_in_one_line(overrides: list[str], path: str, text: str) -> None:
    with pytest.raises(ScenarioError) as err:
        CHAT.with_overrides(overrides)
    assert err.value.path == path
    assert text in str(err.value)
    assert "\n" not in str(err.value)


def test_a_sound_list_is_read_in_order_and_survives_a_round_trip() -> None:
    sc = CHAT.with_overrides([ARCH, f"worker.kv_tiers=[{CPU}, {SSD}]"])
    assert sc.worker.kv_tiers == (
        KvTierSpec(name="cpu", capacity_tokens=1_000_000, bandwidth_gb_s=20.0),
        KvTierSpec(name="ssd", capacity_gb=2000.0, bandwidth_gb_s=5.0),
    )
    again = load_scenario(sc.to_toml())
    assert again.worker.kv_tiers == sc.worker.kv_tiers
    assert again.to_dict() == sc.to_dict()


def test_shared_tiers_below_private_ones_are_read_and_survive_a_round_trip() -> None:
    remote = '{name = "remote", capacity_tokens = 4000000, bandwidth_gb_s = 10, shared = true}'
    sc = CHAT.with_overrides([ARCH, f"worker.kv_tiers=[{CPU}, {remote}]"])
    assert [(t.name, t.shared) for t in sc.worker.kv_tiers] == [("cpu", False), ("remote", True)]
    again = load_scenario(sc.to_toml())
    assert again.worker.kv_tiers == sc.worker.kv_tiers
    alone = CHAT.with_overrides([ARCH, f"worker.kv_tiers=[{remote}]"])
    assert alone.worker.kv_tiers[0].shared


def test_a_scenario_without_tiers_writes_no_tier_key() -> None:
    assert "kv_tiers" not in CHAT.to_dict()["worker"]
    off = CHAT.with_overrides([ARCH, f"worker.kv_tiers=[{CPU}]", "worker.kv_tiers=[]"])
    assert off.worker.kv_tiers == ()
    assert "kv_tiers" not in off.to_dict()["worker"]


def test_a_size_in_gb_is_whole_tokens_of_the_model_kv() -> None:
    # Llama-2-70B in BF16: 2 x 80 layers x 8 KV heads x 128 x 2 bytes = 327,680 bytes a token.
    tier = KvTierSpec(name="ssd", capacity_gb=2000.0)
    assert tier_tokens(tier, 327_680.0) == 2_000_000_000_000 // 327_680
    assert tier_tokens(KvTierSpec(name="cpu", capacity_tokens=7), 327_680.0) == 7
