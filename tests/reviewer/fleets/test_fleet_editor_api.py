"""POST /api/fleets/check/: the fleet editor's live check, by key path, saving nothing."""

from __future__ import annotations

from importlib import resources

import pytest
from rest_framework.test import APIClient

from reviewer.models import FleetConfig

pytestmark = pytest.mark.django_db

DOC_AS_WRITTEN = resources.files("emulator.scenario.presets").joinpath("doc-as-written.toml").read_text("utf-8")


@pytest.fixture
def api(django_user_model) -> APIClient:
    client = APIClient()
    client.force_authenticate(django_user_model.objects.create_user("editor", password="pw-editor-123"))
    return client


def test_it_gives_a_valid_tomls_json_form_and_keeps_the_text(api) -> None:
    body = api.post("/api/fleets/check/", {"toml": DOC_AS_WRITTEN}, format="json").json()
    assert body["valid"] is True and body["error"] is None
    assert body["toml"] == DOC_AS_WRITTEN
    assert body["scenario"]["dispatcher"]["policy"] == "round_robin"
    assert not FleetConfig.objects.exists()


def test_it_turns_a_valid_object_into_toml_that_checks_the_same(api) -> None:
    scenario = api.post("/api/fleets/check/", {"toml": DOC_AS_WRITTEN}, format="json").json()["scenario"]
    scenario["traffic"]["qps"] = 750
    body = api.post("/api/fleets/check/", {"scenario": scenario}, format="json").json()
    assert body["valid"] and "qps = 750" in body["toml"]
    again = api.post("/api/fleets/check/", {"toml": body["toml"]}, format="json").json()
    assert again["scenario"] == body["scenario"]


@pytest.mark.parametrize(("change", "path"), [
    (lambda s: s["hosts"][0].update(workers=["big@0", "big@7"]), "hosts[0].workers[1]"),
    (lambda s: s["traffic"].update(qps=-5), "traffic.qps"),
    (lambda s: s["dispatcher"].update(policy="fastest"), "dispatcher.policy"),
    (lambda s: s["models"]["small"].update(share="half"), "models.small.share"),
])
def test_it_names_the_key_path_of_a_bad_object(api, change, path) -> None:
    scenario = api.post("/api/fleets/check/", {"toml": DOC_AS_WRITTEN}, format="json").json()["scenario"]
    change(scenario)
    body = api.post("/api/fleets/check/", {"scenario": scenario}, format="json").json()
    assert body["valid"] is False and body["toml"] is None
    assert body["error"]["path"] == path
    assert body["error"]["message"].startswith(path + ":")


def test_it_says_where_a_toml_does_not_parse(api) -> None:
    body = api.post("/api/fleets/check/", {"toml": "[traffic\nqps = 1"}, format="json").json()
    assert body["valid"] is False and body["error"]["path"] == ""
    assert "not valid TOML" in body["error"]["message"] and "line 1" in body["error"]["message"]


def test_it_refuses_a_trace_file_the_server_does_not_replay(api) -> None:
    scenario = api.post("/api/fleets/check/", {"toml": DOC_AS_WRITTEN}, format="json").json()["scenario"]
    scenario["traffic"]["trace"] = "/etc/passwd"
    body = api.post("/api/fleets/check/", {"scenario": scenario}, format="json").json()
    assert body["error"]["path"] == "traffic.trace"


def test_it_asks_for_a_scenario_and_for_a_sign_in(api) -> None:
    response = api.post("/api/fleets/check/", {}, format="json")
    assert response.status_code == 400 and "toml" in str(response.json())
    assert APIClient().post("/api/fleets/check/", {"toml": DOC_AS_WRITTEN}, format="json").status_code in (401, 403)


def test_form_edits_change_the_toml_in_place_and_keep_its_comments(api) -> None:
    import tomllib

    commented = DOC_AS_WRITTEN.replace("[traffic]", "[traffic]  # as the doc says", 1)
    edits = [{"op": "set", "path": "traffic.qps", "value": 1200},
             {"op": "set", "path": "hardware.gpu", "value": "A100-80GB"},
             {"op": "unset", "path": "dispatcher.policy"},
             {"op": "add", "path": "faults", "values": {"at_s": 30, "kill": "host:0"}}]
    body = api.post("/api/fleets/check/", {"toml": commented, "edits": edits}, format="json").json()
    assert body["valid"] is True, body["error"]
    assert "[traffic]  # as the doc says" in body["toml"]
    assert all(line in body["toml"] for line in commented.splitlines() if line.lstrip().startswith("#"))
    data = tomllib.loads(body["toml"])
    assert data["traffic"]["qps"] == 1200 and data["hardware"]["gpu"] == "A100-80GB"
    assert "policy" not in data["dispatcher"] and data["faults"][-1] == {"at_s": 30, "kill": "host:0"}
    fields = {f["path"]: f for g in body["form"] for f in g.get("fields", [])}
    assert fields["traffic.qps"]["value"] == 1200 and fields["dispatcher.policy"]["used"] == "round_robin"


def test_an_edit_the_emulator_refuses_comes_back_edited_with_the_error_at_its_key(api) -> None:
    body = api.post("/api/fleets/check/", {"toml": DOC_AS_WRITTEN, "edits": [
        {"op": "set", "path": "slo.tpot_s", "value": -1}]}, format="json").json()
    assert body["valid"] is False and body["error"]["path"] == "slo.tpot_s"
    assert body["error"]["message"].startswith("slo.tpot_s:")
    assert "tpot_s = -1" in body["toml"]  # nothing typed is lost
    refused = api.post("/api/fleets/check/", {"toml": DOC_AS_WRITTEN, "edits": [
        {"op": "remove", "path": "hosts[7]"}]}, format="json")
    assert refused.status_code == 400 and "hosts[7]" in str(refused.json())
