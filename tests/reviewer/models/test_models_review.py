"""Review data models and services: revisions, versions, re-anchoring on revise, live events."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from review_data_fixtures import *  # noqa: F403
from review_data_fixtures import SMALL_SCENARIO

from reviewer import selectors
from reviewer.errors import Invalid
from reviewer.models import DocRevision, Finding, FleetConfig, FleetConfigVersion
from reviewer.review import services

pytestmark = pytest.mark.django_db

QUOTE = "One active dispatcher per model with a hot standby holds an in-memory queue."
GONE = "The queue sends each batch to the next worker in round-robin order."


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str, dict[str, Any]]]:
    """Live events the services publish (recorded instead of sent)."""
    sent: list[tuple[int, str, dict[str, Any]]] = []
    monkeypatch.setattr(
        "reviewer.realtime.groups.session_event", lambda sid, event, data: sent.append((sid, event, data))
    )
    return sent


def _finding(session: Any, author: Any, quote: str, **extra: Any) -> Finding:
    return services.finding_create(
        session=session, author=author, review_pass="trace", title=quote[:30], anchor_exact=quote, **extra
    )


def test_it_makes_a_revision_for_every_edit_and_none_for_a_no_op(review_doc, people):
    owner = people["owner"]
    services.doc_revise(doc=review_doc, author=owner, body=review_doc.body + "\nMore.\n")
    services.doc_revise(doc=review_doc, author=owner, title="Chat serving v2")
    services.doc_revise(doc=review_doc, author=owner, title="Chat serving v2")
    numbers = list(DocRevision.objects.filter(doc=review_doc).values_list("number", "title"))
    assert numbers == [(1, "Chat serving"), (2, "Chat serving"), (3, "Chat serving v2")]
    review_doc.refresh_from_db()
    assert review_doc.title == "Chat serving v2" and review_doc.body.endswith("More.\n")


def test_a_revise_from_an_old_revision_is_a_conflict(review_doc, people):
    services.doc_revise(doc=review_doc, author=people["owner"], body="new", base_revision=1)
    with pytest.raises(services.Conflict) as info:
        services.doc_revise(doc=review_doc, author=people["owner"], body="newer", base_revision=1)
    assert info.value.current == 2


def test_revising_moves_open_findings_and_orphans_unplaceable_ones(open_review, people, events):
    reviewer = people["reviewer"]
    kept = _finding(open_review, reviewer, QUOTE)
    lost = _finding(open_review, reviewer, GONE)
    resolved = _finding(open_review, reviewer, "Keep latency low.", status="resolved")
    doc = open_review.doc
    new_body = ("## Summary\nTwo models, one gateway.\n\n" + doc.body).replace(GONE + "\n", "")
    events.clear()
    result = services.doc_revise(doc=doc, author=people["owner"], body=new_body)

    assert [f.pk for f in result.moved] == [kept.pk]
    assert [f.pk for f in result.orphaned] == [lost.pk]
    kept.refresh_from_db()
    lost.refresh_from_db()
    resolved.refresh_from_db()
    assert kept.revision == result.revision and not kept.orphaned
    assert new_body[kept.anchor_start : kept.anchor_end] == QUOTE
    assert kept.version == 2
    # The orphan keeps its anchor on the revision it was made on.
    assert lost.orphaned and lost.revision.number == 1 and lost.anchor_exact == GONE
    assert resolved.revision.number == 1
    assert list(selectors.orphaned_findings(doc)) == [lost]
    assert sorted((e, d["finding"]["id"]) for _, e, d in events) == sorted(
        [("finding.updated", kept.pk), ("finding.updated", lost.pk)]
    )


def test_an_orphan_is_placed_again_when_its_passage_comes_back(open_review, people):
    lost = _finding(open_review, people["reviewer"], GONE)
    doc = open_review.doc
    original = doc.body
    services.doc_revise(doc=doc, author=people["owner"], body=original.replace(GONE, "Something else."))
    lost.refresh_from_db()
    assert lost.orphaned
    result = services.doc_revise(doc=doc, author=people["owner"], body=original)
    lost.refresh_from_db()
    assert not lost.orphaned and lost.revision == result.revision


def test_fleet_configs_validate_on_every_save_with_key_path_errors(people):
    config = services.fleet_config_create(owner=people["owner"], name="f", toml=SMALL_SCENARIO)
    assert config.scenario["traffic"]["qps"] == 40
    config.toml = SMALL_SCENARIO.replace('workers = ["small@0", "small@2"]', 'workers = ["small@9"]')
    with pytest.raises(ValidationError) as info:
        config.save()
    assert "hosts[0].workers[0]" in info.value.message_dict["toml"][0]
    with pytest.raises(ValidationError) as info:
        FleetConfigVersion(config=config, number=9, toml="not = [toml").save()
    assert "not valid TOML" in info.value.message_dict["toml"][0]


def test_a_changed_scenario_makes_a_new_version(people):
    owner = people["owner"]
    config = services.fleet_config_create(owner=owner, name="f", toml=SMALL_SCENARIO)
    services.fleet_config_save(config=config, author=owner, name="renamed")
    services.fleet_config_save(config=config, author=owner, toml=SMALL_SCENARIO.replace("qps = 40\n", "qps = 80\n", 1))
    versions = list(config.versions.order_by("number").values_list("number", flat=True))
    assert versions == [1, 2]
    config.refresh_from_db()
    assert config.name == "renamed" and config.scenario["traffic"]["qps"] == 80
    assert FleetConfig.objects.get(pk=config.pk).latest_version().scenario["traffic"]["qps"] == 80


def test_an_empty_or_non_toml_scenario_is_refused_with_a_fix(people):
    with pytest.raises(ValidationError, match="empty"):
        services.validate_scenario_toml("   ")
    with pytest.raises(ValidationError, match="not valid TOML"):
        services.validate_scenario_toml("doc-as-written")


def test_finding_events_carry_the_api_representation(open_review, people, events):
    finding = _finding(open_review, people["reviewer"], QUOTE)
    services.finding_update(finding=finding, version=1, title="Changed")
    services.finding_delete(finding=finding)
    assert [e for _, e, _ in events] == ["finding.created", "finding.updated", "finding.deleted"]
    assert events[0][2]["finding"]["pass"] == "trace"
    assert events[1][2]["finding"]["title"] == "Changed" and events[1][2]["finding"]["version"] == 2
    assert events[2][2] == {"finding": {"id": finding.pk, "session": open_review.pk}}
    assert all(sid == open_review.pk for sid, _, _ in events)


def test_a_pass_change_is_announced(open_review, events):
    services.session_update(session=open_review, current_pass="numbers")
    services.session_update(session=open_review, current_pass="numbers")
    assert events == [(open_review.pk, "pass.changed", {"pass": "numbers"})]


def test_bringing_everyone_is_announced_even_on_the_current_pass_and_only_by_the_owner(open_review, people, events):
    from reviewer.errors import Forbidden, Invalid

    services.session_bring_everyone(session=open_review, user=people["owner"], review_pass=open_review.current_pass)
    assert events == [(open_review.pk, "pass.brought", {"pass": open_review.current_pass, "by": "owner"})]
    with pytest.raises(Forbidden):
        services.session_bring_everyone(session=open_review, user=people["reviewer"], review_pass="trace")
    with pytest.raises(Invalid):
        services.session_bring_everyone(session=open_review, user=people["owner"], review_pass="nowhere")
    open_review.refresh_from_db()
    assert len(events) == 1 and open_review.current_pass != "trace"


def test_events_are_sent_only_after_commit(open_review, people, monkeypatch, django_capture_on_commit_callbacks):
    sent: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr("reviewer.realtime.groups.publish_now", lambda group, message: sent.append((group, message)))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        _finding(open_review, people["reviewer"], QUOTE)
    assert sent == [] and len(callbacks) == 1
    callbacks[0]()
    assert sent[0][0] == f"session.{open_review.pk}"
    assert sent[0][1]["event"] == "finding.created"


def test_a_stale_update_is_refused_and_changes_nothing(open_review, people):
    finding = _finding(open_review, people["reviewer"], QUOTE)
    services.finding_update(finding=finding, version=1, title="one")
    with pytest.raises(services.Conflict) as info:
        services.finding_update(finding=finding, version=1, title="two")
    assert info.value.current == 2
    finding.refresh_from_db()
    assert finding.title == "one"


def test_reorder_can_pull_a_finding_into_a_bucket(open_review, people):
    reviewer = people["reviewer"]
    a = _finding(open_review, reviewer, QUOTE, severity="fix_now")
    b = _finding(open_review, reviewer, QUOTE, severity="mention")
    services.findings_reorder(session=open_review, severity="fix_now", ordered_ids=[b.pk, a.pk])
    a.refresh_from_db()
    b.refresh_from_db()
    assert (b.severity, b.position, a.position) == ("fix_now", 0, 1)
    with pytest.raises(Invalid, match="listed twice") as info:
        services.findings_reorder(session=open_review, severity="fix_now", ordered_ids=[a.pk, a.pk])
    assert info.value.field == "ids"


def test_session_participants(open_review, people):
    assert open_review.is_participant(people["owner"])
    assert open_review.is_participant(people["reviewer"])
    assert not open_review.is_participant(people["outsider"])
