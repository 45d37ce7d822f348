"""The break and trace passes' facts, read from the scenario: the one-click changes
are overrides the run API accepts, the policies are called alike exactly when the
emulator gives them identical runs, and the suggested comparison differs."""

from __future__ import annotations

from typing import Any

import pytest

from emulator.scenario import Scenario, load_scenario
from emulator.scenario.overrides import apply_overrides
from emulator.sim.engine import Engine
from emulator.sim.policies import POLICY_REGISTRY
from reviewer.fleets.scenario_view import (
    ALIKE_UNDER_CONSTANT,
    break_controls,
    measured_comparison,
    page_facts,
    policy_equivalence,
    run_facts,
    trace_path,
    valid_policies,
    written_tables,
)

POLICIES = list(POLICY_REGISTRY)


def _summary(data: dict[str, Any], overrides: list[str], duration_s: float = 120) -> dict[str, Any]:
    scenario = Scenario.from_dict(apply_overrides(data, [*overrides, f"duration_s={duration_s}"]), max_requests=None)
    engine = Engine(scenario, seed=1)
    engine.advance_to(duration_s)
    summary = engine.summary().to_dict()
    return {k: summary[k] for k in ("ok", "timed_out", "lost", "orphaned", "latency_s")}


def _preset(name: str) -> dict[str, Any]:
    return load_scenario(name, max_requests=None).to_dict()


def test_it_calls_the_policies_alike_under_constant_batch_time_and_the_emulator_agrees() -> None:
    data = apply_overrides(_preset("round-robin-vs-pull"), ['worker.service="constant"', "worker.service_cv=0"])
    alike = policy_equivalence(data, POLICIES)
    assert alike is not None and alike["until_s"] is None
    assert "constant" in alike["why"] and alike["policies"] == list(ALIKE_UNDER_CONSTANT)
    runs = [_summary(data, [f'dispatcher.policy="{p}"']) for p in alike["policies"]]
    assert all(r == runs[0] for r in runs)


def test_it_says_the_policies_can_differ_under_variable_batch_time_and_the_emulator_agrees() -> None:
    data = _preset("round-robin-vs-pull")  # lognormal, cv 0.5
    assert policy_equivalence(data, valid_policies(data, POLICIES)) is None
    runs = [_summary(data, [f'dispatcher.policy="{p}"']) for p in valid_policies(data, POLICIES)]
    assert runs[0] != runs[1] or runs[0] != runs[2]


def test_policies_alike_until_a_scheduled_fault_part_after_it() -> None:
    data = _preset("dispatcher-failover")
    alike = policy_equivalence(data, POLICIES)
    assert alike is not None and alike["until_s"] == 60.3
    duration = data["duration_s"]
    before = [_summary(data, [f'dispatcher.policy="{p}"', "faults=[]"], 60) for p in alike["policies"]]
    assert all(r == before[0] for r in before)
    after = [_summary(data, [f'dispatcher.policy="{p}"'], duration) for p in alike["policies"]]
    assert any(r != after[0] for r in after)


def test_least_loaded_is_not_called_alike_and_can_differ() -> None:
    data = _preset("dispatcher-failover")
    alike = policy_equivalence(data, valid_policies(data, POLICIES))
    assert alike is not None and "least_loaded" not in alike["policies"] and "least_loaded can still differ" in alike["why"]
    runs = [_summary(data, [f'dispatcher.policy="{p}"', "faults=[]"], 60) for p in ("round_robin", "least_loaded")]
    assert runs[0] != runs[1]


def test_continuous_batching_is_never_called_alike() -> None:
    assert policy_equivalence(_preset("continuous-comfortable"), POLICIES) is None


@pytest.mark.parametrize("name", ["doc-as-written", "continuous-comfortable", "host-loss", "low-traffic-no-close"])
def test_every_control_and_the_suggestion_are_overrides_that_load_and_change_the_scenario(name: str) -> None:
    data = _preset(name)
    facts = break_controls(data, POLICIES)
    options = [o for c in facts["controls"] for o in c["options"]]
    assert options
    for overrides in [o["overrides"] for o in options] + [facts["suggested"]["overrides"]]:
        changed = Scenario.from_dict(apply_overrides(data, overrides), max_requests=None).to_dict()
        assert changed != data, overrides


