"""``python -m emulator numbers``: the table, the JSON form and bad input (as a user runs it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from scenarios import EXAMPLE

ROOT = Path(__file__).resolve().parents[2]


def numbers(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "emulator", "numbers", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_it_prints_the_doc_as_written_figures_with_their_explanations():
    done = numbers("doc-as-written")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "== fleet ==" in out and "== small ==" in out
    gap = next(line for line in out.splitlines() if line.strip().startswith("Gap factor at peak traffic "))
    assert "50x" in gap and "200 QPS" in gap
    assert "[fix_now] Capacity is about 50x short of the peak goal" in out


def test_it_prints_json_with_figures_and_findings():
    done = numbers(str(EXAMPLE), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    figs = {(f["model"], f["key"]): f for f in data["figures"]}
    assert figs[("fleet", "queue_growth_most_avg")]["value"] == 800
    assert figs[("fleet", "fill_time_avg_s")]["display"] == "20 ms"
    assert {f["severity"] for f in data["findings"]} <= {"fix_now", "clarify", "mention"}


def test_it_rejects_an_unknown_model_in_a_scenario_with_one_line_and_status_2(tmp_path):
    text = EXAMPLE.read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace('workers = ["big@0", "big@5"]', 'workers = ["huge@0"]'))
    done = numbers(str(bad))
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and "huge" in done.stderr


def test_it_rejects_a_missing_file_with_one_line_and_status_2():
    done = numbers("no-such-file.toml")
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
