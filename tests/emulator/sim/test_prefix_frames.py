"""Prefix caching in frames, the summary, the CLI and under faults; and the shipped
preset's comparison of round-robin with prefix-aware routing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from prefix_reference import PrefixRequest
from test_prefix_reference import write_trace
from token_scenarios import WORKER, scenario

from emulator import Engine, Frame, Scenario, Summary
from emulator.scenario.presets import load_preset


def _short(policy: str, duration_s: float = 60.0) -> Scenario:
    return load_preset("prefix-heavy-chat").with_overrides(
        [f"dispatcher.policy={policy}", f"duration_s={duration_s}"]
    )


def test_frames_carry_hit_rates_that_add_up_to_the_summary() -> None:
    engine = Engine(_short("prefix_aware", 30))
    frames = engine.advance_to(30)
    summary = engine.summary()
    assert summary.prefix and summary.prefill_tokens_saved > 0
    saved = sum(f.m["prefill_tokens_saved"][0] for f in frames)
    assert saved == summary.prefill_tokens_saved
    rates = [f.m["prefix_hit_rate"][0] for f in frames if f.m["prefix_hit_rate"][0] is not None]
    assert rates and all(0.0 <= r <= 1.0 for r in rates)
    last = frames[-1].to_dict()
    assert len(last["w"]["prefix_hit"]) == 4
    assert Frame.from_dict(last).to_dict() == last
    worker_rates = summary.prefix_hit_rate_by_worker
    assert len(worker_rates) == 4 and all(r is not None for r in worker_rates)
    assert summary.per_model["chat"].prefix_hit_rate == summary.prefix_hit_rate


def test_the_summary_round_trips_with_its_prefix_figures() -> None:
    summary = Engine(_short("round_robin", 20)).run()
    data = summary.to_dict()
    assert data["prefix_hit_rate"] == summary.prefix_hit_rate
    assert data["per_model"]["chat"]["prefill_tokens_saved"] == summary.prefill_tokens_saved
    again = Summary.from_dict(json.loads(json.dumps(data)))
    assert again.to_dict() == data


def test_a_run_without_prefixes_reports_none_of_it() -> None:
    engine = Engine(load_preset("continuous-comfortable").with_overrides(["duration_s=10"]))
    frames = engine.advance_to(10)
    data = engine.summary().to_dict()
    assert "prefix_hit_rate" not in data and "prefix_hit_rate_by_worker" not in data
    assert "prefix_hit_rate" not in frames[0].m
    assert "prefix_hit" not in frames[0].to_dict()["w"]


def test_a_worker_that_dies_loses_its_cache(tmp_path: Path) -> None:
    # One worker, one prefix group, a request every 2 s. The worker dies at 20.5 s and
    # is back at 21 s: the request of 22 s recomputes the prefix, the later ones hit.
    requests = [PrefixRequest(2.0 * i, 1000, 20, 0, 800) for i in range(30)]
    sc = scenario(
        workers=1, duration_s=70, trace=write_trace(requests, tmp_path / "p.jsonl"),
        params=WORKER, worker={"prefix_cache": True},
    )
    data = sc.to_dict()
    data["faults"] = [{"at_s": 20.5, "kill": "worker:m:0"}, {"at_s": 21.0, "restore": "worker:m:0"}]
    summary = Engine(Scenario.from_dict(data, max_requests=None)).run()
    assert summary.ok == 30
    assert summary.prefill_tokens_saved == (30 - 2) * 800
    assert summary.prefix_hit_rate == pytest.approx(28 / 30)


def test_the_cli_shows_the_prefix_table() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "emulator", "run", "prefix-heavy-chat", "--set", "duration_s=20"],
        capture_output=True, text=True, timeout=120, check=True,
    )
    out = proc.stdout
    assert "prefix_hit" in out and "prefill_saved" in out
    assert "prefix hit rate by worker:" in out


def test_the_preset_shows_prefix_aware_routing_beating_round_robin() -> None:
    # The first 120 s of the preset's comparison (the docs quote the full 300 s).
    rr = Engine(_short("round_robin", 120)).run()
    pa = Engine(_short("prefix_aware", 120)).run()
    assert rr.prefix_hit_rate is not None and pa.prefix_hit_rate is not None
    assert rr.prefix_hit_rate < 0.65 < 0.85 < pa.prefix_hit_rate
    assert pa.ttft_s["p50"] < 0.2 < 1.0 < rr.ttft_s["p50"]
    assert pa.slo_goodput is not None and pa.slo_goodput > 0.95


@pytest.mark.parametrize("policy", ["round_robin", "least_loaded", "pull", "prefix_aware", "weighted"])
def test_the_books_balance_through_a_host_loss_under_every_policy(policy: str) -> None:
    sc = _short(policy, 40)
    data = sc.to_dict()
    data["faults"] = [{"at_s": 10.0, "kill": "host:1"}, {"at_s": 20.0, "restore": "host:1"}]
    data["client"]["retries"] = 1
    engine = Engine(Scenario.from_dict(data))
    frames = engine.advance_to(40)
    s = engine.summary()
    assert s.balanced()
    assert s.lost > 0  # the host's requests were lost with it
    assert 0 < s.prefill_tokens_saved <= s.prefix_tokens_seen
    # While host 1 is down its workers (2 and 3) look nothing up.
    down = [f for f in frames if 11 <= f.t_s < 20]
    assert down and all(f.w_prefix_hit is not None and f.w_prefix_hit[2:] == [None, None] for f in down)
