"""The outcome names are spelled once, in ``emulator.sim.results.OUTCOME_KEYS``: the
books' counts, the summaries' totals and the frames carry exactly those."""

from __future__ import annotations

from dataclasses import fields

from emulator.sim.books import Counts
from emulator.sim.results import COUNT_KEYS, OUTCOME_KEYS, Outcomes


def test_the_counts_and_the_totals_carry_every_outcome() -> None:
    assert ("offered", *OUTCOME_KEYS) == COUNT_KEYS
    assert set(COUNT_KEYS) <= {f.name for f in fields(Counts)}
    assert {*COUNT_KEYS, "in_system_end"} <= {f.name for f in fields(Outcomes)}


def test_an_interval_finishes_the_requests_of_every_outcome_and_the_law_counts_them_all() -> None:
    counts = Counts(**{key: i + 1 for i, key in enumerate(OUTCOME_KEYS)})
    assert counts.finished() == sum(range(1, len(OUTCOME_KEYS) + 1))
    out = Outcomes(**{key: getattr(counts, key) for key in OUTCOME_KEYS}, in_system_end=4)
    out.offered = counts.finished() + 4
    assert out.balanced()
    out.orphaned += 1
    assert not out.balanced()
    assert list(out.to_dict())[: len(COUNT_KEYS) + 1] == [*COUNT_KEYS, "in_system_end"]
