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
    ({"worker.batch_s": {"source": "measured"}}, "provenance.worker.batch_s", "what measured it"),
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
    # The gap at the doc's peak for the layout as placed (2 big / 2 big / 5 small at 50/50:
    # 106.7 QPS), with the best mix of these hosts beside it.
    assert headline["gap at the peak"] == "93.8x" and headline["latency floor (a minimum)"] == "1.5 s"
    assert headline["utilisation at average traffic"] == "938%"  # named as utilisation, not a gap
    assert headline["after the worst host loss"] == "0 QPS"  # host 2 carries every small worker
    gap = next(f for f in report["headline"] if f["slot"] == "gap at the peak")
    assert {b["key"] for b in gap["beside"]} >= {"capacity_at_split_qps", "best_mix_qps"}
    assert gap["sources"]["doc"] == ["traffic.peak_qps"] and gap["sources"]["assumed"] == ["worker.batch_s"]
    assert report["provenance"]["assumed"] == [{"path": "worker.batch_s", "value": 1.5}]
    assert report["findings"] and all(f["assumed"] for f in report["findings"])
    assert all(f["body"].endswith("worker.batch_s = 1.5.") for f in report["findings"])


def test_each_finding_cites_its_figures_and_whether_they_are_from_the_doc_or_assumed(owner, doc) -> None:
    from django.test import Client

    marks = {"traffic.peak_qps": MARKS["traffic.peak_qps"], "hosts": {"source": "doc", "quote": "A batch takes"}}
    config = services.fleet_config_create(owner=owner, name="f", toml=TOML, doc=doc, provenance=marks)
    session = services.session_create(owner=owner, doc=doc, fleet_config=config)
    client = Client()
    client.force_login(owner)
    report = client.get(f"/sessions/{session.pk}/numbers.json").json()
    findings = {f["title"]: f for f in report["findings"]}
    gap = findings["Capacity is about 93.8x short of the peak goal"]
    cited = {c["ref"]: c for c in gap["cites"]}
    assert cited["fleet.gap_peak"]["display"] == "93.8x"
    assert cited["fleet.whole_workers_peak"]["display"] == "750 workers"
    assert gap["sources"]["doc"] == ["traffic.peak_qps", "hosts"]
    # Nothing the gap stands on is assumed: the batch time is in the config, unmarked.
    assert not gap["assumed"] and "worker.batch_s" in gap["sources"]["unmarked"]
    down = findings["Losing host:2 takes small down"]
    assert {c["ref"] for c in down["cites"]} == {"small.capacity_one_host_lost_qps", "small.workers_placed"}
    assert next(c for c in down["cites"] if c["ref"] == "small.workers_placed")["source"] == "doc"


def test_a_figure_on_the_emulators_defaults_says_it_rests_on_an_assumption(owner, doc) -> None:
    from django.test import Client

    # A new design on the roofline that states no efficiencies: mbu and mfu stand at the
    # emulator's defaults, and every figure of the step model rests on them.
    toml = resources.files("emulator.scenario.presets").joinpath("roofline-70b-h100.toml").read_text("utf-8")
    toml = "\n".join(line for line in toml.splitlines() if not line.startswith(("mbu", "mfu")))
    config = services.fleet_config_create(owner=owner, name="f", toml=toml, doc=doc)
    session = services.session_create(owner=owner, doc=doc, fleet_config=config)
    client = Client()
    client.force_login(owner)
    report = client.get(f"/sessions/{session.pk}/numbers.json").json()
    assert report["input_sources"]["worker.mbu"] == "default"
    floor = next(f for f in report["figures"] if f["key"] == "tpot_floor_s")
    assert floor["source"] == "assumed" and "worker.mbu" in floor["sources"]["default"]
    assert "worker.mbu = 1" in report["assumed_note"] and "defaults" in report["assumed_note"]
    tpot = next(f for f in report["headline"] if f["key"] == "tpot_floor_s")
    assert tpot["source"] == "assumed"


def test_every_key_the_emulator_reads_can_be_marked_even_at_its_default(owner, doc) -> None:
    # worker.mbu, the roofline's coefficients, the SLOs and the gateway are not in the seed's
    # TOML: they stand at the emulator's defaults, and a reviewer can still say where they come from.
    marks = {key: {"source": "assumed"} for key in (
        "worker.mbu", "worker.mfu", "worker.step_base_s", "worker.decode_seq_s", "slo.ttft_s",
        "gateway.instances", "dispatcher.scorers", "models.small.output_tokens", "models.big.worker.max_num_seqs")}
    config = services.fleet_config_create(owner=owner, name="f", toml=TOML, doc=doc, provenance=marks)
    assert set(config.provenance) == set(marks)
    assert {m["path"]: m["value"] for m in split(config.provenance, config.scenario)["assumed"]}["worker.mbu"] == 1.0


def test_accepting_a_doc_figure_writes_the_key_marked_from_the_doc(owner, doc) -> None:
    config = services.fleet_config_create(owner=owner, name="f", toml=TOML, doc=doc, provenance=MARKS)
    client = APIClient()
    client.force_authenticate(owner)
    url = f"/api/fleets/{config.pk}/accept-figure/"
    done = client.post(url, {"key": "worker.batch_s", "value": 1.5, "quote": "A batch takes 1.5 seconds."},
                       format="json")
    assert done.status_code == 200, done.json()
    latest = config.latest_version()
    assert latest.number == 2 and latest.provenance["worker.batch_s"] == {
        "source": "doc", "quote": "A batch takes 1.5 seconds."}
    assert latest.provenance["traffic.peak_qps"] == MARKS["traffic.peak_qps"]  # the other marks stay
    bad = client.post(url, {"key": "worker.batch_s", "value": 2, "quote": "words the doc lacks"}, format="json")
    assert bad.status_code == 400 and "provenance.worker.batch_s" in str(bad.json())
    refused = client.post(url, {"key": "traffic.qps", "value": -5, "quote": "A batch takes 1.5 seconds."},
                          format="json")
    assert refused.status_code == 400 and "traffic.qps" in str(refused.json())
    assert config.versions.count() == 2  # nothing saved by a refusal


def test_a_measured_figure_keeps_what_measured_it_and_counts_as_not_assumed(owner, doc) -> None:
    from reviewer.fleets.provenance import input_sources

    marks = {"worker.batch_s": {"source": "measured", "note": "  benchmark of  r1 on 8 GPUs "}}
    config = services.fleet_config_create(owner=owner, name="f", toml=TOML, doc=doc, provenance=marks)
    assert config.provenance == {"worker.batch_s": {"source": "measured", "note": "benchmark of r1 on 8 GPUs"}}
    assert split(config.provenance, config.scenario)["measured"] == [
        {"path": "worker.batch_s", "value": 1.5, "note": "benchmark of r1 on 8 GPUs"}]
    assert input_sources(config.provenance, config.scenario, ["worker.batch_s"]) == {"worker.batch_s": "measured"}
    assert assumed_note(config.provenance, config.scenario) == ""
