"""Mistakes in the pipelined-prefill keys (``pipeline_*`` of
``[models.NAME.disaggregated]``): one line naming the key path and the fix; a sound
group is read, written back and read again unchanged, and a split without it writes
none of its keys."""

from __future__ import annotations

import pytest

from emulator import ScenarioError, load_scenario
from emulator.scenario.presets import load_preset

SPLIT = load_preset("pd-long-prompt-admission")  # pools: prefill (2 workers), decode (2)
KEY = "models.chat.disaggregated"
ON = [f"{KEY}.pipeline_threshold_tokens=20000", "hosts[0].count=3"]

MISTAKES = [
    ([f"{KEY}.pipeline_workers=2"], f"{KEY}.pipeline_workers",
     "off without pipeline_threshold_tokens; give pipeline_threshold_tokens"),
    ([f"{KEY}.pipeline_hop_s=0.01"], f"{KEY}.pipeline_hop_s", "applies to pipelined prefill"),
    ([f"{KEY}.pipeline_threshold_tokens=-1"], f"{KEY}.pipeline_threshold_tokens", "at least 0"),
    ([*ON], f"{KEY}.pipeline_workers", "missing: pipelined prefill needs the number"),
    ([*ON, f"{KEY}.pipeline_workers=1"], f"{KEY}.pipeline_workers", "must be at least 2, not 1"),
    ([*ON, f"{KEY}.pipeline_workers=2", f"{KEY}.pipeline_hop_s=-0.5"], f"{KEY}.pipeline_hop_s",
     "must be 0 or more"),
    ([*ON, f"{KEY}.pipeline_workers=2", f"{KEY}.pipeline_link_gb_s=-1"], f"{KEY}.pipeline_link_gb_s",
     "must be 0 or more"),
    ([*ON, f"{KEY}.pipeline_workers=2", f"{KEY}.pipeline_link_gb_s=50", "models.chat.arch={params_b = 70, layers = 80, kv_heads = 8, head_dim = 128}",
     ], f"{KEY}.pipeline_link_gb_s",
     "need the model's hidden size, and model chat has none"),
    ([*ON, f"{KEY}.pipeline_workers=2", f"{KEY}.pipeline_chunk_tokens=-4"],
     f"{KEY}.pipeline_chunk_tokens", "at least 0"),
    ([*ON, f"{KEY}.pipeline_workers=3"], f"{KEY}.pipeline_workers",
     "takes 3 of pool prefill's 3 chat workers and would leave none for the prompts at or under "
     "pipeline_threshold_tokens; set pipeline_workers to at most 2"),
    ([*ON, f"{KEY}.pipeline_workers=2", f"{KEY}.pipeline_chunk_tokens=10000"],
     f"{KEY}.pipeline_chunk_tokens", "more than a step's token budget, max_batched_tokens = 8192"),
    ([*ON, f"{KEY}.pipeline_workers=2", 'dispatcher.policy="pull"'], "dispatcher.policy",
     '"pull" holds requests'),
    ([*ON, f"{KEY}.pipeline_workers=2", 'dispatcher.admission="predicted_ttft"', "slo.ttft_s=30"],
     "dispatcher.admission", 'use admission = "queue_limit" for pool prefill'),
    ([*ON, f"{KEY}.pipeline_workers=2", 'pools.prefill={admission = "predicted_ttft"}'],
     "pools.prefill.admission", "predicts one prefill worker's steps"),
    ([*ON, f"{KEY}.pipeline_workers=2",
      'pools.prefill.autoscaler={metric="queue",target=4,max_workers=3}'],
     "pools.prefill.autoscaler", "a fixed set of its workers that an autoscaler would park"),
]


@pytest.mark.parametrize(("overrides", "path", "text"), MISTAKES)
def test_it_names_the_key_and_the_fix_in_one_line(overrides: list[str], path: str, text: str) -> None:
    with pytest.raises(ScenarioError) as err:
        SPLIT.with_overrides(overrides)
    assert err.value.path == path
    assert text in str(err.value)
    assert "\n" not in str(err.value)


def test_a_sound_group_survives_a_round_trip() -> None:
    sc = SPLIT.with_overrides([*ON, f"{KEY}.pipeline_workers=2", f"{KEY}.pipeline_chunk_tokens=4096",
                               f"{KEY}.pipeline_hop_s=0.002", f"{KEY}.pipeline_link_gb_s=50"])
    split = sc.models["chat"].disaggregated
    assert split is not None
    assert (split.pipeline_threshold_tokens, split.pipeline_workers) == (20000, 2)
    assert (split.pipeline_chunk_tokens, split.pipeline_hop_s, split.pipeline_link_gb_s) == (4096, 0.002, 50.0)
    again = load_scenario(sc.to_toml())
    assert again.to_dict() == sc.to_dict()
    assert again.models["chat"].disaggregated == split


def test_a_split_without_the_pipeline_writes_none_of_its_keys() -> None:
    written = SPLIT.to_dict()["models"]["chat"]["disaggregated"]
    assert not [k for k in written if k.startswith("pipeline_")]
    # A threshold set to 0 turns a written group off, its other keys dropped.
    on = [*ON, f"{KEY}.pipeline_workers=2", f"{KEY}.pipeline_hop_s=0.002"]
    off = SPLIT.with_overrides([*on, f"{KEY}.pipeline_threshold_tokens=0"])
    assert off.models["chat"].disaggregated == SPLIT.models["chat"].disaggregated
    assert not [k for k in off.to_dict()["models"]["chat"]["disaggregated"] if k.startswith("pipeline_")]
