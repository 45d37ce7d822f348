"""Shared prompt prefixes in the workload: Zipf-drawn groups from a stream of their own
(a scenario without prefixes draws as before), re-sent requests keep their prefix, and
trace rows may name theirs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from emulator import Scenario, load_scenario
from emulator.scenario.presets import load_preset
from emulator.scenario.traces import load_trace, read_trace, write_jsonl
from emulator.sim.arrivals import ArrivalSource
from emulator.sim.prefixes import NO_GROUP, PrefixDraw

COMFORTABLE = load_preset("continuous-comfortable")
PREFIXED = COMFORTABLE.with_overrides(
    ["models.chat.prefixes={groups = 50, prefix_tokens = 600, zipf_s = 1.1}"]
)


def _source(sc: Scenario, seed: int = 3) -> ArrivalSource:
    rngs = [np.random.default_rng([seed, k]) for k in range(4)]
    return ArrivalSource(sc, rngs[0], rngs[1], rngs[2], rngs[3])


def test_prefixes_do_not_move_the_arrivals_or_sizes_of_a_seed() -> None:
    plain, prefixed = _source(COMFORTABLE), _source(PREFIXED)
    for k in range(20):
        a = plain.chunk(k, k + 1, k)[0]
        b = prefixed.chunk(k, k + 1, k)[0]
        for f in ("time", "tokens", "output", "key"):
            assert np.array_equal(getattr(a, f), getattr(b, f)), f
        assert (a.group == NO_GROUP).all() and (a.prefix == 0).all()
        assert (b.group >= 0).all() and (b.group < 50).all()
        assert np.array_equal(b.prefix, np.minimum(600, b.tokens))


def test_groups_follow_the_zipf_law() -> None:
    draw = PrefixDraw(PREFIXED, np.random.default_rng(7))
    n = 200_000
    group, _ = draw.draw(np.zeros(n, dtype=np.int64), np.full(n, 1000))
    counts = np.bincount(group, minlength=50) / n
    weights = np.arange(1, 51, dtype=float) ** -1.1
    expected = weights / weights.sum()
    # Each share within 4 standard errors of its probability.
    assert np.all(np.abs(counts - expected) < 4 * np.sqrt(expected * (1 - expected) / n))
    assert counts[0] > counts[1] > counts[9] > counts[49]


def test_a_draw_is_a_function_of_the_seed() -> None:
    def groups(seed: int) -> np.ndarray:
        src = _source(PREFIXED, seed)
        return np.concatenate([src.chunk(k, k + 1, k)[0].group for k in range(5)])

    assert np.array_equal(groups(1), groups(1))
    assert not np.array_equal(groups(1), groups(2))


def test_a_resent_request_keeps_its_prefix() -> None:
    src = _source(PREFIXED)
    src.add_retries(
        np.array([0.5, 0.7]), 0, np.array([900, 1200]), np.zeros(2, dtype=np.int64),
        np.ones(2, dtype=np.int16), np.array([10, 20]), np.array([4, 9]), np.array([600, 600]),
    )
    again = src.chunk(0.0, 1.0, 0)[0]
    retried = again.select(again.attempt > 0)
    assert retried.group.tolist() == [4, 9]
    assert retried.prefix.tolist() == [600, 600]


def _trace(tmp_path: Path) -> Path:
    rows = [
        {"arrival_s": 0.0, "prompt_tokens": 900, "output_tokens": 5, "prefix_id": "sys-b", "prefix_tokens": 700},
        {"arrival_s": 0.5, "prompt_tokens": 300, "output_tokens": 5},
        {"arrival_s": 1.0, "prompt_tokens": 800, "output_tokens": 5, "prefix_id": 3, "prefix_tokens": 800},
        {"arrival_s": 1.5, "prompt_tokens": 950, "output_tokens": 5, "prefix_id": "sys-b", "prefix_tokens": 700},
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_trace_rows_name_their_prefix_and_it_reads_back(tmp_path: Path) -> None:
    trace = read_trace(_trace(tmp_path))
    assert trace.prefix_group is not None and trace.prefix_tokens is not None
    assert trace.prefix_group.tolist() == [0, -1, 1, 0]
    assert trace.prefix_tokens.tolist() == [700, 0, 800, 700]
    write_jsonl(trace, tmp_path / "again.jsonl")
    again = read_trace(tmp_path / "again.jsonl")
    assert again.prefix_group is not None
    assert again.prefix_group.tolist() == trace.prefix_group.tolist()


@pytest.mark.parametrize("with_table", [False, True])
def test_a_replay_keeps_the_trace_prefixes_and_draws_the_others(tmp_path: Path, with_table: bool) -> None:
    data = COMFORTABLE.to_dict()
    data["traffic"] = {"qps": 0, "trace": str(_trace(tmp_path))}
    data["worker"]["prefix_cache"] = True
    data["models"]["chat"]["tokens"] = 700
    if with_table:
        data["models"]["chat"]["prefixes"] = {"groups": 5, "prefix_tokens": 200}
    sc = Scenario.from_dict(data)
    replay = _source(sc).replay
    assert replay is not None
    assert replay.group[[0, 2, 3]].tolist() == [0, 1, 0]
    assert replay.prefix[[0, 2, 3]].tolist() == [700, 800, 700]
    if with_table:  # numbered after the trace's two ids
        assert 2 <= replay.group[1] < 7 and replay.prefix[1] == 200
    else:
        assert replay.group[1] == NO_GROUP and replay.prefix[1] == 0
    assert load_trace(str(_trace(tmp_path))).prefix_group is not None


def test_the_new_keys_round_trip_and_stay_out_when_unset() -> None:
    sc = load_preset("prefix-heavy-chat").with_overrides(
        ['dispatcher.policy="weighted"', "dispatcher.scorers={prefix = 3, kv_free = 1}"]
    )
    again = load_scenario(sc.to_toml())
    assert again == sc
    assert again.dispatcher.scorers == (("prefix", 3.0), ("kv_free", 1.0))
    assert again.models["chat"].prefixes is not None
    assert again.models["chat"].prefixes.zipf_s == 0.9
    plain = COMFORTABLE.to_dict()
    assert "scorers" not in plain["dispatcher"]
    assert "prefix_cache" not in plain["worker"] and "block_tokens" not in plain["worker"]
    assert "prefixes" not in plain["models"]["chat"]
