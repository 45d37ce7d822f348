"""Per-host layouts, fleet ranking and scenario hosts from a placement (the seed's 3 hosts)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from scenarios import EXAMPLE

from emulator.analysis.placement import (
    PlacementError,
    evaluate_fleet,
    host_layouts,
    layout_for,
    make_problem,
    placement_to_hosts,
    solve,
)

SEED = {"small": 2, "big": 5}
QPS = {"small": Fraction(40, 3), "big": Fraction(40, 3)}
HALF = {"small": 0.5, "big": 0.5}


def seed_result(**kw):
    return solve(3, 10, SEED, HALF, qps_per_worker=QPS, **kw)


def entry(result, labels):
    names = result.problem.names
    for fleet in result.ranked:
        if sorted(lay.label(names) for lay in fleet.hosts()) == sorted(labels):
            return fleet
    raise AssertionError(f"{labels} not ranked")


def test_it_finds_the_three_maximal_layouts_of_the_seed_host():
    problem = make_problem(3, 10, SEED)
    maximal = {lay.label(problem.names): lay.wasted for lay in host_layouts(problem, maximal_only=True)}
    assert maximal == {"5 small": 0, "2 big": 0, "1 big + 2 small": 1}


def test_it_lists_every_layout_and_marks_only_maximal_ones():
    problem = make_problem(3, 10, SEED)
    layouts = host_layouts(problem)
    counts = {lay.counts for lay in layouts}
    expected = {(s, b) for b in range(3) for s in range(6) if 2 * s + 5 * b <= 10}
    assert counts == expected
    for lay in layouts:
        no_room = all(lay.wasted < size for size in problem.sizes)
        assert lay.maximal == no_room


def test_it_places_big_workers_first_at_low_offsets_in_the_canonical_strip():
    problem = make_problem(1, 10, SEED)
    lay = layout_for(problem, (2, 1))
    assert lay.slots == (("big", 0), ("small", 5), ("small", 7))
    assert lay.strip() == ["big"] * 5 + ["small"] * 4 + [None]


def test_it_shows_that_two_big_two_big_five_small_loses_the_small_model_with_one_host():
    fleet = entry(seed_result(), ["2 big", "2 big", "5 small"])
    assert fleet.wasted_units == 0
    lost_small = [c for c in fleet.cases if c.failure != "none" and c.capacity[0] == 0]
    assert [c.failure for c in lost_small] == ["host:2"]
    assert fleet.worst_ratio == 0


def test_it_shows_one_big_two_small_everywhere_survives_any_single_host_loss():
    result = seed_result()
    fleet = entry(result, ["1 big + 2 small"] * 3)
    assert fleet.wasted_units == 3
    assert all(min(c.capacity) > 0 for c in fleet.cases)
    assert fleet.rank == 1 and result.ranked[0] is fleet


def test_it_does_not_call_a_fleet_without_a_model_one_that_survives_any_host_loss():
    # "5 small" on every host has no big worker at all: its capacity is zero with
    # nothing lost, so no single loss "takes big down", yet big is never served.
    result = solve(3, 10, SEED, HALF, qps_per_worker=QPS, top=50)
    fleet = entry(result, ["5 small"] * 3)
    assert fleet.worst_ratio == 0
    shown = fleet.to_dict(result.problem)
    assert shown["unplaced"] == ["big"]
    assert shown["survives_any_host_loss"] is False


def test_it_names_the_host_losses_that_take_a_model_down_and_passes_a_fleet_that_survives():
    result = seed_result()
    mixed = entry(result, ["2 big", "2 big", "5 small"]).to_dict(result.problem)
    assert mixed["unplaced"] == [] and mixed["lost_with"] == {"small": ["host:2"]}
    assert mixed["survives_any_host_loss"] is False
    spread = entry(result, ["1 big + 2 small"] * 3).to_dict(result.problem)
    assert spread["survives_any_host_loss"] is True and spread["lost_with"] == {}


def test_it_gives_about_100_to_120_qps_either_way():
    result = seed_result()
    for labels in (["2 big", "2 big", "5 small"], ["1 big + 2 small"] * 3):
        nominal = entry(result, labels).nominal
        assert 100 <= nominal <= 120
        assert nominal == 9 * Fraction(40, 3)


def test_it_ranks_by_worst_case_then_nominal_then_waste():
    result = seed_result()
    keys = [(f.worst_ratio, f.nominal, -f.wasted_units) for f in result.ranked]
    assert keys == sorted(keys, reverse=True)
    assert [f.rank for f in result.ranked] == list(range(1, 11))


def test_it_shows_every_tie_with_the_last_fleet_shown():
    # Four hosts of 4 units, two 2-unit types: "1 a + 1 b" everywhere is best; four
    # different fleets tie for second on every key, and all of them are shown.
    result = solve(4, 4, {"a": 2, "b": 2}, top=2)
    ranks = [f.rank for f in result.ranked]
    assert ranks == [1, 2, 2, 2, 2]
    second = {(f.worst_ratio, f.nominal, f.wasted_units) for f in result.ranked[1:]}
    assert second == {(Fraction(4), Fraction(8), 0)}
    assert result.left_off == result.candidates - 5


def test_it_reads_ratios_against_a_demand_when_given():
    result = seed_result(demand_qps=1000)
    best = result.ranked[0]
    assert best.worst_ratio == Fraction(2) * Fraction(40, 3) / (Fraction(1, 2) * 1000)


def test_it_skips_a_model_with_no_share_in_the_worst_case():
    result = solve(2, 10, SEED, {"small": 1, "big": 0})
    best = result.ranked[0]
    assert all(c.ratio[1] is None for c in best.cases)
    # 5 small on each host; losing one leaves 5 workers, over a share of 1.
    assert best.groups[0][1].counts == (5, 0)
    assert best.worst_ratio == 5


def test_it_turns_a_ranked_fleet_into_scenario_host_groups():
    result = seed_result()
    fleet = entry(result, ["2 big", "2 big", "5 small"])
    groups = placement_to_hosts(fleet)
    assert groups == [
        {"count": 2, "units": 10, "workers": ["big@0", "big@5"]},
        {"count": 1, "units": 10, "workers": ["small@0", "small@2", "small@4", "small@6", "small@8"]},
    ]
    assert placement_to_hosts(fleet.to_dict(result.problem)) == groups


def test_its_host_groups_load_as_a_scenario():
    from emulator.scenario import load_scenario

    base = load_scenario(EXAMPLE, max_requests=None).to_dict()
    base["hosts"] = placement_to_hosts(seed_result().ranked[0])
    from emulator.scenario import Scenario

    scenario = Scenario.from_dict(base, None)
    assert scenario.worker_count("small") == 6 and scenario.worker_count("big") == 3


def test_its_json_form_has_strips_and_a_table_per_failure_case():
    data = seed_result().to_dict()
    assert len(data["host_layouts"]) == 10
    top = data["ranked"][0]
    assert [h["strip"] for h in top["hosts"]] == [["big"] * 5 + ["small"] * 4 + [None]] * 3
    assert [c["failure"] for c in top["cases"]] == ["none", "host:0"]
    assert top["cases"][1]["alike"] == 3
    assert top["cases"][0]["capacity"] == {"small": pytest.approx(80.0), "big": pytest.approx(40.0)}


def test_evaluate_fleet_checks_one_host_per_distinct_layout():
    problem = make_problem(3, 10, SEED, HALF, qps_per_worker=QPS)
    two_big, five_small = layout_for(problem, (0, 2)), layout_for(problem, (5, 0))
    fleet = evaluate_fleet(problem, [(2, two_big), (1, five_small)])
    assert [(c.failure, c.alike) for c in fleet.cases] == [("none", 0), ("host:0", 2), ("host:2", 1)]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"workers": {"big": 11}}, "workers.big"),
        ({"units": 0}, "units"),
        ({"hosts": 0}, "hosts"),
        ({"split": {"small": 0.5, "big": 0.6}}, "split"),
        ({"split": {"small": 0.5, "tiny": 0.5}}, "split"),
        ({"split": {"small": 1}}, "split"),
        ({"qps_per_worker": {"small": 1, "big": 0}}, "qps_per_worker.big"),
    ],
)
def test_it_rejects_bad_input_with_one_line_naming_the_field(kwargs, field):
    args = {"hosts": 3, "units": 10, "workers": dict(SEED), "split": None} | kwargs
    with pytest.raises(PlacementError) as err:
        solve(args["hosts"], args["units"], args["workers"], args["split"],
              qps_per_worker=args.get("qps_per_worker"))
    assert str(err.value).startswith(field)
    assert "\n" not in str(err.value)


def test_it_reads_decimal_shares_exactly():
    problem = make_problem(1, 10, SEED, {"small": 0.3, "big": 0.7})
    assert problem.shares == (Fraction(3, 10), Fraction(7, 10))
