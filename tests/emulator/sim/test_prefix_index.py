"""The router's estimated prefix index (``emulator.sim.policies.prefix_index``): the
index alone, ``prefix_aware`` on it over a hand-made sequence of routings whose picks
are worked out by hand (capacity eviction, staleness), and whole runs where the
workers' caches change behind the router's back."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from emulator.scenario.presets import load_preset
from emulator.sim.engine import Engine
from emulator.sim.policies.pipeline import ComposedPolicy, EstimatedPrefixScorer
from emulator.sim.policies.prefix_aware import PrefixAware
from emulator.sim.policies.prefix_index import EstimatedPrefixIndex
from emulator.sim.policies.weighted import Weighted

A, B, C = 1, 2, 3  # prefix groups


class _Workers:
    """The parts of the continuous worker model a policy reads; every worker claims
    to hold every prefix whole, so a cache-reading router would always pick worker 1
    (the least loaded)."""

    def __init__(self) -> None:
        self.loads = {0: 0, 1: 0}
        self.workers = {w: SimpleNamespace(waiting=[], incoming=[], running=[]) for w in self.loads}

    def is_alive(self, w: int) -> bool:
        return True

    def prefix_fraction(self, w: int, group: int, prefix: int, prompt: int) -> float:
        return 1.0

    def load(self, w: int) -> int:
        return self.loads[w]

    def assign(self, w: int, work: Any) -> None:
        pass


def _policy(cls: type[ComposedPolicy], groups: list[int], index: str = "estimated",
            scorers: dict[str, float] | None = None) -> tuple[ComposedPolicy, _Workers, SimpleNamespace]:
    n = len(groups)
    store = SimpleNamespace(base=0, group=np.array(groups), prefix=np.array([64] * n), tokens=np.array([100] * n))
    workers = _Workers()
    dispatcher = SimpleNamespace(
        workers=[0, 1], worker_model=workers, scorers=scorers, store=store, queue_limit=0,
        prefix_index=index, prefix_index_capacity=2, prefix_index_ttl_s=10.0,
    )
    sim = SimpleNamespace(now_s=0.0)
    return cls(sim, dispatcher), workers, sim  # type: ignore[arg-type]


def test_the_index_forgets_the_least_recently_routed_pair_and_stale_ones() -> None:
    index = EstimatedPrefixIndex(capacity=2, ttl_s=5.0)
    index.record(0, A, 0.0)
    index.record(1, A, 1.0)
    index.record(0, A, 2.0)  # routed again: now the most recent
    index.record(1, B, 3.0)  # a third pair: (1, A) routed least recently goes
    assert list(index.entries) == [(0, A), (1, B)]
    assert not index.holds(1, A, 3.0)
    assert index.holds(0, A, 7.0)  # 5 s old: not older than the TTL
    assert not index.holds(0, A, 7.5)  # 5.5 s old: forgotten
    assert list(index.entries) == [(1, B)]
    assert index.holds(1, B, 8.0) and not index.holds(0, B, 8.0)


def test_the_index_refuses_a_capacity_below_one_or_a_ttl_of_zero() -> None:
    with pytest.raises(ValueError):
        EstimatedPrefixIndex(0, 1.0)
    with pytest.raises(ValueError):
        EstimatedPrefixIndex(1, 0.0)


def test_prefix_aware_on_the_estimated_index_picks_as_worked_out_by_hand() -> None:
    # Rows 0..7; capacity 2 pairs, TTL 10 s; ties go to the less loaded worker.
    policy, workers, sim = _policy(PrefixAware, [A, B, A, C, B, C, B, -1])
    index = policy.index
    assert index is not None
    picks = []

    def route(row: int, at: float) -> None:
        sim.now_s = at
        picks.append(policy.pick(row))

    workers.loads = {0: 1, 1: 0}
    route(0, 0.0)  # A: nothing known, the less loaded: 1. Index [(1,A)@0]
    route(1, 1.0)  # B: nothing known: 1. Index [(1,A)@0, (1,B)@1]
    workers.loads = {0: 0, 1: 2}
    route(2, 2.0)  # A: held at 1, though 1 is busier. Index [(1,B)@1, (1,A)@2]
    route(3, 3.0)  # C: unknown, the less loaded: 0; (1,B) is evicted. [(1,A)@2, (0,C)@3]
    route(4, 4.0)  # B: forgotten, so the less loaded: 0; (1,A) evicted. [(0,C)@3, (0,B)@4]
    workers.loads = {0: 3, 1: 2}
    route(5, 13.5)  # C: (0,C) is 10.5 s old, stale: the less loaded, 1. [(0,B)@4, (1,C)@13.5]
    route(6, 14.0)  # B: (0,B) is 10 s old, still trusted: 0, though busier. [(1,C), (0,B)@14]
    route(7, 15.0)  # no prefix: the less loaded, 1, and nothing recorded
    assert picks == [1, 1, 1, 0, 0, 1, 0, 1]
    assert list(index.entries.items()) == [((1, C), 13.5), ((0, B), 14.0)]
    # A peek chooses the same and records nothing.
    sim.now_s = 16.0
    assert policy.peek(2) == 1 and list(index.entries) == [(1, C), (0, B)]


def test_the_exact_index_reads_the_caches_and_keeps_no_record() -> None:
    policy, workers, sim = _policy(PrefixAware, [A, B, A, C, B], index="exact")
    workers.loads = {0: 0, 1: 2}
    assert policy.index is None
    assert [policy.pick(row) for row in range(5)] == [0] * 5  # both hold all: the less loaded


def test_weighted_scores_the_estimated_prefix_beside_its_other_scorers() -> None:
    policy, workers, sim = _policy(Weighted, [A, A], scorers={"prefix": 3.0, "running": 2.0})
    assert isinstance(policy.weighted[0][1], EstimatedPrefixScorer)
    workers.workers[1].running.append(9)
    assert policy.score(0, [0, 1]) == [2.0, 0.0]  # nothing known: running alone
    assert policy.pick(0) == 0
    workers.workers[0].running.extend([7, 8])
    assert policy.score(1, [0, 1]) == [3.0, 2.0]  # A held at 0; 0 runs more


def _summary(*overrides: str) -> Any:
    scenario = load_preset("prefix-heavy-chat")
    scenario = scenario.with_overrides(["dispatcher.policy=prefix_aware", *overrides])
    return Engine(scenario).run()


def test_a_stale_index_hits_less_than_reading_the_caches() -> None:
    exact = _summary()
    stale = _summary("dispatcher.prefix_index=estimated", "dispatcher.prefix_index_ttl_s=2")
    small = _summary("dispatcher.prefix_index=estimated", "dispatcher.prefix_index_capacity=100")
    assert stale.prefix_hit_rate < exact.prefix_hit_rate - 0.2
    assert small.prefix_hit_rate < exact.prefix_hit_rate - 0.1
    assert stale.ttft_s["p50"] > exact.ttft_s["p50"]


def test_an_index_blind_to_evictions_loses_goodput_where_caches_are_short() -> None:
    # Caches of 150,000 tokens hold about 60 of the 2,400-token preambles: evictions the
    # router does not see send requests to workers that no longer hold their preamble.
    exact = _summary("worker.kv_cache_tokens=150000")
    blind = _summary("worker.kv_cache_tokens=150000", "dispatcher.prefix_index=estimated")
    assert blind.prefix_hit_rate < exact.prefix_hit_rate
    assert blind.slo_goodput < exact.slo_goodput - 0.05


def test_a_split_fleets_pools_estimate_as_the_dispatcher_says_or_each_its_own() -> None:
    split = load_preset("pd-prefix-aware")
    fleet = Engine(split.with_overrides(["dispatcher.prefix_index=estimated"])).run()
    both = Engine(split.with_overrides(["pools.prefill.prefix_index=estimated",
                                        "pools.decode.prefix_index=estimated"])).run()
    prefill_only = Engine(split.with_overrides(["pools.prefill.prefix_index=estimated"])).run()
    assert both.to_dict() == {**fleet.to_dict(), "wall_s": both.wall_s}
    assert prefill_only.prefill_tokens_saved != both.prefill_tokens_saved
