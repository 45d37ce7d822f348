"""SLO-aware admission on the run page and in the fleet editor: its charts draw the
engine's own frame metrics, its totals read the summary, the shed reason has its label,
and a fleet config using ``dispatcher.admission`` is edited, saved and run from the web."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from review_data_fixtures import *  # noqa: F403
from runs_helpers import charts_of, play_saved_fleet, run_preset

from reviewer.fleets.form_catalog import form_groups
from reviewer.runs.outcomes import outcome_shares
from reviewer.views.mechanism_charts import MECHANISM_TOTALS
from reviewer.views.vocabulary import RUN_CHARTS

ROOT = Path(__file__).resolve().parents[3]
PRESET = ROOT / "emulator" / "scenario" / "presets" / "pd-slo-admission.toml"
MECHANISM = "SLO-aware admission"


def _run(overrides: list[str]) -> tuple[list[dict], dict]:
    return run_preset("pd-slo-admission", overrides)


def _charts() -> list[dict]:
    return charts_of(MECHANISM)


def test_its_charts_draw_metrics_the_engine_fills_and_its_totals_are_numbers() -> None:
    frames, summary = _run(["duration_s=90"])
    assert len(_charts()) == 2
    for chart in _charts():
        for metric in chart["metrics"]:
            assert any(f["m"][metric["key"]][0] is not None for f in frames), metric
    model = summary["per_model"]["chat"]
    totals = [t for t in MECHANISM_TOTALS if t["mechanism"] == MECHANISM]
    for total in totals:
        value = model
        for key in total["path"]:
            value = value[key]
        assert isinstance(value, int | float), total
    # The shed chart of every run names the reason, and the summary's rows list it.
    [shed] = [c for c in RUN_CHARTS if c["key"] == "shed"]
    assert {"key": "shed_slo_miss", "label": "predicted SLO miss"} in shed["metrics"]
    [row] = [o for o in outcome_shares(summary) if o["key"] == "shed"]
    assert row["reasons"] == [{"key": "slo_miss", "label": "predicted SLO miss", "count": summary["shed"]}]


def test_a_run_without_the_rule_shows_none_of_its_charts() -> None:
    frames, summary = _run(["duration_s=30", 'dispatcher.admission="queue_limit"'])
    present = {k for c in _charts() for k in c["present_keys" if "present_keys" in c else "metrics"]
               for k in ([k] if isinstance(k, str) else [k["key"]])}
    assert present and not (present & set(frames[-1]["m"]))
    assert "admission" not in summary["per_model"]["chat"]


def test_the_editor_offers_the_rule_as_a_choice_with_its_slack() -> None:
    from emulator.scenario import load_scenario

    text = PRESET.read_text("utf-8")
    spec = load_scenario(text)
    groups = form_groups(spec.to_dict(), spec)
    [dispatcher] = [g for g in groups if g["key"] == "dispatcher"]
    fields = {f["name"]: f for f in dispatcher["fields"]}
    assert fields["admission"]["options"] == ["queue_limit", "predicted_ttft"]
    assert fields["admission"]["value"] == "predicted_ttft"
    assert fields["admission_slack"]["unit"] == "x slo.ttft_s"


@pytest.mark.django_db
def test_a_form_edit_of_the_rule_checks_and_a_bad_one_names_the_key(api_as: Any) -> None:
    owner = api_as("owner")
    text = PRESET.read_text("utf-8")
    body = owner.post("/api/fleets/check/", {"toml": text, "edits": [
        {"op": "set", "path": "dispatcher.admission_slack", "value": 0.8}]}, format="json").json()
    assert body["valid"] is True and "admission_slack = 0.8" in body["toml"]
    assert body["scenario"]["dispatcher"]["admission_slack"] == 0.8
    refused = owner.post("/api/fleets/check/", {"toml": text, "edits": [
        {"op": "set", "path": "dispatcher.admission", "value": "eager"}]}, format="json").json()
    assert refused["valid"] is False and refused["error"]["path"] == "dispatcher.admission"


@pytest.mark.django_db
@pytest.mark.usefixtures("redis_url")
def test_a_fleet_config_using_the_rule_saves_and_runs_from_the_session(
    api_as: Any, review_doc: Any, people: dict
) -> None:
    text = PRESET.read_text("utf-8")
    assert 'admission = "predicted_ttft"' in text
    owner = api_as("owner")
    saved = owner.post("/api/fleets/", {"name": "slo admission", "toml": text, "doc": review_doc.pk}, format="json")
    assert saved.status_code == 201, saved.content
    assert saved.json()["scenario"]["dispatcher"]["admission"] == "predicted_ttft"
    run, last = play_saved_fleet(owner, people["owner"], review_doc, saved.json()["id"], ["duration_s=90"])
    assert last is not None and "rejected_per_s" in last["m"]
    assert run.summary["per_model"]["chat"]["admission"]["rejected"] == run.summary["shed_reasons"]["slo_miss"] > 0


def test_the_break_pass_offers_the_other_rule_and_each_option_loads() -> None:
    from emulator.scenario import Scenario, load_scenario
    from emulator.scenario.overrides import apply_overrides
    from reviewer.fleets.scenario_view import break_controls

    for preset, labels in (("pd-slo-admission", ["the waiting bound only (queue_limit)",
                                                 "refuse at 0.8 x the TTFT goal"]),
                           ("continuous-comfortable", ["refuse a predicted SLO miss (predicted_ttft)"])):
        data = load_scenario(preset).to_dict()
        [control] = [c for c in break_controls(data, ["round_robin"])["controls"]
                     if c["key"] == "dispatcher.admission"]
        assert [o["label"] for o in control["options"]] == labels
        for option in control["options"]:
            changed = Scenario.from_dict(apply_overrides(data, option["overrides"]), max_requests=None)
            assert changed.to_dict() != data
    # A fleet without a TTFT goal, or batching statically, is offered none.
    doc = load_scenario("doc-as-written").to_dict()
    assert not [c for c in break_controls(doc, ["round_robin"])["controls"] if c["key"] == "dispatcher.admission"]


@pytest.mark.django_db
def test_the_editor_saves_the_router_prefix_index_keys(api_as: Any) -> None:
    owner = api_as("owner")
    text = (PRESET.parent / "prefix-router-estimated.toml").read_text("utf-8")
    body = owner.post("/api/fleets/check/", {"toml": text, "edits": [
        {"op": "set", "path": "dispatcher.prefix_index_ttl_s", "value": 20},
        {"op": "set", "path": "dispatcher.prefix_index_capacity", "value": 64}]}, format="json").json()
    assert body["valid"] is True and "prefix_index_ttl_s = 20" in body["toml"]
    assert body["scenario"]["dispatcher"]["prefix_index_capacity"] == 64
    refused = owner.post("/api/fleets/check/", {"toml": text, "edits": [
        {"op": "set", "path": "dispatcher.prefix_index_ttl_s", "value": 0}]}, format="json").json()
    assert refused["valid"] is False and refused["error"]["path"] == "dispatcher.prefix_index_ttl_s"


@pytest.mark.django_db
def test_the_editor_saves_the_proxy_hop(api_as: Any) -> None:
    owner = api_as("owner")
    text = (PRESET.parent / "prefix-router-estimated.toml").read_text("utf-8")
    body = owner.post("/api/fleets/check/", {"toml": text, "edits": [
        {"op": "set", "path": "dispatcher.proxy_hop_s", "value": 0.002}]}, format="json").json()
    assert body["valid"] is True and "proxy_hop_s = 0.002" in body["toml"]
    assert body["scenario"]["dispatcher"]["proxy_hop_s"] == 0.002
