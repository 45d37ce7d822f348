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


def test_it_gives_llama_2_70b_its_kv_figures_on_2_and_4_h100s(tmp_path: Path):
    text = (ROOT / "emulator" / "scenario" / "presets" / "roofline-70b-h100.toml").read_text()
    for units, capacity in ((4, 457_885), (2, 18_432)):
        path = tmp_path / f"h100x{units}.toml"
        path.write_text(text.replace("worker_units = 4", f"worker_units = {units}"))
        done = numbers(str(path), "--json")
        assert done.returncode == 0, done.stderr
        chat = {f["key"]: f for f in json.loads(done.stdout)["figures"] if f["model"] == "chat"}
        assert chat["kv_bytes_per_token"]["value"] == 327_680
        assert chat["kv_capacity_tokens"]["value"] == capacity
        assert chat["decode_step_floor_s"]["display"] == f"{20.6 if units == 2 else 10.3} ms"


def test_it_names_an_unknown_gpu_and_lists_the_catalog(tmp_path: Path):
    text = (ROOT / "emulator" / "scenario" / "presets" / "roofline-70b-h100.toml").read_text()
    path = tmp_path / "bad.toml"
    path.write_text(text.replace('gpu = "H100-SXM-80GB"', 'gpu = "H100"'))
    done = numbers(str(path))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith('error: hardware.gpu: "H100" is not in the catalog; known GPUs: A100-40GB')
