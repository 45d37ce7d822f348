"""The one analysis of a fleet config: capacity per model and pool, floors, headroom
under each host's loss, and the cases the numbers pass and placement must agree on."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from emulator import Engine
from emulator.analysis.fleet import analyse
from emulator.analysis.fleet.prefix import che_hit_rate
from emulator.analysis.numbers import compute
from emulator.analysis.placement import make_problem, solve
from emulator.analysis.placement.scenario import current_fleet, problem_args
from emulator.scenario import load_scenario
from emulator.scenario.presets import PRESETS, load_preset


@pytest.fixture(scope="module")
def seed():
    return analyse(load_preset("doc-as-written"))


def test_it_keeps_the_seed_review_figures(seed):
    small, big = seed.models["small"], seed.models["big"]
    assert small.pools[0].worker.limit == 20  # 10,000 tokens / 500 a request
    assert small.pools[0].worker.qps == Fraction(40, 3)  # about 13 QPS a worker
    report = compute(load_preset("doc-as-written"), seed)
    assert report.value("workers_needed_peak") == 750
    assert report.value("most_capacity_qps") == 200  # the Part 2 hosts, full of small workers
    # As placed: 120 QPS of workers, 106.7 QPS at the 50/50 split ("100 to 120").
    assert report.value("capacity_qps") == 120 and seed.capacity_qps == Fraction(320, 3)
    assert small.capacity_qps + big.capacity_qps == 120


def test_it_names_the_host_whose_loss_takes_a_model_down(seed):
    host2 = next(h for h in seed.losses if h.host == 2)
    assert host2.down == ("small",) and host2.capacity_qps["small"] == 0
    assert seed.worst_loss is host2
    assert seed.models["big"].worst_loss.capacity_qps["big"] == Fraction(80, 3)


def test_every_figure_names_the_keys_it_stands_on():
    scenario = load_preset("roofline-70b-h100")
    report = compute(scenario)
    floor = report.get("tpot_floor_s", "chat")
    assert {"worker.mbu", "hardware.gpu", "models.chat.arch.model"} <= set(floor.inputs)
    assert "worker.step_base_s" not in floor.inputs  # the roofline does not read the linear terms
    linear = compute(load_preset("continuous-comfortable")).get("worker_qps", "chat")
    assert {"worker.step_base_s", "worker.kv_cache_tokens", "models.chat.tokens"} <= set(linear.inputs)


# -- split fleets ------------------------------------------------------------------------


def test_it_names_the_undersized_decode_pool_as_binding_with_a_fix_now_finding():
    scenario = load_preset("disagg-decode-undersized")
    a = analyse(scenario)
    chat = a.models["chat"]
    assert chat.split and chat.binding_pool == "decode" and chat.pool("decode").worker.binding == "kv_cache"
    prefill, decode = chat.pool("prefill"), chat.pool("decode")
    assert prefill.capacity_qps > 3 * decode.capacity_qps and decode.capacity_qps < 16
    found = {f["title"]: f for f in compute(scenario, a).findings}
    decode_finding = found["chat's decode pool cannot carry its average load"]
    assert decode_finding["severity"] == "fix_now"
    assert "chat.decode_pool_capacity_qps" in decode_finding["figures"]
    # Three decode workers carry it.
    sized = analyse(scenario.with_overrides(["hosts[1].count=3"]))
    assert sized.models["chat"].capacity_qps > 16


def test_a_split_fleet_whose_only_decode_host_is_lost_goes_down_in_numbers_and_placement():
    scenario = load_preset("disagg-decode-undersized")
    a = analyse(scenario)
    host3 = next(h for h in a.losses if h.host == 3)
    assert host3.down == ("chat",) and host3.capacity_qps["chat"] == 0
    assert host3.workers_left["chat"] == {"prefill": 3, "decode": 0}
    report = compute(scenario, a)
    assert report.value("capacity_one_host_lost_qps", "chat") == 0
    assert any(f["title"] == "Losing host:3 takes chat down" and f["severity"] == "fix_now" for f in report.findings)
    # Placement: the pools are types of their own, and the layout as configured loses chat with host 3.
    args = problem_args(scenario, a)
    assert args["model_of"] == {"chat/prefill": "chat", "chat/decode": "chat"}
    problem = make_problem(**args)
    current = current_fleet(problem, scenario)
    assert current.models_down(problem) == {"chat": ["host:3"]}
    assert not current.verdict(problem.names)["survives_any_host_loss"]
    ranked = solve(**args).ranked
    best = ranked[0].to_dict(problem)
    assert best["survives_any_host_loss"] and best["models_down_with"] == {}
    # No host carries both pools (a host group names one pool).
    for fleet in ranked:
        for layout in fleet.hosts():
            assert sum(1 for c in layout.counts if c) <= 1


def test_a_placed_split_layout_becomes_host_groups_with_their_pools():
    from emulator.analysis.placement import placement_to_hosts

    scenario = load_preset("disagg-decode-undersized")
    args = problem_args(scenario)
    best = solve(**args).ranked[0]
    groups = placement_to_hosts(best)
    assert {g.get("pool") for g in groups} == {"prefill", "decode"}
    data = scenario.to_dict()
    data["hosts"] = groups
    from emulator.scenario import Scenario

    rebuilt = Scenario.from_dict(data, max_requests=None)
    assert all(not h.down for h in analyse(rebuilt).losses)


# -- prefix caching ----------------------------------------------------------------------


def test_che_approximation_matches_an_lru_cache_under_zipf_requests():
    rng = np.random.default_rng(3)
    groups, size = 200, 30
    weights = np.arange(1, groups + 1, dtype=float) ** -0.9
    shares = weights / weights.sum()
    draws = rng.choice(groups, size=60_000, p=shares)
    cache: dict[int, None] = {}
    hits = 0
    for i, g in enumerate(draws):
        if g in cache:
            del cache[g]
            hits += i >= 10_000
        cache[g] = None
        if len(cache) > size:
            del cache[next(iter(cache))]
    measured = hits / (len(draws) - 10_000)
    assert che_hit_rate(shares, size) == pytest.approx(measured, abs=0.02)


def test_prefix_heavy_chat_is_short_under_round_robin_and_sufficient_under_prefix_aware():
    base = load_preset("prefix-heavy-chat")
    routed = base.with_overrides(["dispatcher.policy=prefix_aware"])
    a, b = analyse(base), analyse(routed)
    offered = 50
    assert a.capacity_qps < offered < b.capacity_qps
    plain_hit = a.models["chat"].pools[0].worker.hit_rate
    routed_hit = b.models["chat"].pools[0].worker.hit_rate
    assert plain_hit < Fraction(7, 10) < Fraction(85, 100) < routed_hit
    short = compute(base, a)
    fix = [f["title"] for f in short.findings if f["severity"] == "fix_now"]
    assert any("queue grows" in t for t in fix) and any("spreads chat's prefixes" in t for t in fix)
    assert not [f for f in compute(routed, b).findings if f["severity"] == "fix_now"]
    # And the runs agree: round robin misses its goals for many requests, prefix_aware meets them.
    plain_run, routed_run = Engine(base).run(), Engine(routed).run()
    assert plain_run.slo_goodput < 0.9 <= routed_run.slo_goodput
    assert routed_run.prefix_hit_rate == pytest.approx(float(routed_hit), abs=0.08)


def test_a_tpot_goal_resting_on_the_assumed_bandwidth_efficiency_is_a_question_not_a_verdict():
    # At full bandwidth four H100s read Llama-2-70B in 10.3 ms; at the assumed mbu 0.6 a step
    # takes 17.2 ms. A 15 ms goal is physically possible: the finding asks, it does not condemn.
    scenario = load_preset("roofline-70b-h100").with_overrides(["slo.tpot_s=0.015"])
    found = {f["title"]: f for f in compute(scenario).findings}
    ask = found["The TPOT goal holds only if chat's engine reads memory faster than assumed"]
    assert ask["severity"] == "clarify" and "worker.mbu" in ask["inputs"]
    assert not any("read its weights" in t for t in found)
    below = compute(load_preset("roofline-70b-h100").with_overrides(["slo.tpot_s=0.008"]))
    assert any(f["title"].startswith("The TPOT goal is under the time chat's GPUs take") for f in below.findings)


def test_a_goal_no_load_meets_is_left_out_of_the_capacity_and_said():
    example = load_scenario("reviewer/review/example/chat-70b-fleet.toml", max_requests=None)
    a = analyse(example)
    assert a.goals_left_out == ("tpot_s",)
    # What the workers serve within the TTFT goal's reach: 8 workers of about 4.7 QPS each,
    # capped by the KV cache (and not zero for the TPOT goal no step meets).
    assert 30 < a.capacity_qps < 40
    assert a.offered_capacity_qps < a.capacity_qps  # the trace's busy minutes count


def test_the_autoscalers_range_is_the_models_capacity():
    a = analyse(load_preset("autoscaled-diurnal"))
    chat = a.models["chat"]
    assert chat.autoscaler["min_qps"] == 0
    assert chat.capacity_qps == chat.autoscaler["max_qps"] == 8 * chat.pools[0].worker.qps


def test_the_kv_check_says_what_the_average_and_the_peak_need():
    chat = analyse(load_preset("kv-preemption-storm")).models["chat"]
    held = chat.pools[0].worker.kv_sequences
    assert held == 35
    # 40 QPS over four workers needs more sequences running than the 35 a KV cache holds,
    # so the workers complete less than is offered.
    assert chat.kv["avg"]["running"] > held and chat.throughput_qps < 40
    comfortable = analyse(load_preset("continuous-comfortable")).models["chat"]
    assert comfortable.kv["avg"]["running"] < comfortable.pools[0].worker.kv_sequences


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_analyses_and_serialises(name):
    import json

    a = analyse(load_preset(name))
    data = json.loads(json.dumps(a.to_dict()))
    assert data["capacity_qps"] >= 0 and data["models"]
