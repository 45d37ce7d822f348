"""Mistakes in scenario files: each gives one line naming the key path and the fix,
and the CLI exits with status 2 and no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from emulator import ScenarioError, load_scenario
from emulator.scenario.presets import load_preset

BASE = load_preset("doc-as-written")

# (override, expected key path, text the message must contain)
MISTAKES = [
    (
        "dispatcher.policy=rr",
        "dispatcher.policy",
        'dispatcher.policy: "rr" is not one of round_robin, pull, least_loaded',
    ),
    ("models.small.share=0.4", "models", "models: shares add up to 0.9, not 1"),
    (
        'hosts[1].workers[4]="small@9"',
        "hosts[1].workers[4]",
        '"small@9" needs units 9-10 but the host has 10 units',
    ),
    ('hosts[0].workers=["big@0", "big@4"]', "hosts[0].workers[1]", 'overlaps "big@0" on unit 4'),
    ('hosts[1].workers[0]="medium@0"', "hosts[1].workers[0]", 'names no model "medium"'),
    ('faults[0].kill="dispatcher:medium"', "faults[0].kill", 'names no model "medium"'),
    ('faults[1].kill="host:7"', "faults[1].kill", "hosts are numbered 0-2"),
    ('faults[1].kill="worker:big:4"', "faults[1].kill", "big workers are numbered 0-3"),
    ('faults[1].kill="rack:1"', "faults[1].kill", "is not a fault target"),
    ("faults[2].at_s=301", "faults[2].at_s", "after the end of the run"),
    ("duration_s=0", "duration_s", "must be greater than 0"),
    ("worker.batch_s=-1.5", "worker.batch_s", "must be greater than 0"),
    ("traffic.qps=-5", "traffic.qps", "must be at least 0"),
    ("traffic.qps=1000000", "duration_s", "over the run budget"),
    ("traffic.qpx=5", "traffic.qpx", "unknown key"),
    ('traffic.qps="lots"', "traffic.qps", "is not a number"),
    ('client.timeout_s="soon"', "client.timeout_s", 'is not a number of seconds or "none"'),
    ("hosts[0].count=0", "hosts[0].count", "must be at least 1"),
    ('hosts[0].workers=["big0"]', "hosts[0].workers[0]", "is not MODEL@FIRST_UNIT"),
    ("models.small.tokens=20000", "models.small.tokens", "more than dispatcher.max_batch_tokens"),
    ("gateway.rate_limit_qps=0.5", "gateway.rate_limit_qps", "below 1 request a second"),
    ("sample_s=0.0001", "sample_s", "frames"),
    ("hosts[0].count=100000000", "hosts[0].count", "more than 100,000 hosts"),
    (
        "gateway.keys=1000000000",
        "gateway.keys",
        "more than 10,000,000 rate-limit counters",
    ),
    ("client.retries=2", None, None),  # valid: a control that the table itself is sound
]


@pytest.mark.parametrize(("override", "path", "text"), MISTAKES)
def test_it_names_the_key_and_the_fix_in_one_line(
    override: str, path: str | None, text: str | None
) -> None:
    if path is None:
        assert BASE.with_overrides([override]).client.retries == 2
        return
    with pytest.raises(ScenarioError) as err:
        BASE.with_overrides([override])
    message = str(err.value)
    assert "\n" not in message
    assert err.value.path == path
    assert message.startswith(f"{path}:")
    assert text in message


def test_it_reports_toml_syntax_errors_with_their_line() -> None:
    with pytest.raises(ScenarioError) as err:
        load_scenario('name = "x"\nduration_s = = 3\n')
    assert "not valid TOML" in str(err.value) and "line 2" in str(err.value)


def test_it_reports_missing_sections_and_fault_actions() -> None:
    with pytest.raises(ScenarioError, match=r"^traffic: missing"):
        load_scenario('name = "x"\n[models.m]\nshare = 1\nworker_units = 1\ntokens = 1\n')
    with pytest.raises(ScenarioError, match=r"^faults\[0\]: needs exactly one of kill or restore"):
        BASE.with_overrides(['faults[0].restore="host:1"'])


def test_it_refuses_unknown_presets_and_missing_files() -> None:
    with pytest.raises(ScenarioError, match="presets are doc-as-written"):
        load_scenario("no-such-preset")
    with pytest.raises(ScenarioError, match="no such file"):
        load_scenario("missing/scenario.toml")


def test_it_refuses_malformed_overrides() -> None:
    with pytest.raises(ScenarioError, match="is not KEY=VALUE"):
        BASE.with_overrides(["traffic.qps"])
    with pytest.raises(ScenarioError, match=r"^hosts\[5\]: no such list item"):
        BASE.with_overrides(["hosts[5].count=2"])


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "emulator", *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["run", "doc-as-written", "--set", "dispatcher.policy=rr"],
            'dispatcher.policy: "rr" is not one of round_robin, pull, least_loaded',
        ),
        (
            ["run", "doc-as-written", "--set", "models.small.share=0.4"],
            "models: shares add up to 0.9, not 1",
        ),
        (["run", "no-such-preset"], "is not a scenario file or a preset"),
        (["run", "doc-as-written", "--set", "traffic.qps"], "is not KEY=VALUE"),
        (["run", "doc-as-written", "--seed", "-1"], "argument --seed: -1 is below 0"),
    ],
)
def test_the_cli_exits_2_with_one_line_and_no_traceback(args: list[str], expected: str) -> None:
    result = _cli(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert expected in lines[0]
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_the_cli_reports_a_bad_file_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(load_preset("doc-as-written").to_toml().replace('"big@5"', '"big@7"', 1))
    result = _cli("run", str(bad), "--json")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        'error: hosts[0].workers[1]: "big@7" needs units 7-11 but the host has 10 units'
    )