def test_the_measured_suggestion_differs_visibly_from_the_doc_as_written() -> None:
    # On the seed's system a replicated standby changes a dozen requests of 300,000:
    # the measured advice passes over it for a policy whose run visibly differs.
    data = _preset("doc-as-written")
    advice = measured_comparison(data, POLICIES)
    assert advice["measured"] is True
    suggested = advice["suggested"]
    assert suggested["overrides"] == ['dispatcher.policy="pull"']
    assert suggested["measured"].startswith("ok 2.7% → 4.1%")
    base = _summary(data, [], data["duration_s"])
    other = _summary(data, suggested["overrides"], data["duration_s"])
    assert abs(other["ok"] - base["ok"]) / base["ok"] > 0.3
    # Alike until the first scheduled fault, which the page still says.
    assert advice["equivalent"]["until_s"] == 120


def test_measured_advice_finds_every_policy_alike_on_a_quiet_constant_fleet() -> None:
    data = _preset("low-traffic-no-close")
    advice = measured_comparison(data, POLICIES)
    # Every policy a statically batched fleet can use (the cache-aware ones route continuous batching only).
    assert sorted(advice["equivalent"]["policies"]) == sorted(valid_policies(data, POLICIES)) == sorted(
        ["least_loaded", "pull", "round_robin"])
    assert "identical runs" in advice["equivalent"]["why"]
    assert advice["suggested"] is not None and not advice["suggested"]["label"].startswith("policy")


def test_measured_advice_falls_back_to_reasoning_over_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("reviewer.fleets.scenario_view.MEASURE_BUDGET", 1)
    advice = measured_comparison(_preset("doc-as-written"), POLICIES)
    assert advice["measured"] is False and advice["note"].startswith("not measured")
    assert advice["suggested"] == break_controls(_preset("doc-as-written"), POLICIES)["suggested"]


def test_a_duration_shorter_than_the_last_fault_is_not_offered() -> None:
    data = _preset("doc-as-written")  # faults up to 260 s of 300
    durations = next(c for c in break_controls(data, POLICIES)["controls"] if c["key"] == "duration_s")
    assert [o["overrides"] for o in durations["options"]] == [["duration_s=600"]]


def test_no_scenario_gives_no_controls() -> None:
    assert break_controls(None, POLICIES) == {"controls": [], "equivalent": None, "suggested": None}


def test_run_facts_name_batching_slos_and_scheduled_faults() -> None:
    facts = run_facts(load_scenario("continuous-comfortable", max_requests=None))
    assert facts["batching"] == {"chat": "continuous"} and facts["slo"] == {"ttft_s": 2.0, "tpot_s": 0.1, "tbt_s": None}
    faults = run_facts(load_scenario("host-loss", max_requests=None))["faults"]
    assert faults == [{"at_s": 60.5, "command": "kill host:2"}, {"at_s": 150.5, "command": "restore host:2"}]


def _keys(data: dict[str, Any]) -> list[str]:
    return [h["key"] for h in trace_path(data)]


def test_the_seeds_path_is_one_case_with_its_dispatcher_queue_and_figures() -> None:
    hops = trace_path(_preset("doc-as-written"))
    assert [h["key"] for h in hops] == ["client", "gateway", "routing", "dispatcher", "worker", "response_path"]
    facts = {h["key"]: " | ".join(h["facts"]) for h in hops}
    assert "queue unbounded" in facts["dispatcher"] and "close after none" in facts["dispatcher"]
    # One dispatcher per model, each with its own queue.
    dispatcher = next(h for h in hops if h["key"] == "dispatcher")
    assert dispatcher["label"] == "2 dispatchers, a queue each"
    assert dispatcher["facts"][:2] == ["small: queue unbounded", "big: queue unbounded"]
    # 4 big workers of 20 requests a batch (10000 / 500 tokens) every 1.5 s.
    assert "big: capacity 53.333 req/s" in facts["worker"] and "timeout 60.0 s" in facts["client"]


def test_a_continuous_fleet_pushing_to_workers_has_no_dispatcher_queue() -> None:
    data = _preset("continuous-comfortable")
    assert _keys(data) == ["client", "gateway", "routing", "worker", "response_path"]
    pulled = apply_overrides(data, ['dispatcher.policy="pull"'])
    assert "dispatcher" in _keys(pulled)  # held centrally until a worker takes it


