"""Provenance of a fleet config's figures: from the doc (with its sentence) or assumed
by the reviewer, kept per key path on each version, shown by the numbers and exports."""

from __future__ import annotations

from importlib import resources

import pytest
from rest_framework.test import APIClient

from reviewer.errors import Invalid
from reviewer.fleets.provenance import assumed_note, input_figures, split
from reviewer.review import services

pytestmark = pytest.mark.django_db

TOML = resources.files("emulator.scenario.presets").joinpath("doc-as-written.toml").read_text("utf-8")
BODY = "# Doc\n\nAt the daily peak we expect 10,000 requests per second.\nA batch takes 1.5 seconds.\n"
MARKS = {
    "traffic.peak_qps": {"source": "doc", "quote": "we expect 10,000 requests per second"},
    "worker.batch_s": {"source": "assumed"},
}


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("owner", password="pw-owner-123")


@pytest.fixture
def doc(owner):
    return services.doc_create(owner=owner, title="Doc", body=BODY)


def test_it_keeps_the_marks_on_the_first_version(owner, doc) -> None:
    config = services.fleet_config_create(owner=owner, name="f", toml=TOML, doc=doc, provenance=MARKS)
    assert config.versions.get().provenance == MARKS
    assert config.provenance == MARKS


@pytest.mark.parametrize(("marks", "path", "words"), [
    ({"traffic.qps": {"source": "doc", "quote": "a sentence the doc does not have"}}, "provenance.traffic.qps",
     "not in the doc"),
    ({"traffic.qps": {"source": "doc"}}, "provenance.traffic.qps", "select them"),
    ({"traffic.rate": {"source": "assumed"}}, "provenance.traffic.rate", "has no key"),
    ({"traffic.qps": {"source": "guessed"}}, "provenance.traffic.qps", '"assumed"'),
    (["traffic.qps"], "provenance", "object"),
])
def test_it_refuses_a_mark_it_cannot_keep_naming_the_key_path(owner, doc, marks, path, words) -> None:
    with pytest.raises(Invalid) as caught:
        services.fleet_config_create(owner=owner, name="f", toml=TOML, doc=doc, provenance=marks)
    assert caught.value.field == path and words in caught.value.message
    assert caught.value.message.startswith(path)


def test_a_change_of_marks_alone_is_a_new_version_and_a_scenario_change_carries_them(owner, doc) -> None:
    config = services.fleet_config_create(owner=owner, name="f", toml=TOML, doc=doc, provenance=MARKS)
    services.fleet_config_save(config=config, author=owner, provenance={"traffic.qps": {"source": "assumed"}})
    assert list(config.versions.values_list("number", flat=True)) == [1, 2]
    services.fleet_config_save(config=config, author=owner, toml=TOML.replace("qps = 1000", "qps = 900", 1))
    latest = config.latest_version()
    assert latest.number == 3 and latest.provenance == {"traffic.qps": {"source": "assumed"}}
    services.fleet_config_save(config=config, author=owner, name="renamed")
    assert config.versions.count() == 3  # nothing about the scenario changed


def test_the_split_and_the_note_name_the_assumed_figures_and_their_values(owner, doc) -> None:
    config = services.fleet_config_create(owner=owner, name="f", toml=TOML, doc=doc, provenance=MARKS)
    groups = split(config.provenance, config.scenario)
    assert groups["doc"] == [{"path": "traffic.peak_qps", "value": 10000.0,
                              "quote": "we expect 10,000 requests per second"}]
    assert groups["assumed"] == [{"path": "worker.batch_s", "value": 1.5}]
    assert assumed_note(config.provenance, config.scenario) == (
        "Built on figures assumed by the reviewer, not taken from the doc: worker.batch_s = 1.5.")
    assert "hosts[0].workers" in input_figures(config.scenario)


def test_the_api_takes_and_gives_the_marks(owner, doc) -> None:
    client = APIClient()
    client.force_authenticate(owner)
    created = client.post("/api/fleets/", {"name": "f", "toml": TOML, "doc": doc.pk, "provenance": MARKS},
                          format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["provenance"] == MARKS
    listed = client.get("/api/fleets/").json()["results"][0]
    assert listed["provenance"] == MARKS
    bad = client.patch(f"/api/fleets/{created.json()['id']}/",
                       {"provenance": {"worker.batch_s": {"source": "doc", "quote": "nowhere"}}}, format="json")
    assert bad.status_code == 400 and "provenance.worker.batch_s" in str(bad.json())


def test_the_numbers_pass_opens_with_its_headline_and_says_what_is_assumed(owner, doc) -> None:
    from django.test import Client

    config = services.fleet_config_create(owner=owner, name="f", toml=TOML, doc=doc, provenance=MARKS)
    session = services.session_create(owner=owner, doc=doc, fleet_config=config)
    client = Client()
    client.force_login(owner)
    report = client.get(f"/sessions/{session.pk}/numbers.json").json()
    headline = {f["slot"]: f["display"] for f in report["headline"]}
    assert 3 <= len(headline) <= 5
    # The gap for the layout as placed (2 big / 2 big / 5 small at 50/50: 106.7 QPS).
    assert headline["gap to the goal"] == "93.8x" and headline["latency floor"] == "1.5 s"
    assert headline["after one host's loss"] == "0 QPS"  # host 2 carries every small worker
    assert report["provenance"]["assumed"] == [{"path": "worker.batch_s", "value": 1.5}]
    assert report["findings"] and all(f["assumed"] for f in report["findings"])
    assert all(f["body"].endswith("worker.batch_s = 1.5.") for f in report["findings"])


def test_suggestions_of_a_config_with_nothing_assumed_carry_no_note(owner, doc) -> None:
    from django.test import Client

    config = services.fleet_config_create(owner=owner, name="f", toml=TOML, doc=doc,
                                          provenance={"traffic.peak_qps": MARKS["traffic.peak_qps"]})
    session = services.session_create(owner=owner, doc=doc, fleet_config=config)
    client = Client()
    client.force_login(owner)
    report = client.get(f"/sessions/{session.pk}/numbers.json").json()
    assert report["assumed_note"] == "" and not any(f["assumed"] for f in report["findings"])


def test_the_headline_names_the_worst_model_whatever_order_the_models_come_in() -> None:
    from reviewer.fleets.numbers_report import headline_figures

    figures = [
        {"key": "capacity_one_host_lost_qps", "model": "small", "value": 0.0, "display": "0 QPS"},
        {"key": "capacity_one_host_lost_qps", "model": "big", "value": 26.7, "display": "26.7 QPS"},
        {"key": "gap_peak", "model": "small", "value": 40.0, "display": "40x"},
        {"key": "gap_peak", "model": "big", "value": 50.0, "display": "50x"},
    ]
    # A scenario stored in PostgreSQL's jsonb comes back with its models in another order.
    for order in (figures, list(reversed(figures))):
        shown = {f["slot"]: (f["model"], f["display"]) for f in headline_figures(order)}
        assert shown["after one host's loss"] == ("small", "0 QPS")  # the least capacity left
        assert shown["gap to the goal"] == ("big", "50x")  # the widest gap
