"""The fleet config editor in the browser: form and TOML checked live with the
emulator's key-path errors, saving a new version, and making docs, fleet configs
and reviews, and inviting reviewers, from the pages."""

from __future__ import annotations

from typing import Any

import pytest
from browser_helpers import ExampleReview, LiveServer, assert_fits, screenshot, wait_for_page

pytestmark = [pytest.mark.browser, pytest.mark.slow]

QPS = "#fe-sections .fe-field[data-path='traffic.qps']"


def open_editor(page: Any, url: str) -> None:
    page.goto(url)
    page.wait_for_selector(QPS + " input")
    page.wait_for_selector("#fe-status:has-text('No changes')")


def test_a_form_edit_shows_the_key_path_error_live_and_a_valid_save_makes_a_version(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from reviewer.models import ReviewSession

    fleet = ReviewSession.objects.get(pk=example_review.session_id).fleet_config
    page = signed_in("alice")
    page.goto(dashboard.url + example_review.path)
    page.click("#edit-fleet")
    page.wait_for_url(f"**/fleets/{fleet.pk}/edit?session={example_review.session_id}")
    page.wait_for_selector("#fe-status:has-text('No changes')")
    assert page.is_disabled("#fe-save")

    # A bad value: the emulator's message, by key path, beside the field, as typed.
    page.fill(QPS + " input", "-5")
    page.wait_for_selector(QPS + ".bad .field-error:not([hidden])")
    error = page.inner_text(QPS + " .field-error")
    assert error.startswith("traffic.qps:"), error
    assert page.is_disabled("#fe-save")
    screenshot(page, "fleet-editor-error")

    # A good one: the TOML follows, and saving makes version 2.
    page.fill(QPS + " input", "750")
    page.wait_for_selector("#fe-status:has-text('Valid')")
    assert page.locator(QPS + " .field-error").is_hidden()
    assert "qps = 750" in page.input_value("#fe-toml")
    page.click("#fe-save")
    page.wait_for_selector("#fe-status:has-text('Saved as version 2')")
    fleet.refresh_from_db()
    assert list(fleet.versions.values_list("number", flat=True)) == [1, 2]
    assert fleet.scenario["traffic"]["qps"] == 750

    # The TOML side: an unknown policy is named at the form's policy field too.
    toml = page.input_value("#fe-toml").replace('policy = "round_robin"', 'policy = "fastest"')
    page.fill("#fe-toml", toml)
    policy = "#fe-sections .fe-field[data-path='dispatcher.policy']"
    page.wait_for_selector(policy + ".bad")
    assert "dispatcher.policy" in page.inner_text("#fe-toml-error")
    page.fill("#fe-toml", toml.replace('policy = "fastest"', 'policy = "pull"'))
    page.wait_for_selector("#fe-status:has-text('Valid')")
    assert page.input_value(policy + " select") == "pull"  # the form follows the TOML

    # A host group added in the form, with a layout that does not fit.
    page.click("button:has-text('Add host')")
    workers = "#fe-sections .fe-field[data-path='hosts[2].workers'] input"
    page.fill(workers, "big@0, big@4")
    page.wait_for_selector("#fe-sections .fe-field[data-path='hosts[2].workers'].bad")
    assert "hosts[2].workers" in page.inner_text("#fe-sections .fe-field[data-path='hosts[2].workers'] .field-error")


@pytest.mark.parametrize("width", [800, 1280])
def test_the_editor_fits_the_viewport(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any, width: int
) -> None:
    from reviewer.models import ReviewSession

    fleet = ReviewSession.objects.get(pk=example_review.session_id).fleet_config
    page = signed_in("alice", width=width)
    open_editor(page, f"{dashboard.url}/fleets/{fleet.pk}/edit")
    page.fill(QPS + " input", "not a number")
    page.wait_for_selector(QPS + ".bad")
    assert_fits(page, f"the fleet editor at {width} px")
    screenshot(page, f"fleet-editor-{width}px", full_page=True)
    page.goto(dashboard.url + "/")
    assert_fits(page, f"the home page at {width} px")


def test_a_reviewer_saves_a_copy_rather_than_the_owners_config(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from reviewer.models import FleetConfig, ReviewSession

    fleet = ReviewSession.objects.get(pk=example_review.session_id).fleet_config
    page = signed_in("bob")
    open_editor(page, f"{dashboard.url}/fleets/{fleet.pk}/edit")
    assert page.inner_text("#fe-save") == "Save as my copy"
    page.fill("#fe-name", "bob's variant")
    page.fill(QPS + " input", "400")
    page.wait_for_selector("#fe-status:has-text('Valid')")
    page.click("#fe-save")
    page.wait_for_url(lambda url: "/fleets/" in url and f"/fleets/{fleet.pk}/" not in url)
    copy = FleetConfig.objects.get(name="bob's variant")
    assert copy.owner.username == "bob" and copy.scenario["traffic"]["qps"] == 400
    assert fleet.versions.count() == 1


def test_a_doc_a_fleet_config_and_a_review_are_made_from_the_pages_and_a_reviewer_invited(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any, django_user_model: Any,
    console_errors: list[str],
) -> None:
    from reviewer.models import DesignDoc, FleetConfig, ReviewSession

    django_user_model.objects.create_user("carol", password="not-used-here-5c1")
    page = signed_in("alice")
    # A doc: an empty title is refused with a message, then it is added.
    page.click("#new-doc-form button[type=submit]")
    assert "title" in page.inner_text("#nd-error")
    page.fill("#nd-title", "Embedding service")
    page.fill("#nd-body", "# Embedding service\n\nWe serve **embeddings** on 2 GPUs.")
    page.click("#new-doc-form button[type=submit]")
    page.wait_for_selector("#new-doc option:has-text('Embedding service')", state="attached")
    doc = DesignDoc.objects.get(title="Embedding service")
    assert doc.revisions.count() == 1

    # A fleet config for it, from the starting scenario.
    page.click("#new-fleet-link")
    page.wait_for_selector("#fe-status:has-text('Valid')")
    assert page.is_disabled("#fe-save")  # no name yet
    page.fill("#fe-name", "embeddings as written")
    page.select_option("#fe-doc", label="Embedding service")
    page.click("#fe-save")
    page.wait_for_url("**/fleets/*/edit")
    fleet = FleetConfig.objects.get(name="embeddings as written")
    assert fleet.doc == doc and fleet.versions.count() == 1

    # A review of them, and a reviewer invited by name (a wrong name says so).
    page.goto(dashboard.url + "/")
    page.select_option("#new-doc", label="Embedding service")
    page.select_option("#new-fleet", label="embeddings as written")
    page.fill("#new-title", "Embeddings review")
    page.click("button:has-text('Start review')")
    page.wait_for_selector("h1:has-text('Embeddings review')")
    page.fill("#invite-name", "nobody-here")
    page.click("button:has-text('Invite reviewer')")
    page.wait_for_selector("#invite-error:has-text('username of an active user')")
    # The refused invitation is the one failed request the browser reports.
    assert console_errors == ["alice: Failed to load resource: the server responded with a status of 400 (Bad Request)"]
    console_errors.clear()
    page.fill("#invite-name", "carol")
    page.click("button:has-text('Invite reviewer')")
    page.wait_for_selector("#people:has-text('reviewers: carol')")
    session = ReviewSession.objects.get(title="Embeddings review")
    assert list(session.reviewers.values_list("username", flat=True)) == ["carol"]
    wait_for_page(page, "() => !document.getElementById('invite-error').textContent")


def test_use_this_layout_opens_the_new_config_in_the_editor(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    page = signed_in("alice")
    page.goto(dashboard.url + example_review.path + "#break")
    page.locator(".layout-card").first.locator("button:has-text('Use this layout')").click()
    page.click("#placement-panel a:has-text('Open it in the editor')")
    page.wait_for_selector("#fe-sections .fe-field[data-path='hosts[0].workers'] input")
    assert page.input_value("#fe-sections .fe-field[data-path='hosts[0].workers'] input") == "big@0, small@5, small@7"
    assert page.input_value("#fe-sections .fe-field[data-path='hosts[0].count'] input") == "3"
    assert "1 big + 2 small" in page.input_value("#fe-name")


def open_group(page: Any, key: str) -> None:
    """Open a group of the form with a click, as a reader does, unless it is open."""
    if page.get_attribute(f"details[data-group={key}]", "open") is None:
        page.click(f"details[data-group={key}] > summary")


def select_in(page: Any, root: str, text: str) -> None:
    """Select ``text`` inside the element ``root`` as a reader would leave it selected."""
    found = page.evaluate(
        """([root, text]) => {
            const walker = document.createTreeWalker(document.querySelector(root), NodeFilter.SHOW_TEXT);
            for (let n = walker.nextNode(); n; n = walker.nextNode()) {
                const i = n.nodeValue.indexOf(text);
                if (i < 0) continue;
                const r = document.createRange();
                r.setStart(n, i); r.setEnd(n, i + text.length);
                const s = window.getSelection(); s.removeAllRanges(); s.addRange(r);
                return true;
            }
            return false;
        }""",
        [root, text],
    )
    assert found, f"{text!r} is not in {root}"


def test_figures_are_marked_from_the_doc_or_assumed_and_the_numbers_pass_says_so(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any, console_errors: list[str]
) -> None:
    from reviewer.models import ReviewSession
    from reviewer.review import services

    fleet = ReviewSession.objects.get(pk=example_review.session_id).fleet_config
    # The example marks its doc's figures; start from a config with none marked.
    services.fleet_config_save(config=fleet, author=example_review.alice, provenance={})
    page = signed_in("alice")
    open_editor(page, f"{dashboard.url}/fleets/{fleet.pk}/edit?session={example_review.session_id}")
    qps_source = QPS + " .fe-prov select"
    page.select_option(qps_source, "doc")
    assert page.is_disabled("#fe-save")  # a figure from the doc needs its words
    select_in(page, "#fe-doc-body", "Averaged over a day, traffic is about 1,000 QPS.")
    page.click(QPS + " .fe-prov button:has-text('Use the selected words')")
    assert "1,000 QPS" in page.inner_text(QPS + " .fe-prov .quote")
    page.select_option("#fe-sections .fe-field[data-path='worker.batch_s'] .fe-prov select", "assumed")
    page.click("#fe-save")
    page.wait_for_selector("#fe-status:has-text('Saved as version 3')")
    assert fleet.latest_version().provenance == {
        "traffic.qps": {"source": "doc", "quote": "Averaged over a day, traffic is about 1,000 QPS."},
        "worker.batch_s": {"source": "assumed"},
    }

    # Linked to another doc, the quote is not in it: the save is refused at the field.
    from reviewer.review import services as review_services

    review_services.doc_create(owner=example_review.alice, title="Another doc", body="Nothing about traffic.")
    open_editor(page, f"{dashboard.url}/fleets/{fleet.pk}/edit")
    page.select_option("#fe-doc", label="Another doc")
    page.click("#fe-save")
    page.wait_for_selector(QPS + ".bad .field-error:has-text('provenance.traffic.qps')")
    assert "not in the doc" in page.inner_text("#fe-status")
    assert fleet.versions.count() == 3
    # The refused save is the one failed request the browser reports.
    assert console_errors == ["alice: Failed to load resource: the server responded with a status of 400 (Bad Request)"]
    console_errors.clear()

    page.goto(dashboard.url + example_review.path + "#numbers")
    page.wait_for_selector(".headline-figure")
    assert 3 <= page.locator(".headline-figure").count() <= 5
    slots = page.locator(".headline-figure .slot").all_text_contents()
    assert slots[:2] == ["gap at the peak", "utilisation at average traffic"] and "after the worst host loss" in slots
    assert "traffic.qps" in page.inner_text(".provenance ul.from-doc")
    assert "worker.batch_s = 1.5" in page.inner_text(".provenance ul.assumed")
    assert page.locator(".suggestion[data-assumed=yes]").count() == page.locator(".suggestion").count() > 0
    assert "assumed by the reviewer" in page.inner_text(".suggestion >> nth=0")
    page.click(".provenance .quote-link")
    assert page.evaluate("window.getSelection().toString()") == "Averaged over a day, traffic is about 1,000 QPS."
    screenshot(page, "numbers-headline-provenance")


def test_a_layout_edited_first_is_saved_as_a_new_config_from_the_editor(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from reviewer.models import FleetConfig, ReviewSession

    original = ReviewSession.objects.get(pk=example_review.session_id).fleet_config
    page = signed_in("alice")
    page.goto(dashboard.url + example_review.path + "#break")
    page.locator(".layout-card").first.locator("button:has-text('Edit this layout first')").click()
    page.wait_for_url(f"**/fleets/new?from={original.pk}&session={example_review.session_id}")
    workers = "#fe-sections .fe-field[data-path='hosts[0].workers'] input"
    page.wait_for_selector("#fe-status:has-text('Valid')")
    assert page.input_value(workers) == "big@0, small@5, small@7"
    # The example's name spells its layout out; the new config's name follows the layout.
    assert page.input_value("#fe-name").endswith(": 1 big + 2 small / 1 big + 2 small / 1 big + 2 small)")
    assert 'count = 3\nunits = 10\nworkers = ["big@0", "small@5", "small@7"]' in page.input_value("#fe-toml")
    # Change the layout before saving: a small worker moves up by one unit.
    page.fill(workers, "big@0, small@5, small@8")
    page.wait_for_selector("#fe-status:has-text('Valid')")
    page.click("#fe-save")
    page.wait_for_url("**/fleets/*/edit?session=*")
    made = FleetConfig.objects.exclude(pk=original.pk).get()
    assert made.scenario["hosts"] == [{"count": 3, "units": 10, "workers": ["big@0", "small@5", "small@8"]}]
    assert made.doc_id == original.doc_id and made.versions.count() == 1
    assert original.versions.count() == 1  # the session's config is left as it was


def test_a_new_config_shows_its_doc_at_once_and_its_form_sets_every_key_group_keeping_comments(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    import tomllib

    from reviewer.models import FleetConfig, ReviewSession

    doc = ReviewSession.objects.get(pk=example_review.session_id).doc
    page = signed_in("alice")
    page.goto(dashboard.url + "/fleets/new")
    page.wait_for_selector("#fe-status:has-text('Valid')")
    assert page.locator("#fe-doc-body").count() == 0
    # Choosing the doc shows it beside the form at once, before any save.
    page.select_option("#fe-doc", label=doc.title)
    page.wait_for_selector("#fe-doc-body h1, #fe-doc-body p")
    # Every key group the emulator has is in the form.
    groups = page.locator("#fe-sections details.fe-group > summary").all_inner_texts()
    for title in ("Hardware", "Model architecture", "Service-level objectives", "Efficiencies", "Step model",
                  "Pools and disaggregation", "Prefix caching", "Autoscaler"):
        assert any(g.startswith(title) for g in groups), (title, groups)
    field = "#fe-sections .fe-field[data-path='{}']"
    # A group left at the emulator's values opens on a click and shows them, with units.
    open_group(page, "hardware")
    page.select_option(field.format("hardware.gpu") + " select", "A100-80GB")
    page.wait_for_selector("#fe-status:has-text('Valid')")
    toml = page.input_value("#fe-toml")
    assert tomllib.loads(toml)["hardware"]["gpu"] == "A100-80GB"
    assert toml.startswith("# A chat model served with continuous")  # the comments stay
    assert "qps = 40                  # Poisson arrivals" in toml
    # A bad value: the emulator's message beside the field, naming the key.
    tpot = field.format("slo.tpot_s")
    assert "(s)" in page.inner_text(tpot + " label")
    page.fill(tpot + " input", "-1")
    page.wait_for_selector(tpot + ".bad .field-error:not([hidden])")
    assert page.inner_text(tpot + " .field-error").startswith("slo.tpot_s:")
    page.fill(tpot + " input", "0.05")
    page.wait_for_selector("#fe-status:has-text('Valid')")
    # A measured figure says what measured it; saving waits for the note.
    open_group(page, "step")
    decode = field.format("worker.decode_seq_s")
    page.select_option(decode + " .fe-prov select", "measured")
    page.fill("#fe-name", "chat on A100s")
    assert page.is_disabled("#fe-save")
    page.fill(decode + " .fe-prov input.note", "calibration fit, splitwise llama2-70b")
    open_group(page, "autoscaler")
    page.select_option(field.format("autoscaler.model") + " select", "chat")
    page.wait_for_selector(field.format("autoscaler") + ".bad, .fe-field.bad[data-path^='autoscaler']")
    assert "autoscaler." in page.inner_text(".fe-field.bad .field-error")
    page.set_viewport_size({"width": 800, "height": 900})
    assert_fits(page, "the fleet editor's every group at 800 px")
    screenshot(page, "fleet-editor-groups-800px", full_page=True)
    page.click("details[data-group=autoscaler] button:has-text('Remove the autoscaler table')")
    page.wait_for_selector("#fe-status:has-text('Valid')")
    assert "[autoscaler]" not in page.input_value("#fe-toml")
    page.set_viewport_size({"width": 1280, "height": 900})
    screenshot(page, "fleet-editor-groups-1280px", full_page=True)
    page.click("#fe-save")
    page.wait_for_url("**/fleets/*/edit")
    made = FleetConfig.objects.get(name="chat on A100s")
    assert made.doc_id == doc.pk and made.scenario["hardware"]["gpu"] == "A100-80GB"
    assert made.toml.startswith("# A chat model served with continuous")
    assert made.provenance == {"worker.decode_seq_s": {"source": "measured",
                                                       "note": "calibration fit, splitwise llama2-70b"}}