def test_the_second_examples_path_shows_its_resolved_kv_and_no_dispatcher() -> None:
    import tomllib
    from importlib import resources

    text = resources.files("reviewer.review.example").joinpath("chat-70b-fleet.toml").read_text("utf-8")
    data = load_scenario(text, max_requests=None).to_dict()
    assert tomllib.loads(text)["worker"]["kv_cache_tokens"] == "auto"
    # The resolved scenario has every table; the config as written has no [gateway].
    hops = trace_path(data, written_tables(text))
    assert [h["key"] for h in hops] == ["client", "routing", "worker", "response_path"]
    facts = {h["key"]: " | ".join(h["facts"]) for h in hops}
    kv = load_scenario(text, max_requests=None).worker_for("chat").kv_cache_tokens
    assert f"chat: KV {kv:,} tokens a worker (what memory leaves)" in facts["worker"]
    # No dispatcher holds these requests, so nothing of one is on the way back either.
    assert "dispatcher" not in facts["response_path"] and "stream back" in facts["response_path"]


def test_a_disaggregated_model_has_prefill_and_decode_pools_and_the_kv_transfer() -> None:
    data = _preset("continuous-comfortable")
    data["models"]["chat"]["disaggregated"] = {"prefill_workers": 1, "decode_workers": 3, "kv_transfer_s": 0.02}
    hops = trace_path(data)
    assert [h["key"] for h in hops] == [
        "client", "gateway", "routing", "prefill_pool", "kv_transfer", "decode_pool", "response_path"]
    facts = {h["key"]: h["facts"] for h in hops}
    assert facts["prefill_pool"] == ["chat: 1 worker"] and facts["decode_pool"] == ["chat: 3 workers"]
    assert facts["kv_transfer"] == ["chat: kv_transfer_s 0.02"]  # a key not known here is shown as it is
    # A table without both pool sizes is not read as a split.
    data["models"]["chat"]["disaggregated"] = {"prefill_workers": 1}
    assert "worker" in _keys(data) and "prefill_pool" not in _keys(data)


def test_every_hop_of_a_drawn_path_is_one_a_finding_can_be_filed_on() -> None:
    from reviewer.models.review import TraceHop

    data = _preset("continuous-comfortable")
    data["models"]["chat"]["disaggregated"] = {"prefill_workers": 1, "decode_workers": 3}
    for path in (trace_path(data), trace_path(_preset("doc-as-written"))):
        assert {h["key"] for h in path} <= set(TraceHop.values)
    assert trace_path(None) == []


def test_only_the_policies_a_fleet_can_run_are_offered() -> None:
    static = break_controls(_preset("doc-as-written"), POLICIES)["controls"][0]
    assert {o["label"] for o in static["options"]} == {"pull", "least_loaded"}
    continuous = break_controls(_preset("continuous-comfortable"), POLICIES)["controls"][0]
    assert {o["label"] for o in continuous["options"]} == set(POLICIES) - {"round_robin"}


def test_the_disaggregated_preset_draws_its_named_pools_and_link() -> None:
    hops = {h["key"]: h["facts"] for h in trace_path(_preset("disagg-decode-undersized"))}
    assert "worker" not in hops and "dispatcher" not in hops
    assert hops["prefill_pool"] == ['chat: 3 workers (pool "prefill")']
    assert hops["decode_pool"] == ['chat: 1 worker (pool "decode")']
    assert hops["kv_transfer"] == ["chat: 50 GB/s a decode worker", "chat: prompts of at most 256 tokens on decode"]


def test_the_llm_d_like_preset_says_its_decider_counts_uncached_tokens() -> None:
    data = _preset("pd-prefix-aware")
    data["models"]["chat"]["disaggregated"]["decider_max_prefill_queue"] = 8
    hops = {h["key"]: h["facts"] for h in trace_path(data)}
    assert hops["kv_transfer"] == [
        "chat: 50 GB/s a decode worker",
        "chat: at most 768 tokens not cached on the picked prefill worker: on decode",
        "chat: on decode while 8 wait for prefill",
    ]


