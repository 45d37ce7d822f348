"""The example review: loaded by ``manage.py load_example``, idempotently."""

from __future__ import annotations

from importlib import resources

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from reviewer.models import DesignDoc, Finding, FleetConfig, ReviewSession

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_user():
    return get_user_model().objects.create_superuser("admin", "", "not-used-here-8d1f")


def test_it_loads_a_doc_a_fleet_config_and_a_session(admin_user) -> None:
    call_command("load_example", verbosity=0)
    session = ReviewSession.objects.get()
    assert session.owner == admin_user
    assert session.fleet_config.doc == session.doc
    assert session.doc.revisions.count() == 1
    assert Finding.objects.filter(session=session, orphaned=False).count() >= 3
    assert all(f.anchor_exact in session.doc.body for f in Finding.objects.all())


def test_its_findings_are_a_published_review_with_a_verdict(admin_user) -> None:
    call_command("load_example", verbosity=0)
    session = ReviewSession.objects.get()
    review = session.reviews.get()
    assert review.verdict == "needs_changes" and review.summary
    findings = Finding.objects.filter(session=session)
    assert findings.count() == review.findings_published >= 3
    assert not findings.filter(published_at__isnull=True).exists()
    assert set(findings.values_list("publication", flat=True)) == {review.pk}


def test_it_uses_the_shipped_scenario_file_unchanged(admin_user) -> None:
    call_command("load_example", verbosity=0)
    shipped = resources.files("emulator.scenario.presets").joinpath("doc-as-written.toml").read_text("utf-8")
    config = FleetConfig.objects.get()
    assert config.toml == shipped
    assert config.versions.get().toml == shipped
    assert config.scenario["traffic"]["qps"] == 1000


def test_it_changes_nothing_when_run_twice(admin_user) -> None:
    call_command("load_example", verbosity=0)
    call_command("load_example", verbosity=0)
    assert DesignDoc.objects.count() == 1
    assert FleetConfig.objects.count() == 1
    assert ReviewSession.objects.count() == 1
    assert Finding.objects.count() == 3


def test_it_states_every_number_of_the_system_under_review(admin_user) -> None:
    call_command("load_example", verbosity=0)
    body = " ".join(DesignDoc.objects.get().body.split())  # Markdown wraps lines
    for figure in ("10,000 requests per second", "1,000 QPS", "about 500 input tokens",
                   "at most 10,000 input tokens", "1.5 seconds", "10 GPU units", "occupies 2 units",
                   "occupies 5", "three GPU hosts of 10 units", "round-robin", "hot standby"):
        assert figure in body, figure


def test_it_refuses_without_an_owner_and_says_how_to_fix_it() -> None:
    with pytest.raises(CommandError, match="createsuperuser"):
        call_command("load_example", verbosity=0)
    assert DesignDoc.objects.count() == 0
