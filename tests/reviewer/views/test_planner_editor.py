"""The SLO planner in the fleet editor: its keys are offered (the predictor as a
choice, ``slo`` among the metrics) for the whole model and per pool, an edit of them
checks, a bad one names its key, and a fleet config using them saves and runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from review_data_fixtures import *  # noqa: F403
from runs_helpers import play_saved_fleet

from reviewer.fleets.form_catalog import form_groups

ROOT = Path(__file__).resolve().parents[3]
PRESET = ROOT / "emulator" / "scenario" / "presets" / "dynamo-planner-ramp.toml"


def test_the_editor_offers_each_planned_pools_keys() -> None:
    from emulator.scenario import load_scenario

    spec = load_scenario(PRESET.read_text("utf-8"))
    [pools] = [g for g in form_groups(spec.to_dict(), spec) if g["key"] == "pools"]
    items = {i["title"]: {f["name"]: f for f in i["fields"]} for i in pools["items"]}
    prefill, decode = items["Autoscaler of pool prefill"], items["Autoscaler of pool decode"]
    assert prefill["metric"]["options"] == ["queue", "kv", "running", "slo"] and prefill["metric"]["value"] == "slo"
    assert prefill["predictor"]["options"] == ["moving_average", "linear_trend", "seasonal"]
    assert prefill["predictor"]["value"] == "linear_trend"
    assert prefill["target_ttft_s"]["value"] == 1.5 and prefill["target_ttft_s"]["unit"] == "s"
    assert decode["target_tbt_s"]["value"] == 0.04 and decode["target_ttft_s"]["value"] is None
    assert prefill["window_s"]["used"] == 120.0 and prefill["horizon_s"]["optional"]
    assert prefill["per_worker_qps"]["path"] == "pools.prefill.autoscaler.per_worker_qps"
    assert prefill["season_s"]["optional"] and prefill["season_s"]["unit"] == "s, the load's period"
    # The model-wide [autoscaler] offers the same keys.
    [auto] = [g for g in form_groups(spec.to_dict(), spec) if g["key"] == "autoscaler"]
    assert {"target_ttft_s", "target_tbt_s", "per_worker_qps", "predictor", "window_s", "horizon_s", "season_s"} <= {
        f["name"] for f in auto["fields"]}


@pytest.mark.django_db
def test_a_form_edit_of_the_planner_checks_and_a_bad_one_names_the_key(api_as: Any) -> None:
    owner = api_as("owner")
    text = PRESET.read_text("utf-8")
    body = owner.post("/api/fleets/check/", {"toml": text, "edits": [
        {"op": "set", "path": "pools.prefill.autoscaler.predictor", "value": "moving_average"},
        {"op": "set", "path": "pools.prefill.autoscaler.horizon_s", "value": 30},
        {"op": "set", "path": "pools.decode.autoscaler.target_tbt_s", "value": 0.05}]}, format="json").json()
    assert body["valid"] is True, body
    prefill = body["scenario"]["pools"]["prefill"]["autoscaler"]
    # moving_average is the default: the stored form leaves it out.
    assert "predictor" not in prefill and prefill["horizon_s"] == 30
    assert body["scenario"]["pools"]["decode"]["autoscaler"]["predictor"] == "linear_trend"
    decode = body["scenario"]["pools"]["decode"]["autoscaler"]
    assert decode["target_tbt_s"] == 0.05
    refused = owner.post("/api/fleets/check/", {"toml": text, "edits": [
        {"op": "set", "path": "pools.prefill.autoscaler.predictor", "value": "oracle"}]}, format="json").json()
    assert refused["valid"] is False and refused["error"]["path"] == "pools.prefill.autoscaler.predictor"
    # The item's remove takes the pool's planner away and leaves the other's.
    removed = owner.post("/api/fleets/check/", {"toml": text, "edits": [
        {"op": "remove", "path": "pools.prefill.autoscaler"}]}, format="json").json()
    assert removed["valid"] is True, removed
    assert "autoscaler" not in removed["scenario"]["pools"]["prefill"]
    assert removed["scenario"]["pools"]["decode"]["autoscaler"]["metric"] == "slo"


@pytest.mark.django_db
@pytest.mark.usefixtures("redis_url")
def test_a_fleet_config_using_the_planner_saves_and_runs_from_the_session(
    api_as: Any, review_doc: Any, people: dict
) -> None:
    owner = api_as("owner")
    body = owner.post("/api/fleets/check/", {"toml": PRESET.read_text("utf-8"), "edits": [
        {"op": "set", "path": "pools.prefill.autoscaler.predictor", "value": "moving_average"}]},
        format="json").json()
    assert body["valid"] is True
    saved = owner.post("/api/fleets/", {"name": "planner", "toml": body["toml"], "doc": review_doc.pk},
                       format="json")
    assert saved.status_code == 201, saved.content
    run, last = play_saved_fleet(owner, people["owner"], review_doc, saved.json()["id"], ["duration_s=120"])
    assert last is not None
    planned = run.summary["pool_autoscale"]
    assert planned["prefill"]["predictor"] == "moving_average"
    assert planned["decode"]["predictor"] == "linear_trend"
    assert planned["prefill"]["target_s"] == 1.5 and planned["decode"]["target_s"] == 0.04
    assert len(planned["prefill"]["looks"]["predicted_qps"]) == 120 // 15


@pytest.mark.django_db
@pytest.mark.usefixtures("redis_url")
def test_a_seasonal_planner_set_in_the_editor_saves_and_runs(api_as: Any, review_doc: Any, people: dict) -> None:
    owner = api_as("owner")
    edits = [{"op": "set", "path": f"pools.{pool}.autoscaler.{key}", "value": value}
             for pool in ("prefill", "decode") for key, value in (("predictor", "seasonal"), ("season_s", 120))]
    short = owner.post("/api/fleets/check/", {"toml": PRESET.read_text("utf-8"), "edits": edits},
                       format="json").json()
    # Two minutes is not longer than the one-minute warm-up plus half the two-minute window.
    assert short["valid"] is False and short["error"]["path"] == "pools.prefill.autoscaler.season_s"
    edits = [e if e["value"] != 120 else {**e, "value": 300} for e in edits]
    body = owner.post("/api/fleets/check/", {"toml": PRESET.read_text("utf-8"), "edits": edits},
                      format="json").json()
    assert body["valid"] is True, body
    assert body["scenario"]["pools"]["decode"]["autoscaler"]["season_s"] == 300
    saved = owner.post("/api/fleets/", {"name": "seasonal", "toml": body["toml"], "doc": review_doc.pk},
                       format="json")
    assert saved.status_code == 201, saved.content
    run, last = play_saved_fleet(owner, people["owner"], review_doc, saved.json()["id"], ["duration_s=480"])
    assert last is not None
    planned = run.summary["pool_autoscale"]
    assert {a["predictor"] for a in planned.values()} == {"seasonal"}
    # 480 s of looks every 15 s: past a season and a window (420 s), the seasonal rule predicted.
    assert all(a["looks"]["t_s"][-1] > 420 for a in planned.values())