def test_the_gateway_is_drawn_only_when_the_config_has_one() -> None:
    """A resolved scenario has a gateway table whatever was written: the page passes
    the config's own tables, and a config without [gateway] draws no gateway."""
    text = "duration_s = 10\n[traffic]\nqps = 1\n"
    assert written_tables(text) == {"duration_s", "traffic"}
    data = _preset("continuous-comfortable")
    assert "gateway" in _keys(data)
    assert "gateway" not in [h["key"] for h in trace_path(data, {"traffic", "models"})]
    assert written_tables("not [toml") is None and written_tables(None) is None


def test_the_trace_paths_hop_figures_come_from_the_stored_analysis():
    from emulator.analysis.record import fleet_record
    from emulator.scenario import load_scenario

    seed = _preset("doc-as-written")
    record = fleet_record(load_scenario("doc-as-written", max_requests=None))
    workers = {h["key"]: h["facts"] for h in page_facts(seed, record=record)["tracePath"]}["worker"]
    assert "small: capacity 66.7 QPS" in workers and "big: capacity 53.3 QPS" in workers
    assert "small: host:2 lost leaves 0 QPS (down)" in workers
    split = _preset("disagg-decode-undersized")
    record = fleet_record(load_scenario("disagg-decode-undersized", max_requests=None))
    hops = {h["key"]: h["facts"] for h in page_facts(split, record=record)["tracePath"]}
    assert "chat: decode pool 14.2 QPS" in hops["decode_pool"] and "chat: capacity 14.2 QPS, decode binds" in hops["decode_pool"]
    assert "chat: host:3 lost leaves 0 QPS (down)" in hops["decode_pool"]
    assert any(f.startswith("chat: prefill pool ") for f in hops["prefill_pool"])


def _examples_and_presets() -> list[tuple[str, dict[str, Any]]]:
    from importlib import resources

    from reviewer.review.example.reviews import EXAMPLES

    out = [(name, _preset(name)) for name in sorted(
        p.name[:-5] for p in resources.files("emulator.scenario.presets").iterdir() if p.name.endswith(".toml"))]
    out += [(e.key, load_scenario(e.toml(), max_requests=None).to_dict()) for e in EXAMPLES]
    return out


