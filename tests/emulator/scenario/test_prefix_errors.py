"""Mistakes in the prefix-caching keys: one line naming the key path and the fix, as
for every other key (``test_scenario_errors.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from emulator import ScenarioError, load_scenario
from emulator.scenario.presets import load_preset

CHAT = load_preset("prefix-heavy-chat")
DOC = load_preset("doc-as-written")

# (overrides, expected key path, text the message must contain)
MISTAKES = [
    (["models.chat.prefixes.prefix_tokens=0"], "models.chat.prefixes.prefix_tokens", "must be greater than 0"),
    (["models.chat.prefixes.prefix_tokens=-5"], "models.chat.prefixes.prefix_tokens", "must be greater than 0"),
    (["models.chat.prefixes.prefix_tokens=2.5"], "models.chat.prefixes.prefix_tokens", "is not a whole number"),
    (
        ["models.chat.prefixes.prefix_tokens=3000"],
        "models.chat.prefixes.prefix_tokens",
        "3,000 is not below models.chat.tokens (3,000): the prefix is the first part of each prompt; lower prefix_tokens",
    ),
    (["models.chat.prefixes.zipf_s=0"], "models.chat.prefixes.zipf_s", "must be greater than 0"),
    (["models.chat.prefixes.zipf_s=-1.1"], "models.chat.prefixes.zipf_s", "must be greater than 0"),
    (["models.chat.prefixes.groups=0"], "models.chat.prefixes.groups", "must be at least 1"),
    (["models.chat.prefixes.groups=2000000"], "models.chat.prefixes.groups", "more than 1,000,000 groups"),
    (["models.chat.prefixes.groupz=3"], "models.chat.prefixes.groupz", "known keys here: groups, prefix_tokens, zipf_s"),
    (["models.chat.prefixes=3"], "models.chat.prefixes", "must be a table"),
    (
        ['dispatcher.policy="weighted"', "dispatcher.scorers={prefix = 1, cache = 2}"],
        "dispatcher.scorers.cache",
        '"cache" is not a scorer; known scorers: prefix, queue, kv_free',
    ),
    (
        ['dispatcher.policy="weighted"', "dispatcher.scorers={prefix = -1, queue = 1}"],
        "dispatcher.scorers.prefix",
        "must be a finite number of 0 or more, not -1",
    ),
    (
        ['dispatcher.policy="weighted"', 'dispatcher.scorers={queue = "high"}'],
        "dispatcher.scorers.queue",
        "is not a number",
    ),
    (
        ['dispatcher.policy="weighted"', "dispatcher.scorers={prefix = 0, queue = 0}"],
        "dispatcher.scorers",
        "every weight is 0 (no scorer would count); give at least one of prefix, queue, kv_free",
    ),
    (
        ['dispatcher.policy="weighted"', "dispatcher.scorers={}"],
        "dispatcher.scorers",
        "every weight is 0",
    ),
    (
        ['dispatcher.policy="weighted"', "dispatcher.scorers=3"],
        "dispatcher.scorers",
        "must be a table of scorer weights",
    ),
    (
        ["dispatcher.scorers={prefix = 1}"],
        "dispatcher.scorers",
        'applies only to policy = "weighted", not "round_robin"; set dispatcher.policy = "weighted"',
    ),
    (["worker.block_tokens=0"], "worker.block_tokens", "must be at least 1"),
    (
        ["worker.prefix_cache=false", "worker.block_tokens=32"],
        "worker.block_tokens",
        "applies only with prefix_cache = true",
    ),
    (['worker.prefix_cache="yes"'], "worker.prefix_cache", "is not true or false"),
    (
        ['worker.batching="static"'],
        "models.chat.prefixes",
        "shared prefixes need continuous batching, but model chat batches statically",
    ),
    (['dispatcher.policy="prefix-aware"'], "dispatcher.policy", "prefix_aware, weighted"),
    # Valid: controls that the table itself is sound.
    (['dispatcher.policy="weighted"', "dispatcher.scorers={prefix = 1, kv_free = 0.5}"], None, None),
    (["worker.prefix_cache=false"], None, None),
]


@pytest.mark.parametrize(("overrides", "path", "text"), MISTAKES)
def test_it_names_the_key_and_the_fix_in_one_line(
    overrides: list[str], path: str | None, text: str | None
) -> None:
    if path is None:
        CHAT.with_overrides(overrides)
        return
    with pytest.raises(ScenarioError) as err:
        CHAT.with_overrides(overrides)
    message = str(err.value)
    assert err.value.path == path
    assert text in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("overrides", "path", "text"),
    [
        (
            ["worker.prefix_cache=true"],
            "worker.prefix_cache",
            'applies to continuous batching, but model small batches statically; set batching = "continuous"',
        ),
        (
            ["worker.block_tokens=32"],
            "worker.block_tokens",
            "applies only with prefix_cache = true",
        ),
        (
            ['dispatcher.policy="prefix_aware"'],
            "dispatcher.policy",
            '"prefix_aware" routes by the workers\' prefix caches, but model small batches statically',
        ),
        (
            ['dispatcher.policy="weighted"'],
            "dispatcher.policy",
            "use round_robin, pull or least_loaded",
        ),
        (
            ["models.small.prefixes={groups = 10, prefix_tokens = 100}"],
            "models.small.prefixes",
            "shared prefixes need continuous batching",
        ),
    ],
)
def test_prefix_keys_on_a_static_model_are_refused(overrides: list[str], path: str, text: str) -> None:
    with pytest.raises(ScenarioError) as err:
        DOC.with_overrides(overrides)
    assert err.value.path == path
    assert text in str(err.value)


def _jsonl(tmp_path: Path, *rows: dict) -> Path:
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


GOOD = {"arrival_s": 0.0, "prompt_tokens": 100, "output_tokens": 5}


@pytest.mark.parametrize(
    ("row", "text"),
    [
        ({**GOOD, "prefix_id": "a"}, 'trace.jsonl line 2: has "prefix_id" but lacks "prefix_tokens"; give both'),
        ({**GOOD, "prefix_tokens": 50}, 'trace.jsonl line 2: has "prefix_tokens" but lacks "prefix_id"'),
        ({**GOOD, "prefix_id": "a", "prefix_tokens": 101}, "prefix_tokens 101 is more than prompt_tokens 100"),
        ({**GOOD, "prefix_id": "a", "prefix_tokens": 0}, "trace.jsonl line 2: prefix_tokens is 0"),
        ({**GOOD, "prefix_id": "a", "prefix_tokens": 2.5}, "prefix_tokens 2.5 is not a whole number"),
        ({**GOOD, "prefix_id": [1], "prefix_tokens": 5}, "prefix_id [1] is not an id"),
        ({**GOOD, "prefix_id": "", "prefix_tokens": 5}, 'prefix_id "" is not an id'),
    ],
)
def test_it_names_the_line_of_a_bad_trace_prefix(tmp_path: Path, row: dict, text: str) -> None:
    path = _jsonl(tmp_path, GOOD, row)
    sc = CHAT.to_dict()
    sc["traffic"] = {"qps": 1, "trace": str(path)}
    with pytest.raises(ScenarioError) as err:
        load_scenario(json_to_toml(sc))
    assert text in str(err.value)
    assert "\n" not in str(err.value)


def test_trace_prefixes_on_a_static_model_are_refused(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, {**GOOD, "prefix_id": 7, "prefix_tokens": 50})
    sc = DOC.to_dict()
    sc["traffic"] = {"qps": 1, "trace": str(path)}
    sc["models"]["big"]["tokens"] = 100
    with pytest.raises(ScenarioError) as err:
        load_scenario(json_to_toml(sc))
    assert err.value.path == "traffic.trace"
    assert "the trace's rows carry prefix_id, but model small batches statically" in str(err.value)


def json_to_toml(data: dict) -> str:
    import tomli_w

    return tomli_w.dumps(data)


def test_the_cli_exits_2_with_one_line_and_no_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "emulator", "run", "prefix-heavy-chat", "--set",
         "dispatcher.policy=weighted", "--set", "dispatcher.scorers={prefix = 1, speed = 1}"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "dispatcher.scorers.speed" in proc.stderr and "known scorers: prefix, queue, kv_free" in proc.stderr
