"""The run views in the browser: token-level charts with their SLO lines and the KV
heatmap for a continuously batched fleet, fault markers at the fault's time on
every chart, one-click break-pass changes shown on the run, compared runs on
shared axes, sweeps over any host group, and a run's place in the queue; no page
wider than its viewport."""

from __future__ import annotations

from typing import Any

import pytest
from browser_helpers import (
    CONTINUOUS_TOML,
    LiveServer,
    screenshot,
    screenshot_path,
    wait_for,
    wait_for_page,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

@pytest.fixture
def continuous_review(transactional_db: Any, django_user_model: Any) -> str:
    """A review of a continuously batched fleet, owned by alice; its page's path."""
    from browser_helpers import PASSWORD

    from reviewer.review import services

    alice = django_user_model.objects.create_user("alice", password=PASSWORD)
    doc = services.doc_create(owner=alice, title="Chat serving", body="A chat model on four-GPU workers.")
    fleet = services.fleet_config_create(owner=alice, name="chat fleet", toml=CONTINUOUS_TOML, doc=doc)
    session = services.session_create(owner=alice, doc=doc, fleet_config=fleet)
    return f"/sessions/{session.pk}/"


def overflow(page: Any) -> int:
    return page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")


def chart_state(page: Any, chart: str, view: int = 0) -> dict[str, Any]:
    """A chart's points, its horizontal lines (y) and vertical markers (x), and axis titles."""
    return page.evaluate(
        """([c, v]) => {
            const d = document.querySelectorAll('.run-view')[v].querySelector(`[data-chart=${c}]`);
            const shapes = (d.layout.shapes || []);
            return {
              points: d.data.reduce((n, t) => n + t.y.filter((y) => y != null).length, 0),
              hidden: d.hidden,
              lines: shapes.filter((s) => s.yref === 'y').map((s) => s.y0),
              markers: shapes.filter((s) => s.xref === 'x').map((s) => s.x0),
              x_title: d.layout.xaxis.title.text,
              y_title: d.layout.yaxis.title.text,
              y_type: d.layout.yaxis.type,
            };
        }""",
        [chart, view],
    )


def test_a_continuous_run_draws_ttft_tpot_with_slo_lines_the_kv_heatmap_and_fault_markers(
    dashboard: LiveServer, continuous_review: str, signed_in: Any
) -> None:
    page = signed_in("alice")
    page.goto(dashboard.url + continuous_review + "#break")
    page.wait_for_selector(".run-view")
    page.select_option(".run-view select[aria-label='Run A speed']", "max")
    page.click(".run-view button:has-text('Start run')")
    page.wait_for_selector(".run-view[data-status=done]", timeout=120000)
    wait_for_page(page, "document.querySelector('.run-view').dataset.frames === '60'", timeout=30000)

    ttft, tpot = chart_state(page, "ttft"), chart_state(page, "tpot")
    assert ttft["points"] > 0 and tpot["points"] > 0
    assert ttft["lines"] == [2.0] and tpot["lines"] == [100]  # the scenario's [slo], TPOT in ms
    tbt = chart_state(page, "tbt")
    assert tbt["lines"] == [] and tbt["y_title"] == "ms between tokens"  # no slo.tbt_s here
    for chart in ("ttft", "tpot", "tbt", "tokens", "goodput", "preemptions", "queue", "latency", "outcomes"):
        state = chart_state(page, chart)
        assert not state["hidden"] and state["points"] > 0, (chart, state)
        # The fault's own time, not the end of the frame that saw it.
        assert 20.5 in state["markers"] and 40.5 in state["markers"], (chart, state["markers"])
        assert state["x_title"] == "simulated time (s)" and state["y_title"], (chart, state)
    assert chart_state(page, "outcomes")["y_type"] == "log"

    # The KV heatmap: each live worker's unit holds its KV use (0..1); host 1 was
    # dead and is back, so each of the five 4-unit workers has a value at the end.
    kv = page.evaluate("document.querySelector('.run-view [data-chart=kv-heatmap]').data[0].z")
    values = [v for row in kv for v in row if v is not None]
    assert len(values) == 5 * 4 and all(0 <= v <= 1 for v in values), kv

    page.locator(".run-view .heatmaps").screenshot(path=str(screenshot_path("run-view-heatmaps")))
    page.locator(".run-view [data-chart=ttft]").screenshot(path=str(screenshot_path("run-view-ttft")))
    page.locator(".run-view [data-chart=tbt]").screenshot(path=str(screenshot_path("run-view-tbt")))
    for width in (1280, 800):
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(300)
        assert overflow(page) <= 0, f"the break pass scrolls sideways at {width} px"
        page.evaluate("document.querySelector('.run-view .progress').scrollIntoView({block: 'start'})")
        screenshot(page, f"run-view-continuous-{width}", full_page=True)


def test_a_static_run_shows_fault_markers_at_the_faults_time_and_where_completions_stop(
    dashboard: LiveServer, continuous_review: str, signed_in: Any
) -> None:
    """The token charts stay hidden for a statically batched fleet; a host fault is a
    marker on every chart; with every host dead the latency chart says since when
    nothing completed."""
    page = signed_in("alice")
    page.goto(dashboard.url + continuous_review + "#break")
    page.wait_for_selector(".run-view")
    # A preset of the seed's static workers, through the overrides box.
    page.select_option(".run-view select[aria-label='Run A speed']", "max")
    every_host = ", ".join(f'{{at_s = 20.5, kill = "host:{h}"}}' for h in range(3))
    page.fill(".run-view input[aria-label='Run A overrides']",
              f'worker.batching="static"; worker.batch_s=1.5; faults=[{every_host}]')
    page.click(".run-view button:has-text('Start run')")
    page.wait_for_selector(".run-view[data-status=done]", timeout=120000)
    wait_for_page(page, "document.querySelector('.run-view').dataset.frames === '60'", timeout=30000)
    assert page.evaluate("document.querySelector('.run-view [data-chart=ttft]').hidden")
    assert page.evaluate("document.querySelector('.run-view [data-chart=kv-heatmap]').hidden")
    for chart in ("queue", "latency", "outcomes"):
        assert chart_state(page, chart)["markers"] == [20.5, 20.5, 20.5], chart
    assert "worker.batching" in page.inner_text(".run-view .changed-keys")
    note = page.inner_text(".run-view .stop-note")
    assert note.startswith("No request completed since 2"), note  # the last completions, just after 20 s
    notes = page.evaluate(
        "document.querySelector('.run-view [data-chart=latency]').layout.annotations.map((a) => a.text)")
    assert any(t.startswith("no request completed since") for t in notes), notes
    assert "null" not in page.inner_text(".break-advice")
    page.locator(".run-view [data-chart=latency]").screenshot(path=str(screenshot_path("run-view-static-stopped")))


def test_the_trace_pass_draws_the_fleets_own_path(
    dashboard: LiveServer, continuous_review: str, signed_in: Any
) -> None:
    page = signed_in("alice", width=800)
    page.goto(dashboard.url + continuous_review + "#trace")
    page.wait_for_selector(".trace-svg .hop[data-hop=worker]")
    hops = page.evaluate("[...document.querySelectorAll('.trace-svg .hop')].map((g) => g.dataset.hop)")
    # Continuous batching pushed to workers: no dispatcher queue; no [gateway] table, no gateway.
    assert hops == ["client", "routing", "worker", "response_path"]
    assert "KV 200000 tokens a worker" in page.text_content(".trace-svg .hop[data-hop=worker]")
    page.locator("#trace-panel").screenshot(path=str(screenshot_path("trace-continuous-800")))
    page.click(".trace-svg .hop[data-hop=routing]")
    page.click("#trace-panel button:has-text('New finding on this hop')")
    assert page.input_value("#ff-hop") == "routing"
    assert overflow(page) <= 0


def test_a_break_pass_click_changes_a_key_and_the_run_shows_it_and_compare_mode_fits(
    dashboard: LiveServer, continuous_review: str, signed_in: Any
) -> None:
    from reviewer.models import EmulatorRun

    page = signed_in("alice")
    page.goto(dashboard.url + continuous_review + "#break")
    page.wait_for_selector(".run-view")
    page.click(".run-view button.chip[data-key='traffic.qps']:has-text('1.5')")
    assert page.get_attribute(".run-view button.chip[data-key='traffic.qps']:has-text('1.5')", "aria-pressed") == "true"
    page.click(".run-view button.chip[data-key='faults']")
    page.select_option(".run-view select[aria-label='Run A speed']", "max")
    page.click(".run-view button:has-text('Start run')")
    page.wait_for_selector(".run-view[data-status=done]", timeout=120000)
    run = EmulatorRun.objects.get()
    assert run.overrides == ["traffic.qps=60", "faults=[]"]
    assert "traffic.qps=60" in page.inner_text(".run-view .changed-keys")
    assert chart_state(page, "queue")["markers"] == []  # no scheduled fault left to mark

    # The second run gets the suggested change, measured to differ, pressed; both share their axes.
    page.wait_for_selector(".break-advice[data-measured=true]", timeout=60000)
    assert "Measured on this fleet config: ok" in page.inner_text(".break-advice")
    page.click("#runs-panel button:has-text('Compare with')")
    right = page.query_selector_all(".run-view")[1]
    assert right.query_selector("button.chip[aria-pressed=true]") is not None
    right.query_selector("select").select_option("max")
    right.query_selector("button:has-text('Start run')").click()
    page.wait_for_selector(".run-view[data-status=done] >> nth=1", timeout=120000)
    wait_for_page(page, "document.querySelectorAll('.run-view')[1].dataset.frames === '60'", timeout=30000)
    page.wait_for_timeout(800)
    # Run A's charts, drawn before run B opened beside it, were fitted to the narrower column.
    fits = page.evaluate(
        "[...document.querySelectorAll('.run-view .chart:not([hidden])')]"
        ".map((d) => d.querySelector('.main-svg').getBoundingClientRect().width - d.clientWidth)")
    assert fits and max(fits) <= 1, fits
    ranges = page.evaluate(
        "[...document.querySelectorAll('.run-view [data-chart=ttft]')].map((d) => d.layout.yaxis.range)")
    assert ranges[0] == ranges[1] and ranges[0][1] >= 2.0  # shared, and the SLO line in view
    for width in (1280, 800):
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(300)
        assert overflow(page) <= 0, f"compare mode scrolls sideways at {width} px"
        page.locator(".runs-side").screenshot(path=str(screenshot_path(f"run-view-compare-{width}")))
    page.check("#runs-panel input[aria-label='Overlay run B on run A']")
    page.wait_for_selector(".overlay-charts [data-chart=ttft] .main-svg")
    names = page.evaluate("document.querySelector('.overlay-charts [data-chart=ttft]').data.map((t) => t.name)")
    assert any(n.startswith("A ") for n in names) and any(n.startswith("B ") for n in names)
    assert overflow(page) <= 0
    page.locator(".overlay-charts [data-chart=ttft]").screenshot(path=str(screenshot_path("run-view-overlay-ttft")))


def test_a_sweep_over_the_second_host_group_without_the_faults_completes_with_an_answer(
    dashboard: LiveServer, continuous_review: str, signed_in: Any
) -> None:
    from reviewer.models import Sweep

    page = signed_in("alice", width=800)
    page.goto(dashboard.url + continuous_review + "#break")
    page.wait_for_selector("#sweep-panel select[aria-label='Key to sweep']")
    page.select_option("#sweep-panel select[aria-label='Key to sweep']", "hosts[1].count")
    assert page.input_value("#sweep-panel input[aria-label='Values']") == "1, 2, 4, 8"
    page.fill("#sweep-panel input[aria-label='Values']", "1, 2")
    page.fill("#sweep-panel input[aria-label='Target p99 seconds']", "0.01")
    page.uncheck("#sweep-panel input[aria-label='Keep the scheduled faults']")
    page.click("#sweep-panel button:has-text('Run sweep')")
    page.wait_for_selector("#sweep-panel .status-line:has-text('2 of 2 points done')", timeout=120000)
    page.wait_for_selector("#sweep-panel [data-chart=sweep] .main-svg")
    sweep = Sweep.objects.get()
    assert sweep.key == "hosts[1].count" and all(r.scenario.get("faults", []) == [] for r in sweep.runs.all())
    # No value can meet 10 ms: the page says so, and why.
    page.wait_for_selector("#sweep-panel .status-line:has-text('no swept value of hosts[1].count')", timeout=20000)
    assert overflow(page) <= 0
    page.locator("#sweep-panel").screenshot(path=str(screenshot_path("sweep-second-group-800")))


def test_a_run_waiting_for_the_worker_shows_its_place_in_the_queue(
    dashboard: LiveServer, continuous_review: str, signed_in: Any
) -> None:
    page = signed_in("alice")
    page.goto(dashboard.url + continuous_review + "#break")
    page.wait_for_selector(".run-view")
    # Run A at real time holds the one worker; run B waits behind it.
    page.select_option(".run-view select[aria-label='Run A speed']", "1")
    page.click(".run-view button:has-text('Start run')")
    page.wait_for_selector(".run-view[data-status=running]", timeout=40000)
    page.click("#runs-panel button:has-text('Compare with')")
    right = page.query_selector_all(".run-view")[1]
    right.query_selector("button:has-text('Start run')").click()
    page.wait_for_selector(".run-view[data-queue-place='1']", timeout=20000)
    assert "place 1 in the queue for a worker" in right.inner_text()
    page.goto(dashboard.url + "/")
    assert "place 1 in the queue for a worker" in page.inner_text("#runs-h + ul")
    # Free the worker for the next test: cancel both runs from the page's origin.
    from reviewer.models import EmulatorRun

    ids = list(EmulatorRun.objects.exclude(status__in=["done", "cancelled", "failed"]).values_list("pk", flat=True))
    page.evaluate(
        """async (ids) => {
            const input = document.querySelector('input[name=csrfmiddlewaretoken]');
            const cookie = document.cookie.match(/(?:^|;\\s*)csrftoken=([^;]+)/);
            const token = input ? input.value : cookie ? decodeURIComponent(cookie[1]) : '';
            for (const id of ids) {
                await fetch(`/api/runs/${id}/cancel/`, {method: 'POST', credentials: 'same-origin',
                    headers: {'X-CSRFToken': token, 'Content-Type': 'application/json'}, body: '{}'});
            }
        }""",
        ids,
    )
    wait_for(lambda: not EmulatorRun.objects.exclude(status__in=["done", "cancelled", "failed"]).exists(),
             timeout_s=40, what="both runs to end")


def test_the_trace_of_a_disaggregated_fleet_shows_its_pools_and_the_kv_transfer(
    dashboard: LiveServer, transactional_db: Any, django_user_model: Any, signed_in: Any
) -> None:
    from pathlib import Path

    from browser_helpers import PASSWORD

    from reviewer.review import services

    preset = Path(__file__).resolve().parents[2] / "emulator" / "scenario" / "presets" / "disagg-decode-undersized.toml"
    alice = django_user_model.objects.create_user("alice", password=PASSWORD)
    doc = services.doc_create(owner=alice, title="Split serving", body="Prefill and decode on separate workers.")
    fleet = services.fleet_config_create(owner=alice, name="split fleet", toml=preset.read_text(), doc=doc)
    session = services.session_create(owner=alice, doc=doc, fleet_config=fleet)

    page = signed_in("alice")
    page.goto(f"{dashboard.url}/sessions/{session.pk}/#trace")
    page.wait_for_selector(".trace-svg .hop[data-hop=kv_transfer]")
    hops = page.evaluate("[...document.querySelectorAll('.trace-svg .hop')].map((g) => g.dataset.hop)")
    assert hops == ["client", "routing", "prefill_pool", "kv_transfer", "decode_pool", "response_path"]
    assert "50 GB/s a decode worker" in page.text_content(".trace-svg .hop[data-hop=kv_transfer]")
    assert '3 workers (pool "prefill")' in page.text_content(".trace-svg .hop[data-hop=prefill_pool]")
    assert overflow(page) <= 0
    page.locator("#trace-panel").screenshot(path=str(screenshot_path("trace-disaggregated-1280")))
