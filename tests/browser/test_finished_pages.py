"""The reviewer's pages carried to the end: the doc page and its diffs, evidence that
survives selecting a quote, the break pass's default sweep, mouse controls for what
the keyboard does, the placement pass's answer beside its button, and the export."""

from __future__ import annotations

from typing import Any

import pytest
from browser_helpers import ExampleReview, LiveServer, assert_fits, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_break_passs_default_sweep_starts_on_the_example(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from reviewer.models import Sweep
    from reviewer.runs.sweeps import sweep_cancel

    page = signed_in("alice")
    page.goto(dashboard.url + example_review.path + "#break")
    page.wait_for_selector("#sweep-panel select[aria-label='Key to sweep']")
    # The example's faults kill host 2: with them kept, no default leaves fewer hosts.
    assert page.input_value("#sweep-panel select[aria-label='Key to sweep']") == "hosts[0].count"
    assert page.input_value("#sweep-panel input[aria-label='Values']") == "2, 4, 8, 16"
    page.uncheck("#sweep-panel input[aria-label='Keep the scheduled faults']")
    assert page.input_value("#sweep-panel input[aria-label='Values']") == "1, 2, 4, 8, 16"
    page.check("#sweep-panel input[aria-label='Keep the scheduled faults']")
    page.click("#sweep-panel button:has-text('Run sweep')")
    page.wait_for_selector("#sweep-panel .status-line:has-text('points done')", timeout=30000)
    status = page.inner_text("#sweep-panel .status-line")
    assert "Could not start" not in status and "names no host" not in status, status
    sweep = Sweep.objects.get()
    assert sweep.values == [2, 4, 8, 16]
    sweep_cancel(sweep=sweep, user=example_review.alice)  # nothing more to see; free the worker


def test_a_doc_has_a_page_to_read_revise_and_diff_it(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from reviewer.models import ReviewSession

    doc = ReviewSession.objects.get(pk=example_review.session_id).doc
    page = signed_in("alice")
    # The docs list links each doc to its page.
    page.click(f"#docs-h + ul a:has-text({doc.title!r})")
    page.wait_for_url(f"{dashboard.url}/docs/{doc.pk}/")
    assert page.inner_text("#doc-reading-h") == "Revision 1 (the latest)"
    assert "##" not in page.inner_text("#doc-body")
    # A new revision, pasted: a heading renamed and a paragraph re-wrapped and changed.
    body = doc.latest_revision().body
    first_heading = next(line for line in body.splitlines() if line.startswith("## "))
    revised = body.replace(first_heading, first_heading + " (revised)", 1)
    revised += "\n\nA paragraph the authors added\nover two source lines. It has two sentences.\n"
    page.fill("#rev-body", revised)
    page.click("#doc-revise-form button[type=submit]")
    page.wait_for_selector(".messages li:has-text('Saved revision 2.')")
    assert page.inner_text("#doc-reading-h") == "Revision 2 (the latest)"
    assert "A paragraph the authors added over two source lines." in " ".join(page.inner_text("#doc-body").split())
    for width in (1280, 800):
        page.set_viewport_size({"width": width, "height": 900})
        assert_fits(page, f"the doc page at {width} px")
        screenshot(page, f"doc-page-{width}")
    page.click("a:has-text('diff with 1')")
    page.wait_for_selector("table.diff.side")
    # Markdown rendered, compared by sentence: the heading shown as one, no raw ##, and
    # the new paragraph's two sentences each a row, whatever its source lines.
    assert "##" not in page.inner_text("table.diff") and "*Status" not in page.inner_text("table.diff")
    assert page.locator("table.diff td.new .md-h2:has-text('(revised)')").count() == 1
    added = page.locator("table.diff tr.insert td.new .text").all_inner_texts()
    assert [" ".join(t.split()) for t in added] == [
        "A paragraph the authors added over two source lines.", "It has two sentences."]
    for width in (1280, 800):
        page.set_viewport_size({"width": width, "height": 900})
        assert_fits(page, f"the diff at {width} px")
        screenshot(page, f"doc-diff-{width}", full_page=True)
    # The session's page links its doc too.
    page.goto(dashboard.url + example_review.path)
    page.click("#doc-link")
    page.wait_for_url(f"{dashboard.url}/docs/{doc.pk}/")


def test_use_this_layout_answers_beside_its_button_and_names_the_config_after_it(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    from reviewer.models import FleetConfig

    page = signed_in("alice", width=800)
    page.goto(dashboard.url + example_review.path + "#break")
    card = page.locator(".layout-card").first
    button = card.locator("button:has-text('Use this layout')")
    button.click()
    answer = card.locator(".layout-result:has-text('Made fleet config')")
    answer.wait_for()
    below = answer.bounding_box()["y"] - (button.bounding_box()["y"] + button.bounding_box()["height"])
    assert 0 <= below < 60, f"the answer is {below:.0f} px below the button"
    made = FleetConfig.objects.order_by("-pk").first()
    assert made is not None and "1 big + 2 small" in made.name and "2 big / 2 big / 5 small" not in made.name
    screenshot(page, "use-this-layout-800")


def _in_thread(fn: Any) -> None:
    """Run ``fn`` beside Playwright's event loop (the services publish events through async_to_sync)."""
    import threading

    from django.db import connection

    failed: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:  # re-raised in the test's thread
            failed.append(exc)
        finally:
            connection.close()

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(timeout=120)
    if failed:
        raise failed[0]


def test_the_markdown_export_from_the_page_carries_the_threads_summaries_units_and_the_pages_fault_times(
    dashboard: LiveServer, example_review: ExampleReview, signed_in: Any
) -> None:
    import re
    from pathlib import Path

    from reviewer.models import EmulatorRun, Finding, Review, ReviewSession
    from reviewer.review.findings import finding_create, reply_create
    from reviewer.review.publishing import review_publish
    from reviewer.runs import player as run_player
    from reviewer.runs import services as run_services

    session = ReviewSession.objects.get(pk=example_review.session_id)
    alice, bob = example_review.alice, example_review.bob
    made: dict[str, Any] = {}

    def evidence_and_thread() -> None:
        # A run of the example's fleet up to just after its first scheduled fault, played here.
        overrides = ["duration_s=130", "faults=[{at_s = 120, kill = \"dispatcher:small\"}]"]
        resolved = run_services.resolve_scenario(session=session, overrides=overrides)
        run = run_services.build_run(user=alice, resolved=resolved, seed=None, speed="max", session=session,
                                     overrides=overrides)
        assert run_player.run_play(run_id=run.pk, worker="test") == "done"
        finding = finding_create(session=session, author=bob, review_pass="break", severity="fix_now",
                                 title="The small dispatcher dies with its queue",
                                 body="At 120 s the small model's queue is lost.",
                                 evidence_run_id=run.pk, evidence_metric="queue_depth")
        reply_create(finding=finding, author=bob, body="First word: is the queue replicated anywhere?")
        review_publish(session=session, reviewer=bob, verdict="needs_changes",
                       summary="Bob's summary: the dispatcher is a single point of loss.")
        reply_create(finding=finding, author=alice, body="Second word: no, it is in memory only.")
        review_publish(session=session, reviewer=alice, verdict="needs_changes",
                       summary="Alice's summary: agreed with Bob on the queue.")
        reply_create(finding=finding, author=bob, body="Third word: then it must be fixed first.")
        review_publish(session=session, reviewer=bob, verdict="needs_changes", summary="")
        made["run"], made["finding"] = run.pk, finding.pk

    _in_thread(evidence_and_thread)
    page = signed_in("alice")
    # The fault markers as the run's page draws them.
    page.goto(dashboard.url + example_review.path + "#break")
    earlier = "#runs-panel select[aria-label='Open an earlier run']"
    page.wait_for_selector(".run-view button:has-text('Start run')")
    page.locator(earlier).focus()
    page.wait_for_selector(f"#runs-panel option[value='{made['run']}']", state="attached")
    page.select_option(earlier, str(made["run"]))
    page.wait_for_selector(".run-view .summary table", timeout=30000)
    markers = page.evaluate("""() => {
        const d = document.querySelector('.run-view [data-chart=queue]');
        return (d.layout.shapes || []).filter((s) => s.xref === 'x').map((s) => s.x0);
    }""")
    assert markers == [120], markers

    # The export, downloaded from the rank pass's button.
    page.click("#tab-rank")
    with page.expect_download() as download:
        page.click(".exports a[data-format=md]")
    report = Path(download.value.path()).read_text("utf-8")
    Path(screenshot(page, "export-rank-pass")).with_name("export-with-threads.md").write_text(report, "utf-8")

    # The thread: every reply, in order, with its author.
    title = "The small dispatcher dies with its queue"
    part = report[report.index(f". {title}"):]
    part = part[: part.index("\n### ")] if "\n### " in part else part
    thread = re.findall(r"^- \*\*(\w+)\*\* \([^)]*\): (.*)$", part, re.M)
    assert thread == [("bob", "First word: is the queue replicated anywhere?"),
                      ("alice", "Second word: no, it is in memory only."),
                      ("bob", "Third word: then it must be fixed first.")], part
    # Each published review with its summary, once; the verdicts name each reviewer once.
    for review in Review.objects.filter(session=session):
        if review.summary.strip():
            assert report.count(review.summary.strip()) == 1, review.summary
    verdicts = re.search(r"^- Verdicts: (.*)$", report, re.M)
    assert verdicts is not None
    names = [v.split(":")[0] for v in verdicts.group(1).split(", ")]
    assert sorted(names) == sorted(set(names)) and {"alice", "bob"} <= set(names), verdicts.group(0)
    # No finding twice: the restate pass's included.
    headings = re.findall(r"^### \d+\. (.*)$", report, re.M)
    published = Finding.objects.filter(session=session, published_at__isnull=False, merged_into__isnull=True
                                       ).exclude(status="dropped")
    assert sorted(headings) == sorted(f.title for f in published)
    # Units on every measured figure; the fault at the time the page marks it.
    peaks = re.findall(r"peaked at ([^,]+), mean ([^(]+)\(", report)
    assert peaks and all(re.search(r"[A-Za-z%]", a) and re.search(r"[A-Za-z%]", b) for a, b in peaks), peaks
    faults = re.findall(r"(?:kill|restore) \S+ at ([\d.]+) s \((?:scheduled|injected)\)", part)
    assert [float(t) for t in faults] == markers, part
    assert EmulatorRun.objects.get(pk=made["run"]).status == "done"
