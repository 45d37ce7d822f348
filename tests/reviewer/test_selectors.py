"""Who may see a run: the home page, the API and the websocket answer alike.

The rule is written once, in ``reviewer.selectors``; these tests pin the case
where copies of it used to disagree (a run started in a session its starter
has since left) for each kind of user.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import pytest
from django.test import Client
from runs_helpers import api

from reviewer import selectors
from reviewer.models import EmulatorRun, ReviewSession, Sweep
from reviewer.review import services as review_services

pytestmark = pytest.mark.django_db

ROLES = ("owner", "reviewer", "former", "outsider", "staff")


@pytest.fixture
def people(django_user_model: Any) -> dict[str, Any]:
    """An owner, a reviewer, a former reviewer, an outsider and a staff member."""
    users = {name: django_user_model.objects.create_user(name, password=f"pw-{name}-123") for name in ROLES}
    users["staff"].is_staff = True
    users["staff"].save()
    return users


@pytest.fixture
def session(people: dict[str, Any]) -> ReviewSession:
    """A session of owner and reviewer; "former" took part and was removed."""
    owner = people["owner"]
    doc = review_services.doc_create(owner=owner, title="Doc", body="The dispatcher batches.")
    toml = resources.files("emulator.scenario.presets").joinpath("doc-as-written.toml").read_text("utf-8")
    fleet = review_services.fleet_config_create(owner=owner, name="fleet", toml=toml, doc=doc)
    return review_services.session_create(
        owner=owner, doc=doc, fleet_config=fleet, reviewers=[people["reviewer"], people["former"]]
    )


def _run(session: ReviewSession | None, starter: Any, scenario: dict[str, Any]) -> EmulatorRun:
    return EmulatorRun.objects.create(session=session, started_by=starter, scenario=scenario, seed=7,
                                      status="done")


def _home_lists(user: Any, run: EmulatorRun) -> bool:
    client = Client()
    client.force_login(user)
    return f"Run {run.pk}" in client.get("/").content.decode()


def _api_shows(user: Any, run: EmulatorRun) -> bool:
    status = api(user).get(f"/api/runs/{run.pk}/").status_code
    assert status in (200, 404)
    listed = run.pk in [r["id"] for r in api(user).get("/api/runs/").json()["results"]]
    assert listed == (status == 200), "the list and the detail disagree"
    return status == 200


@pytest.mark.parametrize("role, sees", [
    ("owner", True), ("reviewer", True), ("former", False), ("outsider", False), ("staff", True),
])
def test_it_shows_a_session_run_on_the_home_page_exactly_when_the_api_does(
    people: dict, session: ReviewSession, role: str, sees: bool
) -> None:
    # Started by the reviewer who then left: the run stays with the session.
    run = _run(session, people["former"], session.fleet_config.scenario)
    review_services.session_update(session=session, reviewers=[people["reviewer"]])
    user = people[role]
    assert _home_lists(user, run) is sees
    assert _api_shows(user, run) is sees


@pytest.mark.parametrize("role, sees", [
    ("owner", True), ("reviewer", False), ("outsider", False), ("staff", True),
])
def test_it_shows_a_run_outside_any_session_to_its_starter_and_staff_alike_everywhere(
    people: dict, session: ReviewSession, role: str, sees: bool
) -> None:
    run = _run(None, people["owner"], session.fleet_config.scenario)
    user = people[role]
    assert _home_lists(user, run) is sees
    assert _api_shows(user, run) is sees


def test_it_applies_the_run_rule_to_sweeps(people: dict, session: ReviewSession) -> None:
    sweep = Sweep.objects.create(session=session, started_by=people["former"], scenario={}, key="traffic.qps",
                                 values=[1], seed=1)
    review_services.session_update(session=session, reviewers=[people["reviewer"]])
    seen = {role: selectors.sweeps_visible_to(people[role]).filter(pk=sweep.pk).exists() for role in ROLES}
    assert seen == {"owner": True, "reviewer": True, "former": False, "outsider": False, "staff": True}


def test_it_shows_nothing_to_an_anonymous_visitor(session: ReviewSession, people: dict) -> None:
    from django.contrib.auth.models import AnonymousUser

    _run(session, people["owner"], session.fleet_config.scenario)
    anonymous = AnonymousUser()
    assert not selectors.runs_visible_to(anonymous).exists()
    assert not selectors.sessions_visible_to(anonymous).exists()
    assert not selectors.docs_visible_to(anonymous).exists()
