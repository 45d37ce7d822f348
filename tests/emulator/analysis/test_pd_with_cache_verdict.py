"""Aggregated serving against disaggregated serving on a prefix-heavy, long-prompt
workload, in the analysis and in runs. While a split model could not cache prefixes,
the aggregated fleet with a prefix cache won any such comparison by its cache alone; with
prefix caching in the prefill pool the comparison is decided by what disaggregation
changes (prefill kept out of the decode steps), and under a tight TPOT goal the split
fleet wins."""

from __future__ import annotations

import pytest

from emulator import Engine
from emulator.analysis.fleet import analyse
from emulator.scenario import Scenario
from emulator.scenario.presets import load_preset

TIGHT = ["slo.tpot_s=0.025", "duration_s=150"]


def _fleets() -> dict[str, Scenario]:
    """The preset's workload on four 8-GPU hosts: aggregated, or split 3 prefill : 1
    decode; each with its prefix cache, and the split one without (as it had to be)."""
    split = load_preset("pd-long-prompt-admission", max_requests=None).with_overrides(
        [*TIGHT, "hosts[0].count=3", "hosts[1].count=1"])
    data = split.to_dict()
    del data["models"]["chat"]["disaggregated"]
    data["hosts"] = [{"count": 4, "units": 8, "workers": ["chat@0"]}]
    aggregated = Scenario.from_dict(data, max_requests=None)
    return {"aggregated": aggregated, "split": split,
            "split_without_cache": split.with_overrides(["worker.prefix_cache=false"])}


@pytest.fixture(scope="module")
def fleets() -> dict[str, Scenario]:
    return _fleets()


def test_the_analysis_no_longer_credits_the_aggregated_fleet_with_the_cache_alone(fleets) -> None:
    cap = {k: analyse(s).capacity_qps for k, s in fleets.items()}
    # Without a cache the split fleet's prefill pool redoes every shared context: the
    # aggregated fleet with one looked better by a third.
    assert cap["aggregated"] > 1.3 * cap["split_without_cache"]
    # With the cache in the prefill pool both save about as much, and the split fleet,
    # whose decode steps carry no prefill, meets the tight TPOT goal at a higher load.
    split = analyse(fleets["split"]).models["chat"]
    aggregated = analyse(fleets["aggregated"]).models["chat"]
    hit_split = split.pool("prefill").worker.hit_rate  # type: ignore[union-attr]
    hit_aggregated = aggregated.pools[0].worker.hit_rate
    assert hit_split is not None and hit_aggregated is not None
    assert abs(float(hit_split) - float(hit_aggregated)) < 0.05
    assert cap["split"] > cap["aggregated"]


def test_runs_agree_the_split_fleet_with_a_cache_serves_more_within_the_goals(fleets) -> None:
    runs = {k: Engine(s).run() for k, s in fleets.items()}
    # Of the requests offered, the share served within the goals (queue_limit refuses
    # what a fleet cannot take, so a slower fleet sheds more rather than serving late).
    good = {k: r.per_model["chat"].to_dict()["slo_goodput"] * r.ok / r.offered for k, r in runs.items()}
    saved = {k: r.prefill_tokens_saved / max(1, r.prefix_tokens_seen) for k, r in runs.items()}
    assert good["split"] > good["aggregated"] + 0.03
    assert good["aggregated"] > good["split_without_cache"] + 0.05
    assert runs["split_without_cache"].shed > 2 * runs["split"].shed
    assert abs(saved["split"] - saved["aggregated"]) < 0.05 and saved["split_without_cache"] == 0
    # The split fleet's decode steps carry no prefill: its TPOT tail is a fraction of the
    # aggregated fleet's.
    tpot = {k: r.per_model["chat"].to_dict()["tpot_s"]["p99"] for k, r in runs.items()}
    assert tpot["split"] < tpot["aggregated"] / 2
