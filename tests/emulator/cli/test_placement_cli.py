"""``python -m emulator place``: ranking, fragmentation and bad input (as a user runs it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
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


def _numbers(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "emulator", "numbers", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("preset", ["doc-as-written", "disagg-decode-undersized"])
def test_a_scenarios_placement_prints_the_pages_headline_and_the_analysiss_capacity(preset):
    from emulator.analysis.fleet import analyse
    from emulator.cli.place_text import _fmt
    from emulator.scenario import load_scenario

    analysis = analyse(load_scenario(preset, max_requests=None)).to_dict()
    data = json.loads((done := place("--scenario", preset, "--json")).stdout or "{}")
    assert done.returncode == 0, done.stderr
    assert data["analysis"]["capacity_qps"] == analysis["capacity_qps"]
    assert data["analysis"]["worst_loss"] == analysis["worst_loss"]
    for name, model in analysis["models"].items():
        assert data["analysis"]["models"][name]["capacity_qps"] == model["capacity_qps"]
        assert data["analysis"]["models"][name]["worst_loss"] == model["worst_loss"]
    text = place("--scenario", preset).stdout
    # The headline is the numbers pass's, line for line.
    numbers = _numbers(preset).stdout.splitlines()
    start = numbers.index("Headline")
    headline = numbers[start:numbers.index("", start)]
    assert len(headline) > 1 and "\n".join(headline) in text
    # Capacity and headroom as the analysis gives them.
    worst = analysis["worst_loss"]
    assert (f"  fleet at its split: {_fmt(analysis['capacity_qps'], 'QPS')}; host:{worst['host']} lost leaves "
            f"{_fmt(worst['fleet_qps'], 'QPS')}") in text
    for name, model in analysis["models"].items():
        assert f"  {name}: {_fmt(model['capacity_qps'], 'QPS')}" in text
        assert f"host:{model['worst_loss']['host']} lost leaves {_fmt(model['worst_loss']['capacity_qps'], 'QPS')}" in text


def test_a_split_fleets_placement_names_the_binding_pool_and_the_loss_that_takes_it_down():
    text = place("--scenario", "disagg-decode-undersized").stdout
    assert "  chat: 14.2 QPS, decode pool binds; host:3 lost leaves 0 QPS (down)" in text
    assert "host:3 lost leaves 0 QPS, chat down" in text
