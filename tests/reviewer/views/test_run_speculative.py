"""Speculative decoding on the run page and in the fleet editor: its charts draw the
engine's own frame metrics for runs that speculate and none without, its totals read
the summary, and a fleet config with ``[worker.speculative]`` is saved and run from the
web."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from review_data_fixtures import *  # noqa: F403
from runs_helpers import charts_of, pick, play_saved_fleet, run_preset

from reviewer.fleets.form_catalog import form_groups
from reviewer.views.mechanism_charts import MECHANISM_METRICS, MECHANISM_TOTALS

ROOT = Path(__file__).resolve().parents[3]
PRESET = ROOT / "emulator" / "scenario" / "presets" / "spec-eagle-70b-h100.toml"
MECHANISM = "Speculative decoding"


def _run(overrides: list[str]) -> tuple[list[dict], dict]:
    return run_preset("spec-eagle-70b-h100", overrides)


def _charts() -> list[dict]:
    return charts_of(MECHANISM)


def test_its_charts_draw_the_metrics_the_engine_fills_and_its_totals_are_numbers() -> None:
    frames, summary = _run(["duration_s=40"])
    keys = {m["key"] for c in _charts() for m in c["metrics"]}
    assert keys == {"verified_token_share", "tokens_per_decode_step", "verification_step_tokens"}
    assert keys <= set(MECHANISM_METRICS)
    for key in keys:
        assert any(f["m"][key][0] is not None for f in frames), key
    # Measured against configured: below tau, as the steps that prefill give one token.
    tau = frames[-1]["m"]["verification_step_tokens"][0]
    assert tau == pytest.approx(2.533)
    measured = [f["m"]["tokens_per_decode_step"][0] for f in frames[1:]]
    assert all(1 < x < tau for x in measured) and len(set(measured)) > 5
    model = summary["per_model"]["chat"]
    for t in (t for t in MECHANISM_TOTALS if t["mechanism"] == MECHANISM):
        assert isinstance(pick(model, t["path"]), int | float), t["path"]


def test_a_run_without_speculation_shows_none_of_its_charts_or_totals() -> None:
    frames, summary = _run(["duration_s=20", "worker.speculative=false"])
    present = {k for c in _charts() for k in c.get("present_keys", [m["key"] for m in c["metrics"]])}
    assert present and not (present & set(frames[-1]["m"]))
    assert "speculative" not in summary["per_model"]["chat"]


def test_the_editor_offers_the_speculative_keys_as_a_group_and_no_garbled_worker_field() -> None:
    from emulator.scenario import load_scenario

    spec = load_scenario(PRESET.read_text("utf-8"))
    groups = form_groups(spec.to_dict(), spec)
    assert not [f for g in groups for f in g.get("fields", []) if f["name"] == "speculative"]
    [group] = [g for g in groups if g["key"] == "speculative"]
    fields = {f["name"]: f for f in group["fields"]}
    assert fields["method"]["options"] == ["draft", "eagle", "mtp"] and fields["method"]["value"] == "eagle"
    assert fields["draft_tokens"]["path"] == "worker.speculative.draft_tokens" and fields["draft_tokens"]["value"] == 3
    assert fields["acceptance_rate"]["value"] == 0.7 and fields["acceptance_rate"]["required"]
    assert group["remove"] == "worker.speculative" and "add" not in group
    plain = load_scenario(PRESET.read_text("utf-8")).with_overrides(["worker.speculative=false"])
    [off] = [g for g in form_groups(plain.to_dict(), plain) if g["key"] == "speculative"]
    assert off["remove"] is None and off["add"]["table"] == "worker.speculative"


@pytest.mark.django_db
def test_form_edits_of_speculation_check_and_a_bad_one_names_the_key(api_as: Any) -> None:
    owner = api_as("owner")
    text = PRESET.read_text("utf-8")
    body = owner.post("/api/fleets/check/", {"toml": text, "edits": [
        {"op": "set", "path": "worker.speculative.draft_tokens", "value": 4},
        {"op": "set", "path": "worker.speculative.acceptance_rate", "value": 0.8}]}, format="json").json()
    assert body["valid"] is True, body
    assert body["scenario"]["worker"]["speculative"]["draft_tokens"] == 4
    assert "# k: tokens drafted a decode step" in body["toml"]  # the comments are kept
    removed = owner.post("/api/fleets/check/", {"toml": text, "edits": [
        {"op": "remove", "path": "worker.speculative"}]}, format="json").json()
    assert removed["valid"] is True and "speculative" not in removed["scenario"]["worker"]
    added = owner.post("/api/fleets/check/", {"toml": removed["toml"], "edits": [
        {"op": "add", "path": "worker.speculative",
         "values": {"method": "mtp", "draft_tokens": 1, "acceptance_rate": 0.85}}]}, format="json").json()
    assert added["valid"] is True and added["scenario"]["worker"]["speculative"]["method"] == "mtp"
    refused = owner.post("/api/fleets/check/", {"toml": text, "edits": [
        {"op": "set", "path": "worker.speculative.acceptance_rate", "value": 1.0}]}, format="json").json()
    assert refused["valid"] is False and refused["error"]["path"] == "worker.speculative.acceptance_rate"


@pytest.mark.django_db
@pytest.mark.usefixtures("redis_url")
def test_a_fleet_config_with_speculation_saves_and_runs_from_the_session(
    api_as: Any, review_doc: Any, people: dict
) -> None:
    text = PRESET.read_text("utf-8")
    assert "[worker.speculative]" in text
    owner = api_as("owner")
    saved = owner.post("/api/fleets/", {"name": "eagle draft", "toml": text, "doc": review_doc.pk}, format="json")
    assert saved.status_code == 201, saved.content
    assert saved.json()["scenario"]["worker"]["speculative"]["draft_tokens"] == 3
    assert "[worker.speculative]" in owner.get(f"/api/fleets/{saved.json()['id']}/").json()["toml"]
    run, last = play_saved_fleet(owner, people["owner"], review_doc, saved.json()["id"], ["duration_s=30"])
    assert last is not None and "tokens_per_decode_step" in last["m"]
    fig = run.summary["per_model"]["chat"]["speculative"]
    assert fig["verified_tokens"] > 0 and 1 < fig["tokens_per_decode_step"] < fig["tokens_per_step"]
