"""``python -m emulator place``: ranking, fragmentation and bad input (as a user runs it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEED = ["--units", "10", "--worker", "small=2", "--worker", "big=5"]


def place(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "emulator", "place", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_it_ranks_the_seed_placements_with_a_table_per_failure_case():
    done = place("--hosts", "3", *SEED, "--split", "small=0.5,big=0.5", "--qps-per-worker", "small=40/3,big=40/3")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "#1  1 big + 2 small / 1 big + 2 small / 1 big + 2 small" in out
    assert "2 big / 2 big / 5 small" in out
    assert "host:0 (or 2 alike)" in out
    assert "|BbbbbSsSs.|" in out


def test_it_prints_json_strips_for_the_heatmap():
    done = place("--hosts", "3", *SEED, "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    maximal = {h["label"] for h in data["host_layouts"] if h["maximal"]}
    assert maximal == {"5 small", "2 big", "1 big + 2 small"}
    assert data["ranked"][0]["hosts"][0]["strip"] == ["big"] * 5 + ["small"] * 4 + [None]


def test_it_reports_fragmentation_and_places_incrementally():
    done = place(*SEED, "--check", "small@1,small@6", "--check", "", "--add", "big=1", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["fragmentation"]["hosts"][0]["largest_free_block"] == 3
    assert data["fragmentation"]["large_lost"] == 1
    assert data["incremental"]["placed"] == [{"model": "big", "host": 1, "first_unit": 0}]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--hosts", "3", "--units", "10", "--worker", "small=2", "--worker", "big=11"], "cannot fit"),
        (["--hosts", "3", "--units", "0", "--worker", "small=2"], "--units"),
        (["--hosts", "3", *SEED, "--split", "small=0.5,big=0.6"], "add up to 1.1"),
        (["--hosts", "3", *SEED, "--split", "small=0.5,tiny=0.5"], "unknown model 'tiny'"),
        (["--hosts", "3", *SEED, "--qps-per-worker", "tiny=3"], "unknown model 'tiny'"),
        (["--hosts", "three", *SEED], "--hosts"),
        ([*SEED, "--check", "big@7"], "needs units 7-11"),
        (["--hosts", "3", "--units", "10"], "--worker"),
        (["--hosts", "3", *SEED, "--bogus"], "unrecognized"),
    ],
)
def test_it_rejects_bad_input_with_one_line_and_status_2(args, words):
    done = place(*args)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0]
