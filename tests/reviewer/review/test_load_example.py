"""The example reviews: loaded by ``manage.py load_example``, idempotently."""

from __future__ import annotations

from importlib import resources

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from reviewer.models import DesignDoc, EmulatorRun, Finding, FleetConfig, ReviewSession
from reviewer.review.example.reviews import FIRST, SECOND

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_user():
    return get_user_model().objects.create_superuser("admin", "", "not-used-here-8d1f")


def first_session() -> ReviewSession:
    return ReviewSession.objects.get(doc__title=FIRST.title)


def second_session() -> ReviewSession:
    return ReviewSession.objects.get(doc__title=SECOND.title)


@pytest.mark.parametrize("session_of", [first_session, second_session])
def test_it_loads_a_doc_a_fleet_config_and_a_session(admin_user, session_of) -> None:
    call_command("load_example", verbosity=0)
    session = session_of()
    assert session.owner == admin_user
    assert session.fleet_config.doc == session.doc
    assert session.doc.revisions.count() == 1
    assert Finding.objects.filter(session=session, orphaned=False).count() >= 3
    assert all(f.anchor_exact in session.doc.body for f in session.findings.all())


def test_its_findings_are_a_published_review_with_a_verdict(admin_user) -> None:
    call_command("load_example", verbosity=0)
    sessions = ReviewSession.objects.all()
    assert sessions.count() == 2  # both examples
    for session in sessions:
        review = session.reviews.get()
        assert review.verdict == "needs_changes" and review.summary
        findings = Finding.objects.filter(session=session)
        assert findings.count() == review.findings_published >= 3
        assert not findings.filter(published_at__isnull=True).exists()
        assert set(findings.values_list("publication", flat=True)) == {review.pk}
        # Each example carries its own review document.
        assert session.opening and session.strengths and session.restatement


def test_it_uses_the_shipped_scenario_file_unchanged(admin_user) -> None:
    call_command("load_example", verbosity=0)
    shipped = resources.files("emulator.scenario.presets").joinpath("doc-as-written.toml").read_text("utf-8")
    config = FleetConfig.objects.get(name=FIRST.fleet_name)
    assert config.toml == shipped
    assert config.versions.get().toml == shipped
    assert config.scenario["traffic"]["qps"] == 1000


def test_it_changes_nothing_when_run_twice(admin_user) -> None:
    call_command("load_example", verbosity=0)
    call_command("load_example", verbosity=0)
    assert DesignDoc.objects.count() == 2
    assert FleetConfig.objects.count() == 2
    assert ReviewSession.objects.count() == 2
    assert first_session().findings.count() == 3
    assert second_session().findings.count() == 5
    assert EmulatorRun.objects.count() == 3


def test_it_loads_the_second_example_beside_a_first_loaded_before_it(admin_user) -> None:
    from reviewer.review import services as review_services

    doc = review_services.doc_create(owner=admin_user, title=FIRST.title, body=FIRST.body())
    call_command("load_example", verbosity=0)
    assert DesignDoc.objects.filter(title=FIRST.title).get() == doc  # left alone
    assert second_session().findings.count() == 5


def test_it_loads_only_the_example_asked_for(admin_user) -> None:
    call_command("load_example", example=["gateway"], verbosity=0)
    assert list(DesignDoc.objects.values_list("title", flat=True)) == [FIRST.title]
    assert not EmulatorRun.objects.exists()
    call_command("load_example", verbosity=0)
    assert DesignDoc.objects.count() == 2


def test_it_states_every_number_of_the_system_under_review(admin_user) -> None:
    call_command("load_example", verbosity=0)
    body = " ".join(DesignDoc.objects.get(title=FIRST.title).body.split())  # Markdown wraps lines
    for figure in ("10,000 requests per second", "1,000 QPS", "about 500 input tokens",
                   "at most 10,000 input tokens", "1.5 seconds", "10 GPU units", "occupies 2 units",
                   "occupies 5", "three GPU hosts of 10 units", "round-robin", "hot standby"):
        assert figure in body, figure


def test_it_refuses_without_an_owner_and_says_how_to_fix_it() -> None:
    with pytest.raises(CommandError, match="createsuperuser"):
        call_command("load_example", verbosity=0)
    assert DesignDoc.objects.count() == 0


