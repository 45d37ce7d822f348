"""``python -m emulator``: run and presets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from scenarios import EXAMPLE

from emulator.cli import REGISTER, build_parser, main
from emulator.scenario.presets import PRESETS


def test_it_runs_the_shared_example_unchanged_and_prints_balanced_json() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "emulator", "run", str(EXAMPLE), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # no progress bar with --json
    summary = json.loads(result.stdout)
    assert summary["sim_s"] == 300
    assert summary["offered"] == sum(
        summary[k] for k in ("ok", "timed_out", "shed", "lost", "orphaned", "in_system_end")
    )
    assert set(summary["per_model"]) == {"small", "big"}


def test_it_lists_every_preset_one_line_each(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["presets"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split()[0] for line in lines] == list(PRESETS)


def test_it_prints_a_readable_table_with_seed_and_overrides(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["run", "host-loss", "--seed", "3", "--set", "duration_s=30", "--set", "faults=[]"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines()[0].startswith("host-loss: 30 s simulated")
    assert any(line.startswith("small") for line in out.splitlines())
    assert "books balance: yes" in out


def test_it_writes_every_frame_as_json_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "frames.jsonl"
    assert (
        main(
            [
                "run",
                "doc-as-written",
                "--set",
                "duration_s=12",
                "--set",
                "faults=[]",
                "--frames",
                str(out),
                "--json",
            ]
        )
        == 0
    )
    frames = [json.loads(line) for line in out.read_text().splitlines()]
    assert [f["i"] for f in frames] == list(range(12))
    assert json.loads(capsys.readouterr().out)["offered"] == sum(
        sum(f["m"]["offered"]) for f in frames
    )


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_it_reports_a_frames_file_it_cannot_write_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["run", "doc-as-written", "--set", "duration_s=5", "--set", "faults=[]"]
    assert main([*args, "--frames", "/dev/full", "--json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --frames: cannot write /dev/full (No space left on device)"]


def test_it_has_an_obvious_place_for_more_subcommands() -> None:
    def register_hello(sub: object) -> None:
        p = sub.add_parser("hello")  # type: ignore[attr-defined]
        p.set_defaults(func=lambda args: 7)

    REGISTER.append(register_hello)
    try:
        assert main(["hello"]) == 7
    finally:
        REGISTER.remove(register_hello)
    assert build_parser().parse_args(["presets"]).command == "presets"


def test_it_shows_a_progress_bar_on_long_runs_but_not_with_json(tmp_path: Path) -> None:
    env = {"EMULATOR_PROGRESS": "1", "PATH": "/usr/bin:/bin"}
    code = (
        "import emulator.cli.run as c; c.PROGRESS_AFTER_S = 0.0; "
        "raise SystemExit(c.main(['run', 'doc-as-written', '--set', 'duration_s=20', "
        "'--set', 'faults=[]'{extra}]))"
    )
    plain = subprocess.run(
        [sys.executable, "-c", code.format(extra="")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert plain.returncode == 0 and "simulated" in plain.stderr and "[" in plain.stderr
    quiet = subprocess.run(
        [sys.executable, "-c", code.format(extra=", '--json'")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert quiet.returncode == 0 and quiet.stderr == ""
