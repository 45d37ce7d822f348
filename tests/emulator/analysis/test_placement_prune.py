"""The bound-and-prune search ranks exactly as scoring every composition, and as brute force."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emulator.analysis.placement import PlacementError, host_layouts, make_problem, solve
from emulator.analysis.placement import prune as placement_prune
from emulator.analysis.placement.search import ENUMERATE_ALL, composition_count, score, solve_counts

WORKER_SETS = [
    (10, {"small": 2, "big": 5}),
    (10, {"a": 3, "b": 4}),
    (12, {"a": 4, "b": 5, "c": 7}),
    (16, {"small": 2, "big": 5}),
    (10, {"small": 2, "mid": 3, "big": 5}),
]


def ranking(result):
    return [(f.rank, tuple(c for c, _ in f.groups), f.worst_ratio, f.nominal, f.wasted_units) for f in result.ranked]


@pytest.mark.parametrize(("units", "workers"), WORKER_SETS[:4])
@pytest.mark.parametrize("hosts", [1, 2, 4, 6])
def test_it_ranks_small_fleets_exactly_as_brute_force(hosts, units, workers):
    problem = make_problem(hosts, units, workers)
    pruned = solve_counts(problem, top=10, prune=True)
    brute = solve(hosts, units, workers, method="brute_force")
    assert ranking(pruned) == ranking(brute)


@st.composite
def problems(draw):
    units, workers = draw(st.sampled_from(WORKER_SETS))
    names = list(workers)
    weights = draw(st.lists(st.integers(1, 9), min_size=len(names), max_size=len(names)))
    split = {n: Fraction(w, sum(weights)) for n, w in zip(names, weights, strict=True)}
    qps = dict(zip(names, draw(st.lists(st.integers(1, 30), min_size=len(names), max_size=len(names))),
                   strict=True))
    hosts = draw(st.integers(1, 60))
    top = draw(st.integers(1, 15))
    return make_problem(hosts, units, workers, split, qps_per_worker=qps), top


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(problems().filter(
    lambda pt: composition_count(pt[0].hosts, len(host_layouts(pt[0], maximal_only=True))) <= 150_000))
def test_it_ranks_exactly_as_scoring_every_composition(case):
    problem, top = case
    assert ranking(solve_counts(problem, top=top, prune=True)) == ranking(solve_counts(problem, top=top, prune=False))


def test_it_ranks_a_large_fleet_as_scoring_every_composition_does():
    problem = make_problem(900, 10, {"small": 2, "big": 5}, {"small": 0.3, "big": 0.7},
                           qps_per_worker={"small": 13, "big": 7})
    assert composition_count(900, 3) > ENUMERATE_ALL
    pruned = solve_counts(problem)
    assert pruned.scored < pruned.candidates / 100
    assert ranking(pruned) == ranking(solve_counts(problem, prune=False))


def test_it_answers_where_scoring_everything_would_be_refused():
    problem = make_problem(300, 10, {"small": 2, "mid": 3, "big": 5})
    result = solve_counts(problem, top=3)
    assert result.candidates > 10**12 and result.scored < 10**6
    # No randomly drawn fleet beats the top one.
    maximal = host_layouts(problem, maximal_only=True)
    rng = np.random.default_rng(7)
    x = np.vstack([rng.multinomial(300, rng.dirichlet(np.ones(len(maximal)) * 0.3)) for _ in range(3000)])
    worst, nominal, wasted = score(problem, maximal, x)
    top = result.ranked[0]
    top_x = np.array([[next((c for c, lay in top.groups if lay.counts == m.counts), 0) for m in maximal]])
    top_key = tuple(int(v[0]) for v in score(problem, maximal, top_x))
    best_drawn = max(zip(worst.tolist(), nominal.tolist(), (-wasted).tolist(), strict=True))
    assert (top_key[0], top_key[1], -top_key[2]) >= best_drawn


def test_it_gives_up_with_a_hint_when_too_many_fleets_are_near_best(monkeypatch):
    monkeypatch.setattr(placement_prune, "BUDGET", 5_000)
    with pytest.raises(PlacementError, match="too many near-best fleets"):
        solve(200, 10, {"a": 1, "b": 2, "c": 5})
