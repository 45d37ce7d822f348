"""The counts method agrees with brute force on every small fleet; layouts agree with strip tiling."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emulator.analysis.placement import host_layouts, make_problem, solve
from emulator.analysis.placement.search import (
    MAX_COMPOSITIONS,
    brute_force_fleets,
    composition_count,
    compositions,
)

# (units per host, worker sizes): the seed's, and others with 2-4 maximal layouts so
# that brute force over 6 hosts stays quick.
WORKER_SETS = [
    (10, {"small": 2, "big": 5}),
    (10, {"a": 3, "b": 4}),
    (8, {"a": 3, "b": 5}),
    (12, {"a": 4, "b": 5, "c": 7}),
    (6, {"a": 2, "b": 3}),
    (9, {"a": 2, "b": 9}),
]


def ranking(result):
    return [
        (f.rank, tuple(c for c, _ in f.groups), f.worst_ratio, f.nominal, f.wasted_units)
        for f in result.ranked
    ]


def full(hosts, units, workers, **kw):
    every = 10**6
    return (solve(hosts, units, workers, top=every, method="counts", **kw),
            solve(hosts, units, workers, top=every, method="brute_force", **kw))


@pytest.mark.parametrize(("units", "workers"), WORKER_SETS)
@pytest.mark.parametrize("hosts", [1, 2, 3, 4, 5, 6])
def test_it_ranks_every_fleet_exactly_as_brute_force_does(hosts, units, workers):
    counts, brute = full(hosts, units, workers)
    assert ranking(counts) == ranking(brute)
    assert counts.candidates == brute.candidates == composition_count(
        hosts, len(host_layouts(make_problem(hosts, units, workers), maximal_only=True)))


def _weights(names):
    return st.lists(st.integers(1, 9), min_size=len(names), max_size=len(names)).map(
        lambda ws: {n: Fraction(w, sum(ws)) for n, w in zip(names, ws, strict=True)})


@st.composite
def problems(draw):
    units, workers = draw(st.sampled_from(WORKER_SETS))
    names = list(workers)
    split = draw(_weights(names))
    qps = draw(st.lists(st.integers(1, 30), min_size=len(names), max_size=len(names)))
    hosts = draw(st.integers(1, 6))
    demand = draw(st.one_of(st.none(), st.integers(1, 500)))
    return hosts, units, workers, split, dict(zip(names, qps, strict=True)), demand


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_it_agrees_with_brute_force_for_any_split_and_throughput(case):
    hosts, units, workers, split, qps, demand = case
    counts, brute = full(hosts, units, workers, split=split, qps_per_worker=qps, demand_qps=demand)
    assert ranking(counts) == ranking(brute)


@st.composite
def free_problems(draw):
    units = draw(st.integers(3, 9))
    k = draw(st.integers(1, 3))
    sizes = draw(st.lists(st.integers(1, units), min_size=k, max_size=k, unique=True))
    workers = {f"w{i}": s for i, s in enumerate(sizes)}
    problem = make_problem(1, units, workers)
    lays = len(host_layouts(problem, maximal_only=True))
    hosts = draw(st.integers(1, 6).filter(lambda h: lays ** h <= 3000))
    return hosts, units, workers


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(free_problems())
def test_it_agrees_with_brute_force_for_any_worker_sizes(case):
    hosts, units, workers = case
    counts, brute = full(hosts, units, workers)
    assert ranking(counts) == ranking(brute)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(WORKER_SETS[:3] + WORKER_SETS[4:]), st.integers(1, 3))
def test_it_loses_nothing_by_using_maximal_layouts_only(case, hosts):
    # Brute force over every layout, maximal or not, finds no better key.
    units, workers = case
    problem = make_problem(hosts, units, workers)
    everything = brute_force_fleets(problem, host_layouts(problem))
    best_any = max((w, n, -x) for w, n, x in everything.values())
    top = solve(hosts, units, workers).ranked[0]
    assert best_any == (top.worst_ratio, top.nominal, -top.wasted_units)


def _tilings(units, sizes):
    """Every strip of ``units`` cells tiled with free cells and whole worker blocks, as counts."""
    if units == 0:
        yield (0,) * len(sizes)
        return
    yield from _tilings(units - 1, sizes)  # this cell free
    for i, size in enumerate(sizes):
        if size <= units:
            for rest in _tilings(units - size, sizes):
                yield tuple(c + (j == i) for j, c in enumerate(rest))


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 11), st.lists(st.integers(1, 6), min_size=1, max_size=3, unique=True))
def test_it_finds_exactly_the_layouts_a_strip_can_be_tiled_with(units, sizes):
    sizes = [s for s in sizes if s <= units] or [1]
    workers = {f"w{i}": s for i, s in enumerate(sizes)}
    problem = make_problem(1, units, workers)
    layouts = host_layouts(problem)
    assert {lay.counts for lay in layouts} == set(_tilings(units, sizes))
    assert len(layouts) == len({lay.counts for lay in layouts})
    for lay in layouts:
        strip = lay.strip()
        for name, size in workers.items():
            assert strip.count(name) == size * lay.counts[list(workers).index(name)]
        # the free units form one block at the far end
        assert strip[lay.used:] == [None] * lay.wasted


@pytest.mark.parametrize(("total", "parts"), [(0, 1), (3, 1), (4, 3), (7, 4), (30, 3)])
def test_it_generates_every_composition_once(total, parts):
    rows = compositions(total, parts)
    expected = {c for c in itertools.product(range(total + 1), repeat=parts) if sum(c) == total}
    assert {tuple(r) for r in rows.tolist()} == expected
    assert len(rows) == math.comb(total + parts - 1, parts - 1)


def test_it_refuses_a_question_too_big_to_score_with_a_hint():
    from emulator.analysis.placement import PlacementError

    with pytest.raises(PlacementError, match="fewer hosts"):
        solve(400, 10, {"a": 1, "b": 2, "c": 5})
    assert composition_count(400, 10) > MAX_COMPOSITIONS


def test_it_stays_exact_when_scaled_keys_outgrow_64_bit_integers():
    # Awkward shares and throughputs make the common denominators huge; the counts
    # method switches to Python integers and must still match brute force.
    kw = {
        "split": {"small": "0.123456789123", "big": "0.876543210877"},
        "qps_per_worker": {"small": "1/999999937", "big": "123456789/999999929"},
        "demand_qps": "98765.4321",
    }
    counts, brute = full(5, 10, {"small": 2, "big": 5}, **kw)
    assert ranking(counts) == ranking(brute)
