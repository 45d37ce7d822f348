"""The numbers pass for token-level designs: figures from the GPU and the model's
shape, roofline step costs, a trace's own sizes and peak, and the findings where a
design's goals break physics."""

from __future__ import annotations

import json
import math
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
    # Tensor parallelism 4: two all-reduces in each of 80 layers, 61.25 us each, and a
    # ring moves 2 x 3 / 4 of each token's 8,192 BF16 activations over the 450 GB/s link.
    fixed = 160 * Fraction("61.25") / 10**6
    comm = 160 * Fraction(3, 2) * 8192 * 2 / (450 * 10**9)
    assert r.value("tp_step_latency_s", "chat") == fixed  # 9.8 ms
    assert r.value("tp_comm_per_token_s", "chat") == comm  # about 8.7 us
    # A 1,000-token prefill alone is compute-bound: 1,000 x 2 x params / FLOPs, plus the
    # step's collectives.
    assert r.value("prefill_s_per_1k_tokens", "chat") == 1000 * per_token + fixed + 1000 * comm
    assert r.value("ttft_floor_s", "chat") == 1000 * per_token + fixed + 1000 * comm
    # TPOT alone: the weights and 1,001 tokens of KV read once, and one token's collectives.
    assert r.value("tpot_floor_s", "chat") == (weights + 327_680 * 1001) / bandwidth + fixed + comm
    # Full concurrency: max_num_seqs 256 (the cache holds 416). A running sequence holds
    # its 1,000-token prompt and on average (200 + 1) / 2 generated tokens.
    n, context, out = 256, 1000 + Fraction(201, 2), 200
    kv = Fraction(327_680) / bandwidth
    step = max(weights / bandwidth + kv * n * context, n * per_token) + fixed + comm * n
    assert abs(r.value("decode_step_at_capacity_s", "chat") - step) < Fraction(1, 10**12)
    # A prompt's compute first fills the step's memory time: of Poisson(n / (out - 1))
    # prompts a step, the first costs what it adds beyond the decode step, the others
    # their whole compute; each pays its tokens' communication.
    first = max(weights / bandwidth + kv * (n * context + 1000), per_token * (n + 1000)) + fixed \
        + comm * (n + 1000) - step
    more = per_token * 1000 + comm * 1000
    mu = n / (out - 1)
    extra = float(more) + float(first - more) * -math.expm1(-mu) / mu
    wq = 1 / ((out - 1) * float(step) / n + extra)
    assert float(r.value("max_qps_per_worker", "chat")) == pytest.approx(wq, rel=1e-9)
    assert r.value("worker_qps", "chat") == r.value("max_qps_per_worker", "chat")  # no goal binds
    assert float(r.value("max_output_tokens_per_s", "chat")) == pytest.approx(wq * 200, rel=1e-9)
    assert float(r.value("workers_needed_peak", "chat")) == pytest.approx(10 / wq, rel=1e-9)  # constant: the mean
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
    # Two GPUs leave 18,432 tokens: 16 running sequences of 1,100.5 tokens. At a peak of
    # 14 QPS over four workers each runs about 18 (Little's law on the step model).
    quiet = _report(2, "traffic.qps=1")
    assert not any("KV cache cannot hold" in t for t in _titles(quiet))
    peak = _titles(_report(2, "traffic.qps=1", "traffic.shape=step", "traffic.peak_qps=14"))
    assert peak["chat's KV cache cannot hold the concurrency its peak load implies"] == "fix_now"


def test_it_finds_a_load_that_needs_more_gpus_than_the_hosts_have() -> None:
    report = _report(4, "traffic.qps=2000")
    growth = next(f for f in report.findings if "queue grows" in f["title"])
    assert growth["severity"] == "fix_now"
    assert "GPUs; the hosts have 16)" in growth["body"]
    assert not any("queue grows" in f["title"] for f in _report(4).findings)


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
    # The run lasts long enough to replay every row (a run replays only what fits in it).
    report = compute(load_scenario(SCENARIO.format(units=4)).with_overrides([f'traffic.trace="{path}"',
                                                                             "duration_s=180"]))
    assert report.value("ttft_floor_s", "chat") == compute(
        load_scenario(SCENARIO.format(units=4)).with_overrides(["models.chat.tokens=1000"])
    ).value("ttft_floor_s", "chat")  # mean prompt (30 x 800 + 10 x 1600) / 40 = 1,000
    assert "over 40 requests" in report.get("kv_running_tokens", "chat").explain
    peak = report.get("offered_peak_qps", "chat")
    assert peak.value == Fraction(30, 60)
    assert "busiest 60 s of the replayed trace: 30 arrivals" in peak.explain
    assert report.value("workers_needed_peak", "chat") == Fraction(30, 60) / report.value("worker_qps", "chat")


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


def test_the_proxy_hop_adds_to_the_ttft_floor_exactly() -> None:
    plain, hopped = _report(4), _report(4, "dispatcher.proxy_hop_s=0.002")
    assert hopped.value("ttft_floor_s", "chat") == plain.value("ttft_floor_s", "chat") + Fraction(2, 1000)
    assert "0.002 s proxy hop" in hopped.get("ttft_floor_s", "chat").explain
    assert hopped.value("tpot_floor_s", "chat") == plain.value("tpot_floor_s", "chat")
