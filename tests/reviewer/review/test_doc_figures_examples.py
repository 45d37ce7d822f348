"""On both example reviews, the doc-figure finder proposes every figure their fleet
config marks "from the doc", with its value, in the sentence the mark quotes."""

from __future__ import annotations

import pytest

from emulator.analysis.doc_figures import find_figures
from emulator.scenario import Scenario, load_scenario
from reviewer.fleets.provenance import FROM_DOC, split
from reviewer.review.example.reviews import EXAMPLES


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.key for e in EXAMPLES])
def test_every_figure_marked_from_the_doc_is_proposed(example):
    scenario = load_scenario(example.toml(), max_requests=None)
    data = scenario.to_dict()
    marked = split(example.provenance, data)[FROM_DOC]
    assert marked, "each example marks the figures its doc states"
    proposed = find_figures(example.body(), scenario)
    for mark in marked:
        quote = " ".join(mark["quote"].split())
        hits = [f for f in proposed if f.key == mark["path"] and (quote in f.sentence or f.sentence in quote)]
        assert hits, f"{mark['path']} ({quote!r}) not proposed"
        value = mark["value"]
        if isinstance(value, int | float):
            assert any(isinstance(f.value, int | float) and abs(f.value - value) < 1e-9 for f in hits), mark
        else:
            assert any(str(f.value).lower() == str(value).lower() for f in hits), mark


def test_the_seed_example_states_its_figures_too():
    first = next(e for e in EXAMPLES if e.key == "gateway")
    scenario = Scenario.from_dict(load_scenario(first.toml(), max_requests=None).to_dict(), max_requests=None)
    keys = {f.key for f in find_figures(first.body(), scenario)}
    assert {"traffic.qps", "traffic.peak_qps", "dispatcher.max_batch_tokens", "worker.batch_s"} <= keys
