"""Placement questions taken from a scenario, and where its own placement ranks."""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from emulator.analysis.placement import PlacementError, make_problem, solve
from emulator.analysis.placement.scenario import current_fleet, problem_args, rank_of
from emulator.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def doc():
    return load_scenario("doc-as-written", max_requests=None)


def test_it_takes_hosts_sizes_split_and_throughput_from_the_scenario(doc):
    args = problem_args(doc)
    assert (args["hosts"], args["units"], args["workers"]) == (3, 10, {"small": 2, "big": 5})
    assert args["qps_per_worker"] == {"small": Fraction(40, 3), "big": Fraction(40, 3)}
    assert args["split"] == {"small": Fraction(1, 2), "big": Fraction(1, 2)}
    assert args["demand_qps"] == 1000


def test_it_ranks_the_configured_placement_among_all_fleets(doc):
    args = problem_args(doc)
    problem = make_problem(**args)
    current = current_fleet(problem, doc)
    assert current.label(problem.names) == "2 big / 2 big / 5 small"
    assert current.worst_ratio == 0
    ranking = solve(**args)
    listed = next(f for f in ranking.ranked if f.label(problem.names) == "2 big / 2 big / 5 small")
    assert rank_of(problem, current) == (listed.rank, len({f.rank for f in ranking.ranked}))


def test_it_draws_a_configured_host_with_gaps_as_it_is(doc):
    odd = doc.with_overrides(['hosts[1].workers=["small@1", "small@6"]'])
    problem = make_problem(**problem_args(odd))
    host = current_fleet(problem, odd).hosts()[-1]
    assert host.strip() == [None, "small", "small", None, None, None, "small", "small", None, None]
    assert not host.maximal


def test_it_refuses_hosts_of_different_sizes(doc):
    data = doc.to_dict()
    data["hosts"][1]["units"] = 12
    from emulator.scenario import Scenario

    mixed = Scenario.from_dict(data, None)
    with pytest.raises(PlacementError, match="mixes hosts of 10, 12 units"):
        problem_args(mixed)


def test_the_cli_shows_where_the_scenario_placement_ranks():
    done = subprocess.run([sys.executable, "-m", "emulator", "place", "--scenario", "doc-as-written", "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["current"]["rank"] == 8 and data["current"]["ranks"] == 10
    assert data["ranked"][0]["label"] == "1 big + 2 small / 1 big + 2 small / 1 big + 2 small"
    assert data["demand_qps"] == 1000
