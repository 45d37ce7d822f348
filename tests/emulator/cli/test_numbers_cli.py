"""``python -m emulator numbers``: the table, the JSON form and bad input (as a user runs it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from scenarios import EXAMPLE

ROOT = Path(__file__).resolve().parents[3]


def numbers(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "emulator", "numbers", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_it_prints_the_doc_as_written_figures_with_their_explanations():
    done = numbers("doc-as-written")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "== fleet ==" in out and "== small ==" in out
    # The headline: the gap for the layout as placed, the best mix beside it.
    headline = out.split("Headline", 1)[1].split("==", 1)[0]
    assert "gap at the peak: 93.8x" in headline and "Gap at the peak with the best mix 93.8x" in headline
    assert "latency floor (a minimum): 1.5 s" in headline
    most = next(line for line in out.splitlines() if line.strip().startswith("Gap against the most"))
    assert "50x" in most and "200 QPS" in most
    assert "[fix_now] Capacity is about 93.8x short of the peak goal" in out
    # Each host's loss: host 2 carries every small worker.
    losses = out.split("== each host's loss ==", 1)[1]
    assert next(line for line in losses.splitlines() if "host:2" in line).rstrip().endswith("small")


def test_it_takes_overrides_as_run_does():
    done = numbers("prefix-heavy-chat", "--set", "dispatcher.policy=prefix_aware", "--json")
    assert done.returncode == 0, done.stderr
    routed = json.loads(done.stdout)
    plain = json.loads(numbers("prefix-heavy-chat", "--json").stdout)
    assert routed["analysis"]["capacity_qps"] > 50 > plain["analysis"]["capacity_qps"]
    bad = numbers("prefix-heavy-chat", "--set", "dispatcher.policy=nope")
    assert bad.returncode == 2 and bad.stderr.startswith("error: dispatcher.policy")


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
