"""Pipelined prefill on the run page and in the fleet editor: its charts draw the
engine's own frame metrics for runs with a pipeline group and none without, its totals
read the summary, the editor offers the group's keys, and a fleet config with a group
is saved and run from the web."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from review_data_fixtures import *  # noqa: F403
from runs_helpers import charts_of, pick, play_saved_fleet, run_preset

from reviewer.fleets.form_catalog import form_groups
from reviewer.views.mechanism_charts import MECHANISM_METRICS, MECHANISM_TOTALS

ROOT = Path(__file__).resolve().parents[3]
PRESET = ROOT / "emulator" / "scenario" / "presets" / "mooncake-long-context-pipeline.toml"
MECHANISM = "Pipelined prefill"
KEY = "models.chat.disaggregated"


def _run(overrides: list[str]) -> tuple[list[dict], dict]:
    return run_preset("mooncake-long-context-pipeline", overrides)


def _charts() -> list[dict]:
    return charts_of(MECHANISM)


def test_its_charts_draw_the_group_metrics_the_engine_fills_and_its_totals_are_numbers() -> None:
    frames, summary = _run(["duration_s=200"])
    keys = {m["key"] for c in _charts() for m in c["metrics"]}
    assert {"pipelined", "pipelined_prefill_max_s"} <= keys <= {*MECHANISM_METRICS, "prefill_ttft_p95_s"}
    for key in keys:
        assert any(f["m"][key][0] is not None for f in frames), key
    pipelined = sum(f["m"]["pipelined"][0] for f in frames)
    model = summary["per_model"]["chat"]
    assert pipelined == model["pools"]["pipeline"]["pipelined"] > 0
    # A frame's longest pipelined prefill is one of the pipelined prompts' prefill TTFTs.
    longest = max(f["m"]["pipelined_prefill_max_s"][0] or 0 for f in frames)
    assert longest == pytest.approx(model["pools"]["pipeline"]["prefill_ttft_s"]["max"], rel=0.05)
    shown = {tuple(t["path"]): pick(model, t["path"]) for t in MECHANISM_TOTALS if t["mechanism"] == MECHANISM}
    assert shown and all(isinstance(v, int | float) for v in shown.values()), shown


def test_a_run_without_a_group_shows_none_of_its_charts_or_totals() -> None:
    frames, summary = _run(["duration_s=30", f"{KEY}.pipeline_threshold_tokens=0"])
    present = {k for c in _charts() for k in c.get("present_keys", [m["key"] for m in c["metrics"]])}
    assert present and not (present & set(frames[-1]["m"]))
    assert "prefill_ttft_p50_s" in frames[-1]["m"]  # the pools' own charts stay
    assert "pipeline" not in summary["per_model"]["chat"]["pools"]


def test_the_editor_offers_the_group_keys_with_their_units() -> None:
    from emulator.scenario import load_scenario

    spec = load_scenario(PRESET.read_text("utf-8"))
    groups = form_groups(spec.to_dict(), spec)
    fields = {f["name"]: f for g in groups for item in g.get("items", []) for f in item["fields"]
              if f["path"].startswith(f"{KEY}.pipeline_")}
    assert set(fields) == {"pipeline_threshold_tokens", "pipeline_workers", "pipeline_chunk_tokens", "pipeline_hop_s",
                           "pipeline_link_gb_s"}
    assert fields["pipeline_workers"]["value"] == 3 and fields["pipeline_threshold_tokens"]["value"] == 65536
    assert all(f["unit"] for f in fields.values())


@pytest.mark.django_db
def test_form_edits_of_the_group_check_and_a_bad_one_names_the_key(api_as: Any) -> None:
    owner = api_as("owner")
    text = PRESET.read_text("utf-8")
    body = owner.post("/api/fleets/check/", {"toml": text, "edits": [
        {"op": "set", "path": f"{KEY}.pipeline_workers", "value": 4}]}, format="json").json()
    assert body["valid"] is True, body
    assert body["scenario"]["models"]["chat"]["disaggregated"]["pipeline_workers"] == 4
    assert "# the prefill pool's last three workers" in body["toml"]  # the comments are kept
    refused = owner.post("/api/fleets/check/", {"toml": text, "edits": [
        {"op": "set", "path": f"{KEY}.pipeline_workers", "value": 8}]}, format="json").json()
    assert refused["valid"] is False and refused["error"]["path"] == f"{KEY}.pipeline_workers"


@pytest.mark.django_db
@pytest.mark.usefixtures("redis_url")
def test_a_fleet_config_with_a_group_saves_and_runs_from_the_session(
    api_as: Any, review_doc: Any, people: dict
) -> None:
    text = PRESET.read_text("utf-8")
    owner = api_as("owner")
    saved = owner.post("/api/fleets/", {"name": "pipelined", "toml": text, "doc": review_doc.pk}, format="json")
    assert saved.status_code == 201, saved.content
    assert saved.json()["scenario"]["models"]["chat"]["disaggregated"]["pipeline_workers"] == 3
    assert "pipeline_threshold_tokens" in owner.get(f"/api/fleets/{saved.json()['id']}/").json()["toml"]
    run, last = play_saved_fleet(owner, people["owner"], review_doc, saved.json()["id"], ["duration_s=120"])
    assert last is not None and "pipelined" in last["m"]
    assert run.summary["per_model"]["chat"]["pools"]["pipeline"]["pipelined"] > 0
