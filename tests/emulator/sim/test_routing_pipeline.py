"""The routing pipeline (``emulator.sim.policies.pipeline``): each filter, scorer and
picker on hand-made worker states, and each shipped pushing policy as a composition
against the policy as it was written before it became one, on random worker states."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from emulator.scenario import catalog
from emulator.sim.policies import POLICY_REGISTRY
from emulator.sim.policies.least_loaded import LeastLoaded
from emulator.sim.policies.pipeline import (
    BELIEVED_ALIVE,
    IN_POOL,
    SCORERS,
    ComposedPolicy,
    MaxScore,
    spread,
)
from emulator.sim.policies.prefix_aware import PrefixAware
from emulator.sim.policies.round_robin import RoundRobin
from emulator.sim.policies.weighted import Weighted


@dataclass
class _Worker:
    waiting: list[int] = field(default_factory=list)
    incoming: list[int] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    cached: float = 0.0  # the share of the request's prefix it holds
    busy: float = 0.0  # the share of its KV in use


class _Workers:
    """The parts of the continuous worker model a policy reads."""

    def __init__(self, workers: dict[int, _Worker], dead: frozenset[int] = frozenset()) -> None:
        self.workers = workers
        self.dead = dead
        self.assigned: list[int] = []

    def is_alive(self, w: int) -> bool:
        return w not in self.dead

    def prefix_fraction(self, w: int, group: int, prefix: int, prompt: int) -> float:
        return self.workers[w].cached if group >= 0 and prefix > 0 else 0.0

    def kv_busy(self, w: int) -> float:
        return self.workers[w].busy

    def load(self, w: int) -> int:
        wk = self.workers[w]
        return len(wk.waiting) + len(wk.running)

    def assign(self, w: int, work: Any) -> None:
        self.assigned.append(w)


def _policy(cls: type[ComposedPolicy], workers: dict[int, _Worker], scorers: dict[str, float] | None = None,
            dead: frozenset[int] = frozenset()) -> ComposedPolicy:
    store = SimpleNamespace(base=0, group=np.array([3]), prefix=np.array([64]), tokens=np.array([100]))
    dispatcher = SimpleNamespace(workers=sorted(workers), worker_model=_Workers(workers, dead),
                                 scorers=scorers, store=store, queue_limit=0)
    return cls(SimpleNamespace(), dispatcher)  # type: ignore[arg-type]


def _state(**per: dict[str, Any]) -> dict[int, _Worker]:
    return {int(k[1:]): _Worker(**v) for k, v in per.items()}


# -- filters ---------------------------------------------------------------------------
def test_it_keeps_the_pool_then_the_workers_believed_alive() -> None:
    policy = _policy(RoundRobin, _state(w2={}, w5={}, w7={}), dead=frozenset({5}))
    assert policy.rotation == [2, 7]
    assert IN_POOL.keep(policy, 0, [1, 2, 5, 7, 9]) == [2, 5, 7]
    assert BELIEVED_ALIVE.keep(policy, 0, [2, 5, 7]) == [2, 7]
    assert BELIEVED_ALIVE.keep(policy, 0, policy.dispatcher.workers) is policy.rotation
    assert policy.candidates(0) == [2, 7]


def test_a_composition_with_its_own_filters_applies_them_in_order() -> None:
    class EvenOnly:
        name = "even"

        def keep(self, policy: Any, work: Any, candidates: list[int]) -> list[int]:
            return [w for w in candidates if w % 2 == 0]

    class EvenFirst(ComposedPolicy):
        name = "even_first"
        filters = (IN_POOL, BELIEVED_ALIVE, EvenOnly())  # type: ignore[assignment]
        picker = MaxScore
        weights = {"queue": 1.0}  # noqa: RUF012

    policy = _policy(EvenFirst, _state(w1={}, w2={"waiting": [1, 1]}, w4={"waiting": [1]}, w6={}),
                     dead=frozenset({6}))
    assert policy.candidates(0) == [2, 4]
    assert policy.pick(0) == 4  # the fewest waiting of the even workers alive
    assert not EvenFirst.needs_prefix_caches and not EvenFirst.counts_done


# -- scorers ---------------------------------------------------------------------------
def test_each_scorer_scores_a_hand_made_worker_state() -> None:
    workers = _state(
        w0={"waiting": [1, 1, 1], "incoming": [1], "running": [1], "cached": 0.5, "busy": 0.25},
        w1={"waiting": [], "running": [1, 1, 1, 1, 1], "cached": 1.0, "busy": 0.9},
        w2={"waiting": [1], "incoming": [1], "running": [1, 1, 1], "cached": 0.0, "busy": 0.0},
    )
    policy = _policy(Weighted, workers)
    c = [0, 1, 2]
    assert SCORERS["prefix"].scores(policy, 0, c) == [0.5, 1.0, 0.0]
    # Waiting plus incoming: 4, 0, 2 -> the fewest 1, the most 0.
    assert SCORERS["queue"].scores(policy, 0, c) == [0.0, 1.0, 0.5]
    assert SCORERS["kv_free"].scores(policy, 0, c) == [0.75, 1.0 - 0.9, 1.0]
    # Running: 1, 5, 3.
    assert SCORERS["running"].scores(policy, 0, c) == [1.0, 0.0, 0.5]
    assert list(SCORERS) == ["prefix", "queue", "kv_free", "running", "session"]


def test_the_session_scorer_gives_one_to_the_sessions_last_worker_within_its_ttl() -> None:
    workers = _state(w0={"waiting": [1]}, w1={}, w2={"waiting": [1, 1]})
    store = SimpleNamespace(base=0, group=np.array([3, -1]), prefix=np.array([64, 0]), tokens=np.array([100, 100]))
    dispatcher = SimpleNamespace(workers=sorted(workers), worker_model=_Workers(workers, frozenset()),
                                 scorers={"session": 3.0, "queue": 1.0}, store=store, queue_limit=0,
                                 session_ttl_s=10.0)
    sim = SimpleNamespace(now_s=0.0)
    policy = Weighted(sim, dispatcher)  # type: ignore[arg-type]
    c = [0, 1, 2]
    assert SCORERS["session"].scores(policy, 0, c) == [0.0, 0.0, 0.0]  # not seen yet
    assert policy.pick(0) == 1  # by queue alone; the session is recorded there
    workers[1].waiting = [1, 1, 1]
    sim.now_s = 5.0
    assert SCORERS["session"].scores(policy, 0, c) == [0.0, 1.0, 0.0]
    assert policy.pick(0) == 1  # 3 x 1 + 0 beats 1 x 1 at worker 0
    assert SCORERS["session"].scores(policy, 1, c) == [0.0, 0.0, 0.0]  # a request of no session
    sim.now_s = 15.1  # idle past the TTL: forgotten
    assert SCORERS["session"].scores(policy, 0, c) == [0.0, 0.0, 0.0]
    assert policy.pick(0) == 0


def test_the_prefix_scorer_gives_nothing_to_a_request_without_a_prefix() -> None:
    policy = _policy(PrefixAware, _state(w0={"cached": 0.8}))
    policy.dispatcher.store.prefix[0] = 0
    assert SCORERS["prefix"].scores(policy, 0, [0]) == [0.0]


def test_the_spread_is_one_everywhere_when_the_values_are_equal() -> None:
    assert spread([3, 3, 3]) == [1.0, 1.0, 1.0]
    assert spread([]) == []
    assert spread([2, 6, 4]) == [1.0, 0.0, 0.5]


def test_the_weighted_sum_adds_only_the_scorers_with_a_weight() -> None:
    workers = _state(w0={"cached": 0.5, "waiting": [1]}, w1={"cached": 0.25})
    policy = _policy(Weighted, workers, scorers={"prefix": 3.0, "queue": 2.0})
    assert [s.name for _, s in policy.weighted] == ["prefix", "queue"]
    assert policy.score(0, [0, 1]) == [3.0 * 0.5 + 2.0 * 0.0, 3.0 * 0.25 + 2.0 * 1.0]


# -- pickers ---------------------------------------------------------------------------
def test_the_max_score_picker_breaks_ties_by_load_then_layout_order() -> None:
    workers = _state(w0={"running": [1, 1]}, w1={"waiting": [1]}, w2={"running": [1]}, w3={})
    chooser = _policy(PrefixAware, workers).chooser
    assert chooser.peek(0, [0, 1, 2, 3], [0.5, 0.9, 0.9, 0.2]) == 1  # the highest, then the first
    assert chooser.peek(0, [0, 1, 2, 3], [0.5, 0.5, 0.5, 0.5]) == 3  # equal: the least loaded
    assert chooser.peek(0, [0, 1, 2], [0.5, 0.5, 0.5]) == 1  # loads 2, 1, 1: the first of the least


def test_the_rotation_picker_turns_on_pick_and_not_on_peek() -> None:
    policy = _policy(RoundRobin, _state(w0={}, w1={}, w2={}))
    assert [policy.peek(0), policy.peek(0)] == [0, 0]
    assert [policy.pick(0) for _ in range(4)] == [0, 1, 2, 0]
    assert policy.peek(0) == 1
    policy.rotation_changed([0, 2])
    policy.rotation = [0, 2]
    assert [policy.pick(0) for _ in range(3)] == [2, 0, 2]


def test_the_least_outstanding_picker_counts_pushes_and_completions() -> None:
    policy = _policy(LeastLoaded, _state(w0={}, w1={}, w2={}), dead=frozenset({1}))
    assert LeastLoaded.counts_done
    assert [policy.pick(0) for _ in range(3)] == [0, 2, 0]
    assert policy.peek(0) == 2
    policy.work_done(0)
    policy.work_done(0)
    assert policy.peek(0) == 0
    policy.rotation_changed([0, 1, 2])  # worker 1 found alive: it starts at 0
    policy.rotation = [0, 1, 2]
    assert policy.pick(0) == 0 and policy.pick(0) == 1


# -- the policies' declarations --------------------------------------------------------
def test_the_traits_follow_from_each_composition_and_reach_the_catalog() -> None:
    for name in ("round_robin", "least_loaded", "prefix_aware", "weighted"):
        cls = POLICY_REGISTRY[name]
        entry = catalog.POLICIES[name]
        assert entry.needs_prefix_caches == cls.needs_prefix_caches
        assert entry.uses_scorers == cls.uses_scorers
    assert [n for n in catalog.policies_with("needs_prefix_caches")] == ["prefix_aware", "weighted"]
    assert catalog.policies_with("uses_scorers") == ("weighted",)
    assert [n for n in POLICY_REGISTRY if POLICY_REGISTRY[n].counts_done] == ["least_loaded"]


# -- compositions against the policies as first written --------------------------------
def _old_prefix_aware(cw: _Workers, rotation: list[int]) -> int:
    best, best_key = -1, (0.0, 0)
    for w in rotation:
        key = (cw.prefix_fraction(w, 3, 64, 100), -cw.load(w))
        if best < 0 or key > best_key:
            best, best_key = w, key
    return best


def _old_weighted(cw: _Workers, rotation: list[int], weights: dict[str, float]) -> int:
    w_prefix, w_queue = weights.get("prefix", 0.0), weights.get("queue", 0.0)
    w_kv, w_running = weights.get("kv_free", 0.0), weights.get("running", 0.0)
    table = cw.workers
    queues = [len(table[w].waiting) + len(table[w].incoming) for w in rotation] if w_queue else []
    low = min(queues) if queues else 0
    span = max(queues) - low if queues else 0
    active = [len(table[w].running) for w in rotation] if w_running else []
    r_low = min(active) if active else 0
    r_span = max(active) - r_low if active else 0
    best, best_key = -1, (0.0, 0)
    for j, w in enumerate(rotation):
        score = 0.0
        if w_prefix:
            score += w_prefix * cw.prefix_fraction(w, 3, 64, 100)
        if w_queue:
            score += w_queue * (1.0 if span == 0 else (low + span - queues[j]) / span)
        if w_kv:
            score += w_kv * (1.0 - cw.kv_busy(w))
        if w_running:
            score += w_running * (1.0 if r_span == 0 else (r_low + r_span - active[j]) / r_span)
        key = (score, -cw.load(w))
        if best < 0 or key > best_key:
            best, best_key = w, key
    return best


_share = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0, 1 / 3, 2 / 3, 0.1])
_worker = st.builds(
    _Worker,
    waiting=st.lists(st.just(1), max_size=4),
    incoming=st.lists(st.just(1), max_size=2),
    running=st.lists(st.just(1), max_size=4),
    cached=_share,
    busy=_share,
)
# The scorers the policies first written knew (the session scorer came later).
_weights = st.dictionaries(st.sampled_from(["prefix", "queue", "kv_free", "running"]),
                           st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0]),
                           min_size=1).filter(lambda d: any(d.values()))


@settings(max_examples=300, deadline=None)
@given(st.lists(_worker, min_size=1, max_size=6), st.sets(st.integers(0, 5)), _weights)
def test_the_compositions_pick_as_the_policies_first_written(
    states: list[_Worker], dead: set[int], weights: dict[str, float],
) -> None:
    workers = dict(enumerate(states))
    if len(dead & set(workers)) == len(workers):
        dead = set()
    gone = frozenset(dead)
    prefix = _policy(PrefixAware, workers, dead=gone)
    weighted = _policy(Weighted, workers, scorers=weights, dead=gone)
    rotation = prefix.rotation
    assert rotation == [w for w in workers if w not in gone]
    assert prefix.pick(0) == prefix.peek(0) == _old_prefix_aware(prefix.cw, rotation)  # type: ignore[arg-type]
    assert weighted.pick(0) == weighted.peek(0) == _old_weighted(weighted.cw, rotation, weights)  # type: ignore[arg-type]
    # Round robin and least loaded: the first picks over the workers alive.
    rr = _policy(RoundRobin, workers, dead=gone)
    assert [rr.pick(0) for _ in range(2 * len(rotation))] == rotation * 2
    ll = _policy(LeastLoaded, workers, dead=gone)
    assert [ll.pick(0) for _ in range(len(rotation))] == rotation


def test_a_composition_whose_filters_leave_no_candidate_declines_the_work() -> None:
    class NoneLeft:
        name = "none"

        def keep(self, policy: Any, work: Any, candidates: list[int]) -> list[int]:
            return []

    class Nowhere(ComposedPolicy):
        name = "nowhere"
        filters = (IN_POOL, NoneLeft())  # type: ignore[assignment]
        picker = MaxScore
        weights = {"queue": 1.0}  # noqa: RUF012

    policy = _policy(Nowhere, _state(w0={}, w1={}))
    assert policy.offer(0) is False
    assert policy.workers.assigned == []  # type: ignore[attr-defined]
