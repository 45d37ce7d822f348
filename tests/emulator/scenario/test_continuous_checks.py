"""Token-level scenarios: every new key gets a one-line error naming it and the fix,
faults keep their meaning, and the seed's scenarios read back unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest
from token_reference import TokenRequest
from token_scenarios import poisson_requests, scenario, write_trace

from emulator import Engine, ScenarioError, load_scenario
from emulator.scenario.presets import load_preset

BASE = load_preset("continuous-comfortable")

# (override, expected key path, text the message must contain)
MISTAKES = [
    ('worker.batching="iterative"', "worker.batching", '"iterative" is not one of static, continuous'),
    ("worker.max_num_seqs=0", "worker.max_num_seqs", "must be at least 1"),
    ("worker.max_batched_tokens=-5", "worker.max_batched_tokens", "must be at least 1"),
    ("worker.max_batched_tokens=100", "worker.max_batched_tokens", "below max_num_seqs (256)"),
    ("worker.kv_cache_tokens=0", "worker.kv_cache_tokens", "must be at least 1"),
    ("worker.kv_cache_tokens=1200", "worker.kv_cache_tokens", "cannot hold one request"),
    ("worker.step_base_s=0", "worker.step_base_s", "must be greater than 0"),
    ("worker.prefill_token_s=-1e-5", "worker.prefill_token_s", "must be at least 0"),
    ("worker.decode_seq_s=-1", "worker.decode_seq_s", "must be at least 0"),
    ("worker.kv_token_s=-1", "worker.kv_token_s", "must be at least 0"),
    ("worker.prefill_attn_s=-1", "worker.prefill_attn_s", "must be at least 0"),
    ("models.chat.output_tokens=0", "models.chat.output_tokens", "must be at least 1"),
    ("models.chat.output_tokens_cv=-1", "models.chat.output_tokens_cv", "must be at least 0"),
    ("models.chat.worker.kv_cache_tokens=900", "models.chat.worker.kv_cache_tokens", "cannot hold"),
    ("models.chat.worker.speed=2", "models.chat.worker.speed", "unknown key"),
    ("dispatcher.max_batch_tokens=4096", "dispatcher.max_batch_tokens", "does not apply to continuous"),
    ("dispatcher.close_after_s=0.5", "dispatcher.close_after_s", "does not apply to continuous"),
    ("slo.ttft_s=0", "slo.ttft_s", "must be greater than 0"),
    ("slo.p99=1", "slo.p99", "unknown key"),
    ('traffic.trace="no/such/trace.csv"', "traffic.trace", "no such file"),
    ("traffic.trace_speedup=0", "traffic.trace_speedup", "must be greater than 0"),
    ("worker.kv_cache_tokens=100000", None, None),  # valid: the table itself is sound
]


@pytest.mark.parametrize(("override", "path", "text"), MISTAKES)
def test_it_names_each_new_key_and_its_fix_in_one_line(
    override: str, path: str | None, text: str | None
) -> None:
    if path is None:
        assert BASE.with_overrides([override]).worker.kv_cache_tokens == 100_000
        return
    with pytest.raises(ScenarioError) as err:
        BASE.with_overrides([override])
    message = str(err.value)
    assert "\n" not in message and err.value.path == path
    assert text in message, message


def test_it_reads_a_seed_scenario_back_without_new_keys() -> None:
    data = load_preset("doc-as-written").to_dict()
    assert "batching" not in data["worker"] and "trace" not in data["traffic"]
    assert "output_tokens" not in data["models"]["small"] and "slo" not in data


def test_a_per_model_worker_override_mixes_engines_in_one_fleet() -> None:
    mixed = load_preset("doc-as-written").with_overrides(
        [
            'models.big.worker={batching="continuous", kv_cache_tokens=50000}',
            "models.big.output_tokens=100",
            "duration_s=30",
            "faults=[]",
        ]
    )
    assert mixed.batching_of("big") == "continuous" and mixed.batching_of("small") == "static"
    assert mixed.worker_for("big").kv_cache_tokens == 50_000
    engine = Engine(mixed)
    frames = engine.advance_to(30)
    summary = engine.summary()
    assert summary.balanced()
    assert summary.per_model["big"].token_level and not summary.per_model["small"].token_level
    last = frames[-1]
    big, small = last.models.index("big"), last.models.index("small")
    assert last.m["running"][small] is None and last.m["backlog"][big] is None
    assert last.w_kv is not None
    assert [kv is None for kv in last.w_kv] == [m == small for m in engine.fleet.model_list]
    assert Engine(load_scenario(mixed.to_toml())).run().to_dict()["ok"] == summary.ok


def test_a_request_no_worker_can_hold_is_shed_with_its_reason(tmp_path: Path) -> None:
    requests = poisson_requests(qps=5, duration_s=20, prompt=100, output=10)
    requests[3] = type(requests[3])(requests[3].arrival_s, 150_000, 60_000)
    trace = write_trace(requests, tmp_path / "t.jsonl")
    summary = Engine(scenario(workers=1, duration_s=20, trace=trace)).run()
    assert summary.shed == summary.shed_oversized == 1
    assert summary.ok + summary.in_system_end == len(requests) - 1  # the last may still run


def test_a_dead_host_loses_what_its_workers_hold_and_the_rest_go_on() -> None:
    engine = Engine(scenario(workers=4, duration_s=40, qps=40))
    engine.advance_to(10)
    engine.inject("kill host:1")
    engine.advance_to(40)
    summary = engine.summary()
    assert summary.lost > 0 and summary.balanced()
    assert summary.ok > 0.6 * summary.offered


def test_a_cold_failover_orphans_the_responses_of_requests_at_workers() -> None:
    engine = Engine(scenario(workers=2, duration_s=30, qps=20, dispatcher={"standby": "cold"}))
    engine.advance_to(10)
    engine.inject("kill dispatcher:m")
    engine.advance_to(30)
    cold = engine.summary()
    assert cold.orphaned > 0 and cold.balanced()
    warm = Engine(scenario(workers=2, duration_s=30, qps=20, dispatcher={"standby": "replicated"}))
    warm.advance_to(10)
    warm.inject("kill dispatcher:m")
    warm.advance_to(30)
    assert warm.summary().orphaned == 0


def test_it_refuses_to_set_a_rate_on_a_replayed_trace(tmp_path: Path) -> None:
    trace = write_trace(poisson_requests(qps=5, duration_s=10, prompt=100, output=5), tmp_path / "t.jsonl")
    engine = Engine(scenario(workers=1, duration_s=10, trace=trace))
    with pytest.raises(ScenarioError, match="replays a trace"):
        engine.set_qps(50)


def test_it_replays_the_shipped_azure_trace_with_its_own_sizes() -> None:
    from emulator.scenario.traces import load_trace

    sc = scenario(workers=8, duration_s=120, trace=Path("azure-conv-2023"))  # a named trace
    engine = Engine(sc)
    engine.run()
    store = engine.disp[0].store
    rows = engine.disp[0].ingested
    assert rows == int((load_trace("azure-conv-2023").arrival_s <= 120).sum()) > 400
    assert int(store.tokens[0]) == 374 and int(store.output[0]) == 44  # the file's first row
    assert engine.summary().balanced()


def test_it_expects_exactly_the_requests_a_traced_run_offers(tmp_path: Path) -> None:
    requests = [TokenRequest(float(t), 100, 5) for t in (0.0, 1.0, 2.5, 4.0)]  # the last at the end
    sc = scenario(workers=1, duration_s=4.0, trace=write_trace(requests, tmp_path / "edge.jsonl"))
    assert sc.expected_requests() == Engine(sc).run().offered == 3
