"""Session affinity in the fleet editor and on the run page: the dispatcher's
``session_affinity`` and ``session_ttl_s`` are form fields, a bad TTL is refused at
its key, and a fleet config with affinity is saved and run from the web, its totals
counting the requests kept on their session's worker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from review_data_fixtures import *  # noqa: F403
from runs_helpers import play_saved_fleet

from reviewer.fleets.form_catalog import form_groups
from reviewer.views.mechanism_charts import MECHANISM_TOTALS

ROOT = Path(__file__).resolve().parents[3]
PRESET = ROOT / "emulator" / "scenario" / "presets" / "prefix-router-estimated.toml"
AFFINITY = PRESET.read_text("utf-8").replace(
    'policy = "prefix_aware"\nprefix_index = "estimated"', 'policy = "least_loaded"\nsession_affinity = true\n#'
).replace("prefix_index_capacity", "# prefix_index_capacity").replace("prefix_index_ttl_s", "# prefix_index_ttl_s")


def test_the_editor_offers_the_session_keys() -> None:
    from emulator.scenario import load_scenario

    spec = load_scenario(AFFINITY)
    assert spec.dispatcher.session_affinity and spec.dispatcher.policy == "least_loaded"
    [dispatcher] = [g for g in form_groups(spec.to_dict(), spec) if g["key"] == "dispatcher"]
    fields = {f["path"]: f for f in dispatcher["fields"]}
    assert fields["dispatcher.session_affinity"]["value"] is True
    assert fields["dispatcher.session_affinity"]["label"].startswith("session affinity")
    assert fields["dispatcher.session_ttl_s"]["unit"] == "s an idle session is remembered"


def test_the_run_totals_count_the_sessions() -> None:
    totals = [t for t in MECHANISM_TOTALS if t["mechanism"] == "Prefix caching" and t["path"][0] == "sessions"]
    assert [t["path"][1] for t in totals] == ["kept", "pinned", "repinned"]
    assert all(t.get("optional") for t in totals)  # a run without affinity has none of them


@pytest.mark.django_db
def test_form_edits_of_the_session_keys_check_and_a_bad_ttl_names_its_key(api_as: Any) -> None:
    owner = api_as("owner")
    body = owner.post("/api/fleets/check/", {"toml": AFFINITY, "edits": [
        {"op": "set", "path": "dispatcher.session_ttl_s", "value": 30}]}, format="json").json()
    assert body["valid"] is True, body
    assert body["scenario"]["dispatcher"]["session_ttl_s"] == 30
    refused = owner.post("/api/fleets/check/", {"toml": AFFINITY, "edits": [
        {"op": "set", "path": "dispatcher.session_ttl_s", "value": -1}]}, format="json").json()
    assert refused["valid"] is False and refused["error"]["path"] == "dispatcher.session_ttl_s"


@pytest.mark.django_db
@pytest.mark.usefixtures("redis_url")
def test_a_fleet_config_with_affinity_saves_and_runs_from_the_session(
    api_as: Any, review_doc: Any, people: dict
) -> None:
    owner = api_as("owner")
    saved = owner.post("/api/fleets/", {"name": "sticky", "toml": AFFINITY, "doc": review_doc.pk}, format="json")
    assert saved.status_code == 201, saved.content
    assert saved.json()["scenario"]["dispatcher"]["session_affinity"] is True
    run, last = play_saved_fleet(owner, people["owner"], review_doc, saved.json()["id"], ["duration_s=30"])
    assert last is not None and "prefix_hit_rate" in last["m"]
    sessions = run.summary["per_model"]["chat"]["sessions"]
    assert sessions["kept"] > sessions["pinned"] > 0 and sessions["repinned"] == 0
