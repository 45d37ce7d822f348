"""/api/fleets/: fleet configs validated by the emulator, versions, permissions."""

from __future__ import annotations

import pytest
from review_data_fixtures import *  # noqa: F403
from review_data_fixtures import SMALL_SCENARIO

pytestmark = pytest.mark.django_db


def test_it_creates_a_config_from_toml(api_as, review_doc):
    response = api_as("owner").post(
        "/api/fleets/", {"name": "small", "toml": SMALL_SCENARIO, "doc": review_doc.pk}, format="json"
    )
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["version"] == 1 and data["scenario"]["models"]["small"]["worker_units"] == 2
    assert data["doc"] == review_doc.pk and data["owner"] == "owner"


def test_it_creates_a_config_from_a_scenario_object(api_as, review_fleet):
    scenario = api_as("owner").get(f"/api/fleets/{review_fleet.pk}/").json()["scenario"]
    scenario["traffic"]["qps"] = 55
    response = api_as("owner").post("/api/fleets/", {"name": "json", "scenario": scenario}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["scenario"]["traffic"]["qps"] == 55
    assert "qps = 55" in response.json()["toml"]


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        (SMALL_SCENARIO.replace('workers = ["small@0", "small@2"]', 'workers = ["small@9"]'), "hosts[0].workers[0]"),
        (SMALL_SCENARIO.replace('policy = "pull"', 'policy = "random"'), "dispatcher.policy"),
        (SMALL_SCENARIO.replace("qps = 40\n", 'qps = "lots"\n', 1), "traffic.qps"),
        ("name = [unclosed", "not valid TOML"),
        ("", "toml"),
    ],
)
def test_bad_scenarios_get_400_with_the_emulators_key_path(api_as, toml, message):
    response = api_as("owner").post("/api/fleets/", {"name": "bad", "toml": toml}, format="json")
    assert response.status_code == 400
    errors = response.json()
    assert "toml" in errors and message in " ".join(errors["toml"]) + " toml", errors


def test_a_bad_scenario_object_gets_400_on_the_scenario_field(api_as):
    response = api_as("owner").post("/api/fleets/", {"name": "bad", "scenario": {"traffic": 3}}, format="json")
    assert response.status_code == 400 and "scenario" in response.json()
    response = api_as("owner").post("/api/fleets/", {"name": "bad", "scenario": [1, 2]}, format="json")
    assert response.status_code == 400 and "scenario" in response.json()


def test_editing_the_scenario_makes_a_new_version(api_as, review_fleet):
    client = api_as("owner")
    url = f"/api/fleets/{review_fleet.pk}/"
    assert client.patch(url, {"name": "renamed"}, format="json").json()["version"] == 1
    changed = client.patch(url, {"toml": SMALL_SCENARIO.replace("qps = 40\n", "qps = 20\n", 1)}, format="json")
    assert changed.status_code == 200 and changed.json()["version"] == 2
    versions = client.get(url + "versions/").json()["results"]
    assert [(v["number"], v["scenario"]["traffic"]["qps"]) for v in versions] == [(1, 40), (2, 20)]


@pytest.mark.parametrize(("who", "read", "write"), [("owner", 200, 200), ("staff", 200, 200),
                                                     ("reviewer", 200, 403), ("outsider", 404, 404),
                                                     (None, 401, 401)])
def test_who_may_read_and_change_a_config(api_as, open_review, who, read, write):
    url = f"/api/fleets/{open_review.fleet_config_id}/"
    assert api_as(who).get(url).status_code == read
    assert api_as(who).patch(url, {"name": "x"}, format="json").status_code == write


def test_a_config_used_by_a_session_cannot_be_deleted(api_as, open_review):
    assert api_as("owner").delete(f"/api/fleets/{open_review.fleet_config_id}/").status_code == 409


