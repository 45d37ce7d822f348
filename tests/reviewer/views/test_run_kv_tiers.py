"""Lower KV tiers on the run page and in the fleet editor: their charts draw the
engine's own frame metrics for runs with tiers and none without, their totals read the
summary, and a fleet config with ``[[worker.kv_tiers]]`` is saved and run from the web."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from review_data_fixtures import *  # noqa: F403
from runs_helpers import charts_of, pick, play_saved_fleet, run_preset

from reviewer.fleets.form_catalog import form_groups
from reviewer.views.mechanism_charts import MECHANISM_METRICS, MECHANISM_TOTALS

ROOT = Path(__file__).resolve().parents[3]
PRESET = ROOT / "emulator" / "scenario" / "presets" / "mooncake-dram-tier.toml"
MECHANISM = "KV tiers"


def _run(overrides: list[str]) -> tuple[list[dict], dict]:
    return run_preset("mooncake-dram-tier", overrides)


def _charts() -> list[dict]:
    return charts_of(MECHANISM)


def test_its_charts_draw_the_tier_metrics_the_engine_fills_and_its_totals_are_numbers() -> None:
    frames, summary = _run(["duration_s=60"])
    keys = {m["key"] for c in _charts() for m in c["metrics"]}
    assert {"tier_hit_rate", "tier_load_s"} <= keys and {"tier_hit_rate", "tier_load_s"} <= set(MECHANISM_METRICS)
    for key in keys:
        assert any(f["m"][key][0] is not None for f in frames), key
    # The tier is hit in this run: some frame loads prefix KV from DRAM, taking time.
    assert any((f["m"]["tier_hit_rate"][0] or 0) > 0 for f in frames)
    assert sum(f["m"]["tier_load_s"][0] or 0 for f in frames) > 0
    model = summary["per_model"]["chat"]
    shown = {tuple(t["path"]): pick(model, t["path"]) for t in MECHANISM_TOTALS if t["mechanism"] == MECHANISM}
    for path in (("kv_tiers", "gpu", "hit_rate"), ("kv_tiers", "cpu", "hit_rate"), ("kv_tiers", "cpu", "load_s")):
        assert isinstance(shown[path], int | float), path
    # A tier the fleet has not got is left out (its path does not resolve).
    assert shown[("kv_tiers", "ssd", "hit_rate")] is None


def test_a_run_without_tiers_shows_none_of_their_charts_or_totals() -> None:
    frames, summary = _run(["duration_s=30", "worker.kv_tiers=[]"])
    present = {k for c in _charts() for k in c.get("present_keys", [m["key"] for m in c["metrics"]])}
    assert present and not (present & set(frames[-1]["m"]))
    assert "prefix_hit_rate" in frames[-1]["m"]  # the GPU cache's own chart stays
    assert "kv_tiers" not in summary["per_model"]["chat"]


def test_the_editor_offers_each_tier_as_an_item_and_no_garbled_worker_field() -> None:
    from emulator.scenario import load_scenario

    spec = load_scenario(PRESET.read_text("utf-8"))
    groups = form_groups(spec.to_dict(), spec)
    assert not [f for g in groups for f in g.get("fields", []) if f["name"] == "kv_tiers"]
    [tiers] = [g for g in groups if g["key"] == "kv_tiers"]
    [item] = tiers["items"]
    fields = {f["name"]: f for f in item["fields"]}
    assert fields["name"]["options"] == ["cpu", "ssd", "remote"] and fields["name"]["value"] == "cpu"
    assert fields["capacity_gb"]["path"] == "worker.kv_tiers[0].capacity_gb"
    assert fields["capacity_gb"]["value"] == 500.0 and fields["bandwidth_gb_s"]["unit"]
    assert item["remove"] == "worker.kv_tiers[0]" and tiers["add"]["values"]["name"] == "ssd"


@pytest.mark.django_db
def test_form_edits_of_the_tiers_check_and_a_bad_one_names_the_key(api_as: Any) -> None:
    owner = api_as("owner")
    text = PRESET.read_text("utf-8")
    body = owner.post("/api/fleets/check/", {"toml": text, "edits": [
        {"op": "set", "path": "worker.kv_tiers[0].capacity_gb", "value": 200},
        {"op": "add", "path": "worker.kv_tiers", "values": {"name": "ssd", "capacity_gb": 2000,
                                                            "bandwidth_gb_s": 5}}]}, format="json").json()
    assert body["valid"] is True, body
    tiers = body["scenario"]["worker"]["kv_tiers"]
    assert [(t["name"], t["capacity_gb"]) for t in tiers] == [("cpu", 200), ("ssd", 2000)]
    assert "# host DRAM under each worker's GPU cache" in body["toml"]  # the comments are kept
    removed = owner.post("/api/fleets/check/", {"toml": text, "edits": [
        {"op": "remove", "path": "worker.kv_tiers[0]"}]}, format="json").json()
    assert removed["valid"] is True and not removed["scenario"]["worker"].get("kv_tiers")
    refused = owner.post("/api/fleets/check/", {"toml": text, "edits": [
        {"op": "set", "path": "worker.kv_tiers[0].name", "value": "tape"}]}, format="json").json()
    assert refused["valid"] is False and "kv_tiers" in refused["error"]["path"]


@pytest.mark.django_db
@pytest.mark.usefixtures("redis_url")
def test_a_fleet_config_with_tiers_saves_and_runs_from_the_session(
    api_as: Any, review_doc: Any, people: dict
) -> None:
    text = PRESET.read_text("utf-8")
    assert "[[worker.kv_tiers]]" in text
    owner = api_as("owner")
    saved = owner.post("/api/fleets/", {"name": "dram tier", "toml": text, "doc": review_doc.pk}, format="json")
    assert saved.status_code == 201, saved.content
    assert [t["name"] for t in saved.json()["scenario"]["worker"]["kv_tiers"]] == ["cpu"]
    assert "[[worker.kv_tiers]]" in owner.get(f"/api/fleets/{saved.json()['id']}/").json()["toml"]
    run, last = play_saved_fleet(owner, people["owner"], review_doc, saved.json()["id"], ["duration_s=60"])
    assert last is not None and "tier_hit_rate" in last["m"] and "tier_load_s" in last["m"]
    tiers = run.summary["per_model"]["chat"]["kv_tiers"]
    assert tiers["cpu"]["hit_tokens"] > 0 and tiers["cpu"]["load_s"] > 0
