"""Fragmentation of occupied hosts and the incremental placer."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emulator.analysis.placement import PlacementError
from emulator.analysis.placement.fragment import (
    fleet_fragmentation,
    free_blocks,
    host_fragmentation,
    parse_slots,
    place_incremental,
)

SEED = {"small": 2, "big": 5}


def test_it_finds_that_two_careless_small_workers_leave_no_room_for_a_big_one():
    frag = host_fragmentation(10, SEED, parse_slots("small@1,small@6"))
    assert frag.free_units == 6
    assert frag.largest_free_block == 3
    assert frag.blocks == ((0, 1), (3, 3), (8, 2))
    assert frag.still_fit == {"small": 2, "big": 0}
    assert frag.fit_if_compact == {"small": 3, "big": 1}
    assert frag.to_dict()["types_that_fit"] == ["small"]


def test_it_counts_the_big_workers_a_fragmented_fleet_can_no_longer_take():
    hosts = [parse_slots("small@1,small@6"), parse_slots("small@4"), []]
    frag = fleet_fragmentation(10, SEED, hosts)
    assert frag.large == "big"
    assert (frag.large_fit_if_compact, frag.large_fit, frag.large_lost) == (4, 2, 2)


def test_it_places_big_workers_first_and_packs_small_ones_at_the_far_end():
    placed = place_incremental(10, SEED, [[], [], []], {"small": 6, "big": 3})
    assert placed.unplaced == {}
    assert [p[0] for p in placed.placed[:3]] == ["big"] * 3
    host_with_one_big = next(slots for slots in placed.hosts if sorted(slots) == sorted(
        [("big", 0), *[(n, u) for n, u in slots if n == "small"]]) and len(slots) == 3)
    assert sorted(u for n, u in host_with_one_big if n == "small") == [6, 8]
    assert fleet_fragmentation(10, SEED, [list(s) for s in placed.hosts]).large_lost == 0


def test_it_does_not_cut_a_big_slot_when_a_small_gap_will_do():
    # Host 0 has gaps of 1, 3 and 2 units; host 1 is empty. A small worker takes the
    # 2-unit gap (best fit) rather than cutting into the empty host's big slots.
    placed = place_incremental(10, SEED, [parse_slots("small@1,small@6"), []], {"small": 1})
    assert placed.placed == (("small", 0, 8),)
    assert fleet_fragmentation(10, SEED, [list(s) for s in placed.hosts]).hosts[1].still_fit["big"] == 2


def test_it_reports_what_did_not_fit():
    placed = place_incremental(10, SEED, [parse_slots("big@0,big@5")], {"small": 1})
    assert placed.unplaced == {"small": 1}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["small", "big"]), max_size=12), st.integers(1, 4))
def test_it_never_overlaps_workers_or_leaves_a_host(adds, hosts):
    want = {"small": adds.count("small"), "big": adds.count("big")}
    placed = place_incremental(10, SEED, [[] for _ in range(hosts)], want)
    for slots in placed.hosts:
        free_blocks(10, SEED, slots)  # raises on overlap or overflow
    got = {n: sum(1 for p in placed.placed if p[0] == n) for n in SEED}
    assert {n: got[n] + placed.unplaced.get(n, 0) for n in SEED} == want
    # Anything left unplaced really had no room.
    frag = fleet_fragmentation(10, SEED, [list(s) for s in placed.hosts])
    for name in placed.unplaced:
        assert sum(h.still_fit[name] for h in frag.hosts) == 0


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("big@7", "needs units 7-11"), ("small@0,small@1", "overlaps"), ("tiny@0", "unknown model"), ("big", "MODEL@FIRST_UNIT")],
)
def test_it_rejects_impossible_hosts_with_one_line(text, fragment):
    with pytest.raises(PlacementError, match=fragment) as err:
        host_fragmentation(10, SEED, parse_slots(text))
    assert "\n" not in str(err.value)
