"""Stored scenarios keep their keys in the order written, on every database.

The emulator reads a scenario's models in the order the scenario lists them,
so a scenario stored and read back in another order (PostgreSQL's jsonb
sorts keys shortest first) would play another run than its TOML does.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

from emulator import Engine, Scenario
from emulator.scenario.presets import load_preset
from reviewer.models import EmulatorRun, FleetConfig
from reviewer.review import services as review_services
from reviewer.runs.services import run_start

pytestmark = pytest.mark.django_db


def _short_doc_as_written() -> dict[str, Any]:
    scenario = load_preset("doc-as-written").to_dict()
    # Its models are listed "small", then "big": jsonb would give "big" first.
    assert list(scenario["models"]) == ["small", "big"]
    return {**scenario, "duration_s": 120.0, "faults": []}


def test_a_fleet_config_keeps_the_order_of_its_models(django_user_model: Any) -> None:
    owner = django_user_model.objects.create_user("owner")
    toml = resources.files("emulator.scenario.presets").joinpath("doc-as-written.toml").read_text(encoding="utf-8")
    config = review_services.fleet_config_create(owner=owner, name="Doc", toml=toml)
    stored = FleetConfig.objects.get(pk=config.pk)
    assert list(stored.scenario["models"]) == ["small", "big"]
    assert list(stored.versions.get().scenario["models"]) == ["small", "big"]


def test_a_run_plays_the_scenario_it_was_given(django_user_model: Any) -> None:
    user = django_user_model.objects.create_user("user")
    scenario = _short_doc_as_written()
    run = run_start(user=user, scenario=scenario, seed=1, speed="max")
    stored = EmulatorRun.objects.get(pk=run.pk).scenario
    assert json.dumps(stored) == json.dumps(Scenario.from_dict(scenario, max_requests=None).to_dict())
    # What a run's worker plays, read back from the database, is what the CLI plays.
    played = Engine(Scenario.from_dict(stored, max_requests=None), seed=1).run()
    expected = Engine(Scenario.from_dict(scenario, max_requests=None), seed=1).run()
    assert played.to_dict() | {"wall_s": 0, "events": 0} == expected.to_dict() | {"wall_s": 0, "events": 0}


def test_a_summary_keeps_the_order_of_its_keys(django_user_model: Any) -> None:
    user = django_user_model.objects.create_user("user")
    run = run_start(user=user, scenario=_short_doc_as_written(), seed=1, speed="max")
    summary = {"models": {"small": {"ok": 1}, "big": {"ok": 2}}, "zz": 1, "a": 2}
    EmulatorRun.objects.filter(pk=run.pk).update(summary=summary, layout={"small": [0], "big": [1]})
    stored = EmulatorRun.objects.get(pk=run.pk)
    assert json.dumps(stored.summary) == json.dumps(summary)
    assert list(stored.layout) == ["small", "big"]