def test_the_list_gives_each_configs_latest_version_in_a_fixed_number_of_queries(api_as, review_fleet, people):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from reviewer.review import services

    services.fleet_config_save(config=review_fleet, author=people["owner"],
                               toml=SMALL_SCENARIO.replace("seed = 7", "seed = 8"))
    latest = review_fleet.latest_version()
    assert latest.number == 2

    def listed() -> tuple[int, tuple]:
        with CaptureQueriesContext(connection) as ctx:
            data = api_as("owner").get("/api/fleets/").json()["results"]
        mine = next(f for f in data if f["id"] == review_fleet.pk)
        return len(ctx.captured_queries), (mine["version"], mine["version_id"])

    queries, versions = listed()
    assert versions == (2, latest.pk)
    for i in range(3):
        services.fleet_config_create(owner=people["owner"], name=f"more {i}", toml=SMALL_SCENARIO)
    assert listed() == (queries, versions)


def _big_run_toml() -> str:
    # 5 million QPS for 6 s: 30 million requests, over the emulator's default budget.
    return SMALL_SCENARIO.replace("qps = 40\n", "qps = 5000000\n", 1)


def test_it_uses_the_run_budget_setting_when_saving_as_the_runs_do(api_as, review_doc, settings):
    from emulator import DEFAULT_REQUEST_BUDGET

    text = _big_run_toml()
    assert "qps = 5000000" in text
    settings.RUN_REQUEST_BUDGET = 40_000_000  # above the emulator's default
    assert settings.RUN_REQUEST_BUDGET > DEFAULT_REQUEST_BUDGET
    saved = api_as("owner").post("/api/fleets/", {"name": "long", "toml": text, "doc": review_doc.pk}, format="json")
    assert saved.status_code == 201, saved.content
    run = api_as("owner").post("/api/runs/", {"scenario": text, "speed": "max"}, format="json")
    assert run.status_code == 202, run.content


def test_it_refuses_to_save_a_config_no_run_could_start(api_as, review_doc, settings):
    settings.RUN_REQUEST_BUDGET = 100  # the config simulates about 240 requests
    saved = api_as("owner").post(
        "/api/fleets/", {"name": "small", "toml": SMALL_SCENARIO, "doc": review_doc.pk}, format="json"
    )
    assert saved.status_code == 400
    assert "run budget of 100" in saved.content.decode()


def test_it_refuses_a_version_past_the_owners_fleet_versions_quota_naming_the_setting(
        api_as, review_fleet, settings):
    from reviewer.models import FleetConfig, FleetConfigVersion

    settings.USER_FLEET_VERSIONS_MAX = 3
    client = api_as("owner")
    url = f"/api/fleets/{review_fleet.pk}/"
    assert client.patch(url, {"toml": SMALL_SCENARIO.replace("qps = 40\n", "qps = 20\n", 1)},
                        format="json").json()["version"] == 2
    assert client.post("/api/fleets/", {"name": "third", "toml": SMALL_SCENARIO}, format="json").status_code == 201
    configs, versions = FleetConfig.objects.count(), FleetConfigVersion.objects.count()
    edit = client.patch(url, {"toml": SMALL_SCENARIO.replace("qps = 40\n", "qps = 10\n", 1)}, format="json")
    create = client.post("/api/fleets/", {"name": "fourth", "toml": SMALL_SCENARIO}, format="json")
    for response in (edit, create):
        assert response.status_code == 429, response.content
        assert response.json()["setting"] == "USER_FLEET_VERSIONS_MAX"
        assert "USER_FLEET_VERSIONS_MAX" in response.json()["detail"]
    # Nothing saved: no config, no version, the config's scenario as it was.
    assert (FleetConfig.objects.count(), FleetConfigVersion.objects.count()) == (configs, versions)
    assert client.get(url).json()["scenario"]["traffic"]["qps"] == 20
    # A rename is no new version and still goes through.
    assert client.patch(url, {"name": "renamed"}, format="json").status_code == 200
