"""A mixture of experts on the run page and in the fleet editor: its charts draw the
engine's own frame metrics (the experts a decode step hits and the weights it reads)
for a mixture and none for a dense model, the figures rise with the load, and a fleet
config with the expert keys is edited, saved and run from the web."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from review_data_fixtures import *  # noqa: F403
from runs_helpers import charts_of, play_saved_fleet, run_preset

from reviewer.fleets.form_catalog import form_groups
from reviewer.views.mechanism_charts import MECHANISM_METRICS, MECHANISM_TOTALS

ROOT = Path(__file__).resolve().parents[3]
PRESET = ROOT / "emulator" / "scenario" / "presets" / "deepseek-v3-h200.toml"
MECHANISM = "Mixture of experts"
KEYS = {"moe_experts_hit", "moe_weights_gb"}


def _run(name: str, overrides: list[str]) -> tuple[list[dict], dict]:
    return run_preset(name, overrides)


def _frames(name: str, overrides: list[str]) -> list[dict]:
    return _run(name, overrides)[0]


def _charts() -> list[dict]:
    return charts_of(MECHANISM)


def _mean(frames: list[dict], key: str) -> float:
    values = [f["m"][key][0] for f in frames[10:] if f["m"][key][0] is not None]
    return sum(values) / len(values)


def test_its_charts_draw_the_expert_metrics_the_engine_fills_and_they_rise_with_the_load() -> None:
    keys = {m["key"] for c in _charts() for m in c["metrics"]}
    assert keys == KEYS and set(MECHANISM_METRICS) >= KEYS
    light = _frames("deepseek-v3-h200", ["duration_s=60", "traffic.qps=1"])
    heavy = _frames("deepseek-v3-h200", ["duration_s=60", "traffic.qps=6"])
    for key in KEYS:
        assert any(f["m"][key][0] is not None for f in light), key
    # A few sequences a worker hit a fraction of the 256 experts; more hit more.
    assert 8 <= _mean(light, "moe_experts_hit") < 100 < _mean(heavy, "moe_experts_hit") <= 256
    assert 37 < _mean(light, "moe_weights_gb") < _mean(heavy, "moe_weights_gb") <= 671.0001
    # Reading every expert: every frame reads all of them.
    every = _frames("deepseek-v3-h200", ["duration_s=30", "traffic.qps=1", 'models.chat.arch.experts_read="all"'])
    hits = [f["m"]["moe_experts_hit"][0] for f in every if f["m"]["moe_experts_hit"][0] is not None]
    assert hits and all(h == pytest.approx(256) for h in hits)


def test_its_totals_read_the_summary_and_agree_with_the_frames() -> None:
    frames, summary = _run("deepseek-v3-h200", ["duration_s=60", "traffic.qps=2"])
    moe = summary["per_model"]["chat"]["moe"]
    totals = [t for t in MECHANISM_TOTALS if t["mechanism"] == MECHANISM]
    assert {tuple(t["path"]) for t in totals} == {("moe", k) for k in moe}
    assert moe["decode_steps"] > 1000
    # The run's mean is the frames' means weighted by their steps: between their extremes.
    hits = [f["m"]["moe_experts_hit"][0] for f in frames if f["m"]["moe_experts_hit"][0] is not None]
    assert min(hits) <= moe["experts_hit_mean"] <= max(hits) and 8 < moe["experts_hit_mean"] < 256
    # Weights read are linear in the experts hit: 17.1 GB and 58 x 44 MB for each.
    rest = 671 - 58 * 256 * 3 * 7168 * 2048 / 1e9
    expected = rest + 58 * moe["experts_hit_mean"] * 3 * 7168 * 2048 / 1e9
    assert moe["weights_read_gb_mean"] == pytest.approx(expected)


def test_a_dense_run_shows_none_of_their_charts_or_totals() -> None:
    frames, summary = _run("roofline-70b-h100", ["duration_s=20"])
    present = {m["key"] for c in _charts() for m in c["metrics"]}
    assert not (present & set(frames[-1]["m"]))
    assert "moe" not in summary["per_model"]["chat"]


def test_the_editor_offers_the_expert_keys() -> None:
    from emulator.scenario import load_scenario

    spec = load_scenario(PRESET.read_text("utf-8"))
    groups = form_groups(spec.to_dict(), spec)
    [item] = next(g for g in groups if g["key"] == "arch")["items"]
    fields = {f["name"]: f for f in item["fields"]}
    assert fields["expert_parallel"]["value"] == 8 and fields["expert_parallel"]["path"] == "models.chat.arch.expert_parallel"
    assert fields["experts_read"]["options"] == ["hit", "all"]
    # Left out, the catalog's figures are shown as the values used.
    assert fields["experts"]["used"] == 256 and fields["experts_per_token"]["used"] == 8
    assert fields["moe_layers"]["used"] == 58 and fields["expert_params_b"]["unit"] == "billion"


@pytest.mark.django_db
def test_form_edits_of_the_expert_keys_check_and_a_bad_one_names_the_key(api_as: Any) -> None:
    owner = api_as("owner")
    text = PRESET.read_text("utf-8")
    body = owner.post("/api/fleets/check/", {"toml": text, "edits": [
        {"op": "set", "path": "models.chat.arch.experts_read", "value": "all"}]}, format="json").json()
    assert body["valid"] is True, body
    assert body["scenario"]["models"]["chat"]["arch"]["experts_read"] == "all"
    assert "# the 256 routed experts spread over the worker's 8 GPUs" in body["toml"]  # comments kept
    refused = owner.post("/api/fleets/check/", {"toml": text, "edits": [
        {"op": "set", "path": "models.chat.arch.expert_parallel", "value": 4}]}, format="json").json()
    assert refused["valid"] is False and refused["error"]["path"] == "models.chat.arch.expert_parallel"


@pytest.mark.django_db
@pytest.mark.usefixtures("redis_url")
def test_a_fleet_config_with_experts_saves_and_runs_from_the_session(
    api_as: Any, review_doc: Any, people: dict
) -> None:
    text = PRESET.read_text("utf-8")
    owner = api_as("owner")
    saved = owner.post("/api/fleets/", {"name": "deepseek", "toml": text, "doc": review_doc.pk}, format="json")
    assert saved.status_code == 201, saved.content
    assert saved.json()["scenario"]["models"]["chat"]["arch"]["expert_parallel"] == 8
    assert "expert_parallel = 8" in owner.get(f"/api/fleets/{saved.json()['id']}/").json()["toml"]
    run, last = play_saved_fleet(owner, people["owner"], review_doc, saved.json()["id"],
                                 ["duration_s=30", "traffic.qps=2"])
    assert last is not None and set(last["m"]) >= KEYS
    assert 8 <= last["m"]["moe_experts_hit"][0] <= 256
    assert run.summary["per_model"]["chat"]["ok"] > 0
