"""A run summary's outcome shares account for every offered request: those still in
the system at the end included, the shown percents add up to exactly 100%."""

from __future__ import annotations

import tomllib
from importlib import resources

import pytest

from emulator.scenario import Scenario
from emulator.scenario.overrides import apply_overrides
from emulator.scenario.presets import PRESETS
from emulator.sim.engine import Engine
from reviewer.runs.outcomes import OUTCOMES, outcome_shares

# Long enough for every preset's traffic to build a queue, short enough for a quick test:
# a preset cut short leaves the most requests in the system at its end.
CUT_S = 40
# A day's diurnal traffic starts from nothing at midnight: its first hours instead.
CUT_S_OF = {"autoscaled-diurnal": 4 * 3600}


def _summary(name: str, seed: int) -> dict:
    text = resources.files("emulator.scenario.presets").joinpath(f"{name}.toml").read_text("utf-8")
    cut = CUT_S_OF.get(name, CUT_S)
    data = apply_overrides(tomllib.loads(text), [f"duration_s={cut}"])
    # The faults scheduled within the cut, at their times.
    data["faults"] = [f for f in data.get("faults", []) if f["at_s"] < cut]
    scenario = Scenario.from_dict(data, max_requests=None)
    return Engine(scenario, seed=seed).run().to_dict()


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_presets_summary_shares_add_up_to_100_percent(name: str) -> None:
    summary = _summary(name, seed=1)
    shares = outcome_shares(summary)
    assert [s["key"] for s in shares] == [key for key, _ in OUTCOMES]
    assert summary["offered"] > 0
    # Every offered request is counted once, those still in the system included ...
    assert sum(s["count"] for s in shares) == summary["offered"], (name, shares)
    # ... and the one-decimal percents the page shows add up to exactly 100.0.
    assert sum(round(10 * s["percent"]) for s in shares) == 1000, (name, shares)
    for s in shares:
        assert abs(s["percent"] - 100 * s["count"] / summary["offered"]) <= 0.1, (name, s)


def test_a_preset_cut_short_shows_requests_still_in_the_system() -> None:
    shares = {s["key"]: s for s in outcome_shares(_summary("doc-as-written", seed=1))}
    # The doc's system builds a queue that never drains: much of the offer is still in it.
    assert shares["in_system_end"]["count"] > 0 and shares["in_system_end"]["percent"] > 1


def test_rounding_each_share_alone_would_not_add_up_but_these_do() -> None:
    # Three equal thirds: each 33.3% alone sums to 99.9%.
    summary = {"offered": 3, "ok": 1, "timed_out": 1, "in_system_end": 1}
    percents = [s["percent"] for s in outcome_shares(summary)]
    assert sorted(percents, reverse=True)[:3] == [33.4, 33.3, 33.3]
    assert round(sum(percents), 6) == 100.0
    # Six nearly equal sixths: alone each 16.7%, 100.2% together.
    summary = {"offered": 6, "ok": 1, "timed_out": 1, "shed": 1, "lost": 1, "orphaned": 1, "in_system_end": 1}
    assert round(sum(s["percent"] for s in outcome_shares(summary)), 6) == 100.0


def test_an_empty_run_has_no_share() -> None:
    assert all(s["percent"] == 0 for s in outcome_shares({"offered": 0}))
    assert outcome_shares(None) == []


def test_the_run_page_lists_the_emulators_outcomes_and_those_still_in_the_system() -> None:
    from emulator.sim.results import OUTCOME_KEYS
    from reviewer.runs.outcomes import OUTCOMES

    assert [key for key, _ in OUTCOMES] == [*OUTCOME_KEYS, "in_system_end"]
    assert dict(OUTCOMES)["timed_out"] == "timed out"


def test_the_shed_share_lists_its_reasons_that_shed_something() -> None:
    summary = {
        "offered": 10, "ok": 4, "shed": 6,
        "shed_reasons": {"queue_full": 5, "oversized": 0, "rate_limit": 1},
    }
    shed = next(s for s in outcome_shares(summary) if s["key"] == "shed")
    assert shed["reasons"] == [
        {"key": "queue_full", "label": "waiting bound full", "count": 5},
        {"key": "rate_limit", "label": "gateway rate limit", "count": 1},
    ]
    assert sum(r["count"] for r in shed["reasons"]) == shed["count"]
    # The other outcomes carry no reasons.
    assert all("reasons" not in s for s in outcome_shares(summary) if s["key"] != "shed")