@pytest.mark.parametrize(("name", "data"), _examples_and_presets(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_default_sweep_value_is_one_a_run_accepts(name: str, data: dict[str, Any]) -> None:
    from reviewer.errors import Invalid
    from reviewer.fleets.scenario_view import sweep_keys
    from reviewer.runs.services import resolve_scenario

    keys = sweep_keys(data)
    assert keys, f"{name}: no key to sweep"
    assert keys[0]["values"], f"{name}: the first key offers no default value"
    for entry in keys:
        for values, kept in ((entry["values"], []), (entry["values_without_faults"], ["faults=[]"])):
            for value in values:
                shown = int(value) if float(value).is_integer() else value
                try:
                    resolve_scenario(scenario=data, overrides=[*kept, f"{entry['key']}={shown}"])
                except Invalid as exc:  # pragma: no cover - the message says which
                    pytest.fail(f"{name}: {entry['key']}={shown}: {exc.message}")


def test_a_host_count_below_a_faults_host_is_offered_only_without_the_faults() -> None:
    from reviewer.fleets.scenario_view import sweep_keys

    data = _preset("doc-as-written")  # 2 + 1 hosts; a fault kills and restores host:2
    first = next(k for k in sweep_keys(data) if k["key"] == "hosts[0].count")
    assert first["values"] == [2, 4, 8, 16]
    assert first["values_without_faults"] == [1, 2, 4, 8, 16]


def _record(name: str) -> dict[str, Any]:
    from emulator.analysis.record import fleet_record

    return fleet_record(load_scenario(name, max_requests=None))


def test_the_break_pass_suggests_scaling_the_split_fleets_binding_pool_from_its_record() -> None:
    from emulator.analysis.fleet import analyse

    data = _preset("disagg-decode-undersized")  # 3 prefill hosts, 1 decode host, 1.13x short
    record = _record("disagg-decode-undersized")
    facts = page_facts(data, record=record)["breakControls"]
    controls = {c["key"]: c["options"] for c in facts["controls"]}
    suggested = facts["suggested"]
    assert suggested["overrides"] == ["hosts[1].count=2"]  # the decode group
    assert suggested["label"] == "chat decode pool on 1 → 2 hosts (binds at 14.2 QPS)"
    assert "14.2 QPS (decode binds), 1.13x short of the 16 QPS to carry" in suggested["why"]
    assert controls["scale"][0]["overrides"] == suggested["overrides"]
    # The loss the analysis finds worst, and the offered load at the capacity it computes.
    assert controls["host_loss"][0]["label"] == "host:3 at 100 s (leaves 0 QPS, chat down)"
    assert {"label": "14.2 QPS (the capacity)", "overrides": ["traffic.qps=14.16"]} in controls["traffic.qps"]
    # Scaled as suggested, the same analysis carries the load.
    scaled = analyse(Scenario.from_dict(apply_overrides(data, suggested["overrides"]), max_requests=None))
    assert scaled.gaps["qps"] is not None and scaled.gaps["qps"] <= 1
    # Without a record the break pass reasons from the scenario alone, as before.
    assert break_controls(data, POLICIES)["suggested"]["overrides"] != suggested["overrides"]
    assert "scale" not in {c["key"] for c in break_controls(data, POLICIES)["controls"]}


def test_the_break_pass_suggestions_follow_the_stored_record() -> None:
    import copy

    data = _preset("disagg-decode-undersized")
    record = _record("disagg-decode-undersized")
    analysis = record["numbers"]["analysis"]

    def suggested(a: dict[str, Any]) -> dict[str, Any]:
        return page_facts(data, record={**record, "numbers": {**record["numbers"], "analysis": a}})[
            "breakControls"]["suggested"]

    # A record whose prefill pool binds: its three hosts are scaled instead.
    prefill = copy.deepcopy(analysis)
    prefill["models"]["chat"]["binding_pool"] = "prefill"
    assert suggested(prefill)["overrides"] == ["hosts[0].count=4"]
    # Not short: the host whose loss takes the model down is the comparison.
    enough = copy.deepcopy(analysis)
    enough["gaps"]["qps"] = 0.5
    lost = suggested(enough)
    assert lost["label"] == "losing host:3" and lost["overrides"] == ['faults=[{at_s = 100, kill = "host:3"}]']
    assert "takes chat down" in lost["why"]
    enough["worst_loss"]["host"] = 1
    assert suggested(enough)["overrides"] == ['faults=[{at_s = 100, kill = "host:1"}]']
    # Neither: the reasoning from the scenario.
    enough["worst_loss"]["down"] = []
    assert suggested(enough) == break_controls(data, POLICIES)["suggested"]
    # The capacity figure the QPS control offers is the record's.
    other = copy.deepcopy(analysis)
    other["capacity_qps"] = 10.0
    qps = next(c for c in page_facts(data, record={**record, "numbers": {**record["numbers"], "analysis": other}})[
        "breakControls"]["controls"] if c["key"] == "traffic.qps")
    assert {"label": "10 QPS (the capacity)", "overrides": ["traffic.qps=10"]} in qps["options"]


def test_a_scheduled_loss_is_not_offered_again_and_kept_with_a_new_one() -> None:
    data = _preset("host-loss")  # already kills host:2, the worst
    controls = {c["key"] for c in break_controls(data, POLICIES, _record("host-loss")["numbers"]["analysis"])["controls"]}
    assert "host_loss" not in controls
    data = _preset("continuous-comfortable")
    analysis = _record("continuous-comfortable")["numbers"]["analysis"]
    data["faults"] = [{"at_s": 10.0, "kill": "dispatcher:chat"}]
    loss = next(c for c in break_controls(data, POLICIES, analysis)["controls"] if c["key"] == "host_loss")
    changed = Scenario.from_dict(apply_overrides(data, loss["options"][0]["overrides"]), max_requests=None)
    assert [(f.action, f.target) for f in changed.faults] == [("kill", "dispatcher:chat"), ("kill", "host:0")]


def test_the_measured_advice_tries_the_records_suggestion_first() -> None:
    data = _preset("disagg-decode-undersized")
    advice = measured_comparison(data, POLICIES, analysis=_record("disagg-decode-undersized")["numbers"]["analysis"])
    assert advice["measured"] is True and advice["suggested"]["overrides"] == ["hosts[1].count=2"]
    assert "goodput 14% → 100%" in advice["suggested"]["measured"]
