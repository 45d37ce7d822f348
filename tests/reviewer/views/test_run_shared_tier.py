"""A KV tier shared by a pool (``shared = true``) on the run page and in the fleet
editor: the editor shows the tier's ``shared`` flag and lets it be set, the run's
totals name the workers sharing the store, and a fleet config with a shared tier is
saved and run from the web."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from review_data_fixtures import *  # noqa: F403
from runs_helpers import play_saved_fleet

from reviewer.fleets.form_catalog import form_groups
from reviewer.views.mechanism_charts import MECHANISM_TOTALS

ROOT = Path(__file__).resolve().parents[3]
PRESETS = ROOT / "emulator" / "scenario" / "presets"
SHARED = PRESETS / "mooncake-shared-pool.toml"
PRIVATE = PRESETS / "mooncake-dram-tier.toml"


def test_the_editor_shows_the_shared_flag_and_titles_a_shared_tier() -> None:
    from emulator.scenario import load_scenario

    spec = load_scenario(SHARED.read_text("utf-8"))
    [tiers] = [g for g in form_groups(spec.to_dict(), spec) if g["key"] == "kv_tiers"]
    [item] = tiers["items"]
    fields = {f["name"]: f for f in item["fields"]}
    assert fields["shared"]["value"] is True and fields["shared"]["path"] == "worker.kv_tiers[0].shared"
    assert item["title"] == "Tier 0 (shared by the pool)"
    private = load_scenario(PRIVATE.read_text("utf-8"))
    [tiers] = [g for g in form_groups(private.to_dict(), private) if g["key"] == "kv_tiers"]
    assert tiers["items"][0]["title"] == "Tier 0"


def test_the_run_totals_name_the_workers_sharing_the_store() -> None:
    [total] = [t for t in MECHANISM_TOTALS if t["path"] == ["kv_tiers", "remote", "shared_by"]]
    assert total["mechanism"] == "KV tiers" and total["unit"] == "workers"


@pytest.mark.django_db
def test_setting_shared_in_the_form_checks_and_a_private_tier_below_it_is_refused(api_as: Any) -> None:
    owner = api_as("owner")
    text = PRIVATE.read_text("utf-8")
    body = owner.post("/api/fleets/check/", {"toml": text, "edits": [
        {"op": "set", "path": "worker.kv_tiers[0].shared", "value": True}]}, format="json").json()
    assert body["valid"] is True, body
    assert body["scenario"]["worker"]["kv_tiers"][0]["shared"] is True
    refused = owner.post("/api/fleets/check/", {"toml": text, "edits": [
        {"op": "set", "path": "worker.kv_tiers[0].shared", "value": True},
        {"op": "add", "path": "worker.kv_tiers", "values": {"name": "ssd", "capacity_gb": 2000}}]},
        format="json").json()
    assert refused["valid"] is False
    assert refused["error"]["path"] == "worker.kv_tiers[1].shared"


@pytest.mark.django_db
@pytest.mark.usefixtures("redis_url")
def test_a_fleet_config_with_a_shared_tier_saves_and_runs_from_the_session(
    api_as: Any, review_doc: Any, people: dict
) -> None:
    text = SHARED.read_text("utf-8")
    assert "shared = true" in text
    owner = api_as("owner")
    saved = owner.post("/api/fleets/", {"name": "shared store", "toml": text, "doc": review_doc.pk}, format="json")
    assert saved.status_code == 201, saved.content
    assert saved.json()["scenario"]["worker"]["kv_tiers"][0]["shared"] is True
    run, last = play_saved_fleet(owner, people["owner"], review_doc, saved.json()["id"], ["duration_s=60"])
    assert last is not None and "tier_hit_rate" in last["m"]
    remote = run.summary["per_model"]["chat"]["kv_tiers"]["remote"]
    assert remote["hit_tokens"] > 0 and remote["load_s"] > 0
    assert remote["shared_by"] == 8  # the prefill pool's store and the decode pool's, four workers each
