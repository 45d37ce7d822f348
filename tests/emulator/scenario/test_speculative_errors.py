"""Mistakes in the speculative-decoding keys (``[worker.speculative]``): one line naming
the key path and the fix; a sound table is read, written back and read again unchanged."""

from __future__ import annotations

import pytest

from emulator import ScenarioError, load_scenario
from emulator.scenario.presets import load_preset
from emulator.scenario.specs import SpeculativeSpec

CHAT = load_preset("prefix-heavy-chat")  # max_num_seqs 256, max_batched_tokens 8192
STATIC = load_preset("doc-as-written")
EAGLE = '{method = "eagle", draft_tokens = 3, acceptance_rate = 0.7, draft_step_s = 0.001}'

MISTAKES = [
    (["worker.speculative=3"], "worker.speculative", "must be a table (or false for none); write method"),
    (['worker.speculative={acceptance_rate = 0.7}'], "worker.speculative.draft_tokens", "missing; this key is required"),
    (['worker.speculative={draft_tokens = 0, acceptance_rate = 0.7}'], "worker.speculative.draft_tokens",
     "must be at least 1"),
    (['worker.speculative={draft_tokens = 40, acceptance_rate = 0.7}'], "worker.speculative.draft_tokens",
     "40 is more than 16 drafted tokens a step; use 1 to 8"),
    (['worker.speculative={draft_tokens = 3}'], "worker.speculative.acceptance_rate", "missing; this key is required"),
    (['worker.speculative={draft_tokens = 3, acceptance_rate = 1.0}'], "worker.speculative.acceptance_rate",
     "would accept every drafted token; give the chance"),
    (['worker.speculative={draft_tokens = 3, acceptance_rate = -0.1}'], "worker.speculative.acceptance_rate",
     "must be at least 0"),
    (['worker.speculative={draft_tokens = 3, acceptance_rate = 0.5, method = "medusa"}'],
     "worker.speculative.method", '"medusa" is not one of draft, eagle, mtp'),
    (['worker.speculative={draft_tokens = 3, acceptance_rate = 0.5, draft_step_s = -1}'],
     "worker.speculative.draft_step_s", "must be at least 0"),
    (['worker.speculative={draft_tokens = 3, acceptance_rate = 0.5, tree = 2}'],
     "worker.speculative.tree", "unknown key; known keys here: method, draft_tokens"),
    ([f"worker.speculative={EAGLE}", "worker.max_batched_tokens=1000"], "worker.max_batched_tokens",
     "1,000 cannot hold a verification step of max_num_seqs (256) x (draft_tokens + 1) = 1,024 tokens; "
     "use at least 1,024"),
    ([f"models.chat.worker.speculative={EAGLE}", "models.chat.worker.max_batched_tokens=1000"],
     "models.chat.worker.max_batched_tokens", "cannot hold a verification step"),
    ([f"worker.speculative={EAGLE}", 'worker.step_model="table"', 'worker.step_table="vidur-llama2-70b-h100-tp4"'],
     "worker.speculative", 'not verification passes; use step_model = "linear" or "roofline"'),
]


@pytest.mark.parametrize(("overrides", "path", "text"), MISTAKES)
def test_it_names_the_key_and_the_fix_in_one_line(overrides: list[str], path: str, text: str) -> None:
    with pytest.raises(ScenarioError) as err:
        CHAT.with_overrides(overrides)
    assert err.value.path == path
    assert text in str(err.value)
    assert "\n" not in str(err.value)


def test_static_batching_has_no_decode_steps_to_speculate_in() -> None:
    with pytest.raises(ScenarioError) as err:
        STATIC.with_overrides([f"worker.speculative={EAGLE}"])
    assert err.value.path == "worker.speculative"
    assert 'applies to continuous batching; set batching = "continuous"' in str(err.value).replace(
        ", but this model batches statically", "")


def test_a_sound_table_is_read_and_survives_a_round_trip() -> None:
    sc = CHAT.with_overrides([f"worker.speculative={EAGLE}"])
    sp = sc.worker.speculative
    assert sp == SpeculativeSpec(method="eagle", draft_tokens=3, acceptance_rate=0.7, draft_step_s=0.001)
    assert sp.tokens_per_step == pytest.approx(1 + 0.7 + 0.49 + 0.343, rel=1e-12)
    assert sp.draft_s(10) == pytest.approx(0.003)
    again = load_scenario(sc.to_toml())
    assert again.worker.speculative == sp
    assert again.to_dict() == sc.to_dict()


def test_a_scenario_without_speculation_writes_no_key_and_false_turns_it_off() -> None:
    assert "speculative" not in CHAT.to_dict()["worker"]
    off = CHAT.with_overrides([f"worker.speculative={EAGLE}", "worker.speculative=false"])
    assert off.worker.speculative is None
    assert "speculative" not in off.to_dict()["worker"]
    one = CHAT.with_overrides([f"models.chat.worker.speculative={EAGLE}"])
    assert one.worker.speculative is None
    assert one.worker_for("chat").speculative is not None
