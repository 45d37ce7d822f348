"""The numbers pass for token-level designs: figures from the GPU and the model's
shape, roofline step costs, a trace's own sizes and peak, and the findings where a
design's goals break physics."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from emulator import load_scenario
from emulator.analysis.numbers import compute
from emulator.scenario.presets import load_preset

SCENARIO = """
name = "70b"
[traffic]
qps = 10
[hardware]
gpu = "H100-SXM-80GB"
gpu_memory_utilization = 0.9
[models.chat]
share = 1.0
worker_units = {units}
tokens = 1000
output_tokens = 200
[models.chat.arch]
model = "Llama-2-70B"
dtype_bytes = 2
[worker]
batching = "continuous"
kv_cache_tokens = "auto"
step_model = "roofline"
[[hosts]]
count = 2
units = 8
workers = ["chat@0", "chat@4"]
"""

#: The issue's keys, present for every continuous model.
KEYS = (
    "kv_bytes_per_token", "kv_capacity_tokens", "max_concurrent_seqs", "decode_step_floor_s",
    "prefill_s_per_1k_tokens", "max_output_tokens_per_s", "max_qps_per_worker",
    "workers_needed_peak", "ttft_floor_s", "tpot_at_full_concurrency_s",
)


def _report(units: int = 4, *overrides: str):
    return compute(load_scenario(SCENARIO.format(units=units)).with_overrides(list(overrides)))


@pytest.mark.parametrize(("units", "capacity"), [(2, 18_432), (4, 457_885)])
def test_it_gives_llama_2_70b_on_h100s_its_kv_bytes_and_capacity(units: int, capacity: int) -> None:
    r = _report(units)
    assert r.value("kv_bytes_per_token", "chat") == 327_680
    # (units x 80 GB x 0.9 - 68.98e9 x 2 bytes of weights) // 327,680 bytes a token
    expected = (units * 80 * 10**9 * Fraction(9, 10) - Fraction("68.98") * 2 * 10**9) // 327_680
    assert r.value("kv_capacity_tokens", "chat") == expected == capacity
    assert 'kv_cache_tokens = "auto"' in r.get("kv_capacity_tokens", "chat").explain


def test_it_gives_every_key_of_the_issue() -> None:
    keys = {f.key for f in _report().figures if f.model == "chat"}
    assert set(KEYS) <= keys


def test_it_gives_the_roofline_figures_by_hand_arithmetic() -> None:
    r = _report(4)
    weights = Fraction("68.98") * 2 * 10**9
    bandwidth = 4 * Fraction("3.35") * 10**12
    flops = 4 * Fraction("989.4") * 10**12
    assert r.value("decode_step_floor_s", "chat") == weights / bandwidth  # about 10.3 ms
    per_token = 2 * Fraction("68.98") * 10**9 / flops
    # A 1,000-token prefill alone is compute-bound: 1,000 x 2 x params / FLOPs.
    assert r.value("prefill_s_per_1k_tokens", "chat") == 1000 * per_token
    assert r.value("ttft_floor_s", "chat") == 1000 * per_token
    # TPOT alone: the weights and 1,001 tokens of KV read once.
    assert r.value("tpot_floor_s", "chat") == (weights + 327_680 * 1001) / bandwidth
    # Full concurrency: max_num_seqs 256 (the cache holds 381), mean context 1,100.
    n = 256
    step = max((weights + 327_680 * n * 1100) / bandwidth, n * per_token)
    assert r.value("decode_step_at_full_s", "chat") == step
    wq = 1 / (199 * step / n + 1000 * per_token)
    assert r.value("max_qps_per_worker", "chat") == r.value("worker_qps", "chat") == wq
    assert r.value("max_output_tokens_per_s", "chat") == wq * 200
    assert r.value("workers_needed_peak", "chat") == 10 / wq  # 10 QPS, no peak_qps: the mean
    assert "lower bound" in r.get("decode_step_floor_s", "chat").explain


def test_it_says_why_the_physical_figures_are_missing_without_a_gpu() -> None:
    report = compute(load_preset("continuous-comfortable"))
    fig = report.get("kv_bytes_per_token", "chat")
    assert fig.value is None and fig.display == "n/a" and "[hardware]" in fig.explain
    assert report.get("decode_step_floor_s", "chat").value is None
    assert report.value("kv_capacity_tokens", "chat") == 200_000
    assert set(KEYS) <= {f.key for f in report.figures if f.model == "chat"}


def _titles(report) -> dict[str, str]:
    return {f["title"]: f["severity"] for f in report.findings}


def test_it_finds_a_tpot_goal_under_the_time_to_read_the_weights() -> None:
    found = _titles(_report(4, "slo.tpot_s=0.008"))
    assert found["The TPOT goal is under the time chat's GPUs take to read its weights"] == "fix_now"
    assert not any("under what one chat decode step takes" in t for t in found)  # said once
    assert not any("read its weights" in t for t in _titles(_report(4, "slo.tpot_s=0.05")))


def test_it_finds_a_kv_cache_too_small_for_the_peaks_concurrency() -> None:
    # Two GPUs leave 18,432 tokens: 15 sequences of 1,200. At a peak of 12 QPS over
    # two workers each holds about 6 x latency sequences (Little's law).
    quiet = _report(2, "traffic.qps=1")
    assert not any("KV cache cannot hold" in t for t in _titles(quiet))
    peak = _titles(_report(2, "traffic.qps=1", "traffic.shape=step", "traffic.peak_qps=12"))
    assert peak["chat's KV cache cannot hold the concurrency its peak load implies"] == "fix_now"


def test_it_finds_a_peak_that_needs_more_gpus_than_the_hosts_have() -> None:
    report = _report(4, "traffic.qps=2000")
    title = next(t for t in _titles(report) if "GPUs at the peak" in t)
    assert title.endswith("the hosts have 16")
    assert _titles(report)[title] == "fix_now"
    assert not any("GPUs at the peak" in t for t in _titles(_report(4)))


def test_it_finds_a_kv_cache_bigger_than_the_gpus_memory() -> None:
    found = _titles(_report(2, "worker.kv_cache_tokens=100000"))
    assert found["chat's KV cache is bigger than its GPUs' memory"] == "fix_now"
    assert "chat's KV cache is bigger than its GPUs' memory" not in _titles(_report(2))


def test_it_sizes_a_traced_workload_by_its_means_and_its_busiest_minute(tmp_path: Path) -> None:
    # 30 requests in the first minute, then 10 spread over the next two.
    rows = [(i * 2.0, 800, 100) for i in range(30)] + [(60.0 + i * 12.0, 1600, 300) for i in range(10)]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({"arrival_s": t, "prompt_tokens": p, "output_tokens": o}) + "\n"
                            for t, p, o in rows))
    report = compute(load_scenario(SCENARIO.format(units=4)).with_overrides([f'traffic.trace="{path}"']))
    assert report.value("ttft_floor_s", "chat") == compute(
        load_scenario(SCENARIO.format(units=4)).with_overrides(["models.chat.tokens=1000"])
    ).value("ttft_floor_s", "chat")  # mean prompt (30 x 800 + 10 x 1600) / 40 = 1,000
    assert "over 40 requests" in report.get("kv_concurrent_seqs", "chat").explain
    need = report.get("workers_needed_peak", "chat")
    assert need.value == Fraction(30, 60) / report.value("worker_qps", "chat")
    assert "busiest minute: 30 arrivals" in need.explain


def test_the_roofline_preset_runs_inside_its_slos_and_above_its_floors() -> None:
    from emulator import Engine

    scenario = load_preset("roofline-70b-h100")
    report = compute(scenario)
    assert report.value("kv_capacity_tokens", "chat") == 457_885
    assert not [f for f in report.findings if f["severity"] == "fix_now"]
    summary = Engine(scenario).run()
    floor = float(report.value("decode_step_floor_s", "chat"))
    # TPOT above what reading the weights at full bandwidth takes, and inside the goal.
    assert floor < summary.tpot_s["p50"] < 0.1
    assert float(report.value("ttft_floor_s", "chat")) <= summary.ttft_s["p50"] < 2.0
    assert summary.preemptions == 0 and summary.slo_goodput > 0.95
