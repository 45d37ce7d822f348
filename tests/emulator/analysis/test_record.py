"""The record a fleet config version stores: numbers, placement and the doc's figures."""

from __future__ import annotations

import json
from pathlib import Path

from emulator.analysis.fleet import analyse
from emulator.analysis.record import RECORD_VERSION, fleet_record
from emulator.scenario import load_scenario
from emulator.scenario.presets import load_preset

ROOT = Path(__file__).resolve().parents[3]


def test_it_holds_the_numbers_the_placement_and_the_doc_figures_in_json():
    scenario = load_preset("doc-as-written")
    record = fleet_record(scenario, (ROOT / "reviewer" / "review" / "example" / "design-doc.md").read_text())
    assert json.loads(json.dumps(record)) == record
    assert record["version"] == RECORD_VERSION
    assert record["numbers"]["analysis"] == analyse(scenario).to_dict()
    placed = record["placement"]
    assert placed["applies"] and placed["current"]["label"] == "2 big / 2 big / 5 small"
    assert placed["current"]["models_down_with"] == {"small": ["host:2"]}
    assert placed["best"]["survives_any_host_loss"]
    assert any(f["key"] == "worker.batch_s" for f in record["doc_figures"])


def test_it_says_why_the_puzzle_does_not_apply():
    scenario = load_preset("doc-as-written")
    data = scenario.to_dict()
    data["hosts"][1]["units"] = 12
    from emulator.scenario import Scenario

    record = fleet_record(Scenario.from_dict(data, None))
    assert record["placement"] == {"applies": False, "why": record["placement"]["why"]}
    assert "mixes hosts" in record["placement"]["why"]


def test_a_split_fleets_record_ranks_its_pools():
    scenario = load_scenario("disagg-decode-undersized", max_requests=None)
    placed = fleet_record(scenario)["placement"]
    assert placed["models"] == {"chat/prefill": "chat", "chat/decode": "chat"}
    assert placed["current"]["models_down_with"] == {"chat": ["host:3"]}