def test_the_second_examples_problems_show_in_the_emulators_numbers() -> None:
    from emulator.analysis import numbers
    from emulator.scenario import Scenario
    from reviewer.fleets.scenario_toml import validate_scenario_toml

    report = numbers.compute(Scenario.from_dict(validate_scenario_toml(SECOND.toml()))).to_dict()
    figures = {f["key"]: f["value"] for f in report["figures"] if f["model"] == "chat"}
    assert figures["decode_step_floor_s"] > 0.008  # the TPOT goal is under the floor
    # 57,678 KV tokens over the KV of a running sequence of the replayed trace (its prompt
    # and, weighted by how long it runs, what it generated so far): 46 sequences.
    assert figures["kv_concurrent_seqs"] == 46
    titles = " | ".join(f["title"] for f in report["findings"])
    bodies = " | ".join(f["body"] for f in report["findings"])
    assert "TPOT goal is under" in titles and "capped by the KV cache" in bodies


def test_the_second_examples_runs_show_preemptions_and_round_robins_cost(admin_user) -> None:
    call_command("load_example", verbosity=0)
    session = second_session()
    runs = {tuple(r.overrides): r.summary for r in EmulatorRun.objects.filter(session=session)}
    as_written = runs[()]
    roomy = runs[("hardware.gpu_memory_utilization=0.9",)]
    roomy_least = runs[("dispatcher.policy=least_loaded", "hardware.gpu_memory_utilization=0.9")]
    # Half the memory runs out of KV: requests preempt and queue until TTFT is tens of
    # seconds; with 90 % of memory nothing is preempted and TTFT is sub-second at p50.
    assert as_written["preemptions"] > 100 and roomy["preemptions"] < as_written["preemptions"] / 10
    assert as_written["ttft_s"]["p50"] > 10 and roomy["ttft_s"]["p50"] < 1
    assert as_written["slo_met"] == 0  # no request meets an 8 ms TPOT
    # With room in the cache, routing on load cuts the tail that round-robin's turns make.
    assert roomy_least["ttft_s"]["p99"] < roomy["ttft_s"]["p99"] * 0.75
    with_evidence = session.findings.exclude(evidence_run_id=None)
    assert {f.review_pass for f in with_evidence} == {"numbers", "trace"}
    kv = session.findings.get(anchor_exact="The engine is given half of each GPU's memory.")
    assert f"{as_written['preemptions']:,} times" in kv.body


def test_the_second_examples_doc_states_its_figures_in_its_own_words(admin_user) -> None:
    call_command("load_example", verbosity=0)
    body = " ".join(second_session().doc.body.split())
    for figure in ("Llama-3-70B", "4 H100 SXM GPUs", "tensor parallelism 4", "half of each GPU's memory",
                   "eight times the trace's rate", "under 1 second", "at most 8 ms", "next replica in turn",
                   "four hosts", "Up to 256 sequences", "8,192 tokens"):
        assert figure in body, figure


#: How an example finding's text states a run's figure: the figure's name in the text,
#: the whole-run summary it is read from, and how the text writes it.
CLAIMED_FIGURES = {
    "tpot_p50_s": (r"TPOT p50 (?:is )?([0-9.]+) ms", ("tpot_s", "p50"), lambda v: f"{v * 1000:.1f}"),
    "ttft_p50_s": (r"TTFT p50 (?:is )?([0-9.]+) s", ("ttft_s", "p50"), lambda v: f"{v:.2f}"),
    "ttft_p99_s": (r"TTFT p99 (?:is )?([0-9.]+) s", ("ttft_s", "p99"), lambda v: f"{v:.2f}"),
}


@pytest.mark.parametrize("example", [FIRST, SECOND], ids=lambda e: e.key)
def test_each_example_findings_evidence_is_the_run_and_metric_its_text_quotes(admin_user, example) -> None:
    import re

    call_command("load_example", example=[example.key], verbosity=0)
    session = ReviewSession.objects.get(doc__title=example.title)
    with_evidence = list(session.findings.exclude(evidence_run_id=None))
    assert len(with_evidence) == (3 if example is SECOND else 0)
    for finding in with_evidence:
        assert finding.evidence_metric in CLAIMED_FIGURES, f"{finding.title}: cites {finding.evidence_metric}"
        pattern, (key, stat), written = CLAIMED_FIGURES[finding.evidence_metric]
        claimed = re.search(pattern, finding.body)
        assert claimed, f"{finding.title}: the text quotes no {finding.evidence_metric} figure"
        run = EmulatorRun.objects.get(pk=finding.evidence_run_id)
        # The first figure of that name the text gives is the evidence run's.
        assert claimed.group(1) == written(run.summary[key][stat]), (finding.title, run.overrides)
