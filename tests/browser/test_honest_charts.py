"""Charts that never invent a trend: lines break where nothing completed, a
continuous fleet's waiting and running requests beside the queue, a summary whose
shares add up to 100%, one time axis zoomed and read together across a run's
charts and two compared runs, units a reader expects, and a trace pass legible at
800 and 1280 px that draws only what the fleet config has."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from browser_helpers import (
    CONTINUOUS_TOML,
    LiveServer,
    assert_fits,
    screenshot,
    screenshot_path,
    wait_for_page,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture
def chat_review(transactional_db: Any, django_user_model: Any) -> str:
    """A review of the continuously batched chat fleet, owned by alice; its page's path."""
    from browser_helpers import PASSWORD

    return chat_session(django_user_model.objects.create_user("alice", password=PASSWORD))


def chat_session(owner: Any) -> str:
    from reviewer.review import services

    doc = services.doc_create(owner=owner, title="Chat serving", body="A chat model on four-GPU workers.")
    fleet = services.fleet_config_create(owner=owner, name="chat fleet", toml=CONTINUOUS_TOML, doc=doc)
    session = services.session_create(owner=owner, doc=doc, fleet_config=fleet)
    return f"/sessions/{session.pk}/"


def run(page: Any, overrides: str = "", speed: str = "max", view: int = 0, wait: bool = True) -> None:
    """Start run ``view`` (0: A, 1: B) with ``overrides`` and wait for all its frames."""
    box = page.query_selector_all(".run-view")[view]
    box.query_selector("select[aria-label$='speed']").select_option(speed)
    if overrides:
        box.query_selector("input[aria-label$='overrides']").fill(overrides)
    box.query_selector("button:has-text('Start run')").click()
    if not wait:
        return
    page.wait_for_selector(f".run-view[data-status=done] >> nth={view}", timeout=120000)
    wait_for_page(page, f"document.querySelectorAll('.run-view')[{view}].dataset.frames === '60'", timeout=30000)
    page.wait_for_timeout(600)  # the last redraw and the axes' sharing


def traces(page: Any, chart: str, view: int = 0) -> list[dict[str, Any]]:
    return list(page.evaluate(
        """([c, v]) => document.querySelectorAll('.run-view')[v].querySelector(`[data-chart=${c}]`).data
            .map((t) => ({name: t.name, x: [...t.x], y: [...t.y], connectgaps: Boolean(t.connectgaps),
                          yaxis: t.yaxis || 'y', showlegend: t.showlegend !== false}))""",
        [chart, view],
    ))


def layout(page: Any, chart: str, view: int = 0) -> dict[str, Any]:
    return dict(page.evaluate(
        """([c, v]) => {
            const d = document.querySelectorAll('.run-view')[v].querySelector(`[data-chart=${c}]`);
            const L = d.layout, F = d._fullLayout;
            return {
              x_range: F.xaxis.range, y_range: F.yaxis.range, y2_range: F.yaxis2 ? F.yaxis2.range : null,
              y_title: (L.yaxis.title || {}).text || '', y2_title: L.yaxis2 ? (L.yaxis2.title || {}).text : null,
              plot_left: F._size.l, plot_width: F._size.w,
              shapes: (L.shapes || []).map((s) => ({name: s.name || '', xref: s.xref, yref: s.yref, x0: s.x0, y0: s.y0,
                                                   dash: (s.line || {}).dash, colour: (s.line || {}).color})),
              annotations: (L.annotations || []).map((a) => a.text),
              y_ticks: [...d.querySelectorAll('.yaxislayer-above .ytick text, .yaxislayer-above text.ytick')]
                .map((t) => t.textContent),
              legend: [...d.querySelectorAll('.legend .legendtext')].map((t) => t.textContent),
            };
        }""",
        [chart, view],
    ))


def shown_charts(page: Any, view: int = 0) -> list[str]:
    return list(page.evaluate(
        """(v) => [...document.querySelectorAll('.run-view')[v].querySelectorAll('.run-body > .chart:not([hidden])')]
            .map((d) => d.dataset.chart)""",
        view,
    ))


def test_latency_ttft_and_tpot_lines_break_where_no_request_completed(
    dashboard: LiveServer, chat_review: str, signed_in: Any
) -> None:
    """Every host dead from 20.5 s to 40.5 s: no line is drawn across the stretch, and
    each chart says when completions stopped."""
    page = signed_in("alice")
    page.goto(dashboard.url + chat_review + "#break")
    page.wait_for_selector(".run-view")
    kill = ", ".join(f'{{at_s = 20.5, kill = "host:{h}"}}' for h in range(3))
    restore = ", ".join(f'{{at_s = 40.5, restore = "host:{h}"}}' for h in range(3))
    run(page, f"faults=[{kill}, {restore}]")
    for chart in ("latency", "ttft", "tpot"):
        lines = [t for t in traces(page, chart) if t["showlegend"]]
        assert lines, chart
        for t in lines:
            assert not t["connectgaps"], (chart, t["name"])
            points = dict(zip(t["x"], t["y"], strict=True))
            before = [x for x, y in points.items() if y is not None and x <= 20]
            after = [x for x, y in points.items() if y is not None and x >= 41]
            assert before and after, (chart, t["name"], points)
            # A gap, not a bridge: frames in the dead stretch carry no value.
            quiet = [x for x in points if 24 <= x <= 40]
            assert quiet and all(points[x] is None for x in quiet), (chart, t["name"], points)
        notes = layout(page, chart)["annotations"]
        assert any(re.match(r"no request completed (since|from) 2\d s", n) for n in notes), (chart, notes)
    page.locator(".run-view [data-chart=latency]").screenshot(path=str(screenshot_path("honest-latency-gap")))
    page.locator(".run-view [data-chart=ttft]").screenshot(path=str(screenshot_path("honest-ttft-gap")))


def test_a_continuous_run_plots_its_waiting_and_running_requests_beside_the_queue(
    dashboard: LiveServer, chat_review: str, signed_in: Any
) -> None:
    """A fleet that admits 8 sequences a worker: thousands wait at the workers, and
    the queue chart shows them (the dispatcher's own queue stays empty)."""
    page = signed_in("alice")
    page.goto(dashboard.url + chat_review + "#break")
    page.wait_for_selector(".run-view")
    run(page, "worker.max_num_seqs=8")
    by_name = {t["name"]: t for t in traces(page, "queue")}
    assert "waiting" in by_name and "running" in by_name, list(by_name)
    waiting = [y for y in by_name["waiting"]["y"] if y is not None]
    running = [y for y in by_name["running"]["y"] if y is not None]
    assert max(waiting) > 100, waiting  # the requests waiting at the workers
    assert 0 < max(running) <= 5 * 8, running  # at most 8 sequences on each of the five workers
    assert layout(page, "queue")["y_title"] == "requests"
    for width in (1280, 800):
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(400)
        assert_fits(page, f"the run page at {width} px")
        page.evaluate("document.querySelector('.run-view .progress').scrollIntoView({block: 'start'})")
        screenshot(page, f"honest-run-page-{width}", full_page=True)


def test_the_run_summary_shows_the_requests_still_in_the_system_and_adds_up_to_100(
    dashboard: LiveServer, chat_review: str, signed_in: Any
) -> None:
    page = signed_in("alice")
    page.goto(dashboard.url + chat_review + "#break")
    page.wait_for_selector(".run-view")
    run(page, "worker.max_num_seqs=8")
    page.wait_for_selector(".run-view .summary table")
    rows = page.evaluate(
        """[...document.querySelectorAll('.run-view .summary tr')].map((r) => [...r.children].map((c) => c.textContent))""")
    row = {cells[0]: cells[-1] for cells in rows if len(cells) > 1}
    assert "in the system at the end" in row, rows
    shares = [float(v.rstrip("%")) for h, v in row.items() if v.endswith("%")]
    assert math.isclose(sum(shares), 100.0, abs_tol=0.01), row
    assert float(row["in the system at the end"].rstrip("%")) > 10, row  # most of the overload still waits
    page.locator(".run-view .summary").screenshot(path=str(screenshot_path("honest-summary")))


def test_shed_requests_show_their_reason_in_the_summary_and_a_chart_of_their_own(
    dashboard: LiveServer, chat_review: str, signed_in: Any
) -> None:
    page = signed_in("alice")
    page.goto(dashboard.url + chat_review + "#break")
    page.wait_for_selector(".run-view")
    run(page, "worker.max_num_seqs=8; dispatcher.queue_limit=4")
    page.wait_for_selector(".run-view .summary table")
    rows = page.evaluate(
        """[...document.querySelectorAll('.run-view .summary tr')].map((r) => [...r.children].map((c) => c.textContent))""")
    row = {cells[0].strip(): cells[1] for cells in rows if len(cells) > 1}
    shed = int(row["shed"].replace(",", ""))
    assert shed > 0 and int(row["waiting bound full"].replace(",", "")) == shed, rows
    lines = {t["name"]: t["y"] for t in traces(page, "shed")}
    assert sum(v or 0 for v in lines["waiting bound full"]) == shed, lines
    assert sum(v or 0 for v in lines["gateway rate limit"]) == 0
    page.locator(".run-view [data-chart=shed]").screenshot(path=str(screenshot_path("shed-reasons")))


def plot_point(page: Any, chart: str, t: float, view: int = 0) -> dict[str, float]:
    """The page position of time ``t`` halfway up ``chart``'s plot area."""
    return dict(page.evaluate(
        """([c, t, v]) => {
            const d = document.querySelectorAll('.run-view')[v].querySelector(`[data-chart=${c}]`);
            d.scrollIntoView({block: 'center'});
            const box = d.getBoundingClientRect(), F = d._fullLayout;
            return {x: box.left + F._size.l + F.xaxis.l2p(t), y: box.top + F._size.t + F._size.h / 2};
        }""",
        [chart, t, view],
    ))


def test_zoom_and_crosshair_are_shared_by_a_runs_charts_and_by_compared_runs(
    dashboard: LiveServer, chat_review: str, signed_in: Any
) -> None:
    page = signed_in("alice")
    page.goto(dashboard.url + chat_review + "#break")
    page.wait_for_selector(".run-view")
    run(page)
    page.click("#runs-panel button:has-text('Compare with')")
    run(page, "worker.max_num_seqs=8", view=1)
    charts = shown_charts(page)
    assert {"ttft", "preemptions", "queue", "latency"} <= set(charts), charts

    # Every chart's plot area starts and ends at the same place, the right-hand axis's included.
    for view in (0, 1):
        areas = {c: (round(layout(page, c, view)["plot_left"]), round(layout(page, c, view)["plot_width"])) for c in charts}
        assert len(set(areas.values())) == 1, (view, areas)
    # Compared runs share their value ranges, the right-hand axis too.
    for chart in ("ttft", "tpot", "preemptions", "queue"):
        a, b = layout(page, chart, 0), layout(page, chart, 1)
        assert a["y_range"] == b["y_range"], (chart, a["y_range"], b["y_range"])
        assert a["y2_range"] == b["y2_range"], chart

    # Drag-zoom run A's TTFT chart to 10-30 s: every chart of both runs follows.
    start, end = plot_point(page, "ttft", 10), plot_point(page, "ttft", 30)
    page.mouse.move(start["x"], start["y"])
    page.mouse.down()
    page.mouse.move(end["x"], end["y"] + 2, steps=10)
    page.mouse.up()
    page.wait_for_timeout(800)
    for view in (0, 1):
        for chart in charts:
            lo, hi = layout(page, chart, view)["x_range"]
            assert abs(lo - 10) < 1.5 and abs(hi - 30) < 1.5, (view, chart, lo, hi)

    # A crosshair: hovering one chart at 20 s marks 20 s on the others, in both runs.
    at = plot_point(page, "latency", 20)
    page.mouse.move(at["x"], at["y"])
    page.wait_for_timeout(500)
    for view in (0, 1):
        for chart in charts:
            if (chart, view) == ("latency", 0):
                continue
            shown = page.evaluate(
                """([c, v]) => {
                    const d = document.querySelectorAll('.run-view')[v].querySelector(`[data-chart=${c}]`);
                    return (d._hoverdata || []).map((p) => p.x);
                }""",
                [chart, view],
            )
            assert shown and all(abs(x - 20) <= 1 for x in shown), (view, chart, shown)

    # Double-click resets every chart to the whole run.
    page.mouse.dblclick(at["x"], at["y"])
    page.wait_for_timeout(800)
    for view in (0, 1):
        assert [round(v) for v in layout(page, "queue", view)["x_range"]] == [0, 60], view

    for width in (1280, 800):
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(500)
        assert_fits(page, f"compare mode at {width} px")
        clipped = page.evaluate(
            """() => [...document.querySelectorAll('.run-view .summary')]
                .filter((s) => s.scrollWidth > s.clientWidth + 1 || s.getBoundingClientRect().right > s.closest('.run-view').getBoundingClientRect().right + 1)
                .map((s) => s.closest('.run-view').getAttribute('aria-label'))""")
        assert clipped == [], f"the summary is clipped at {width} px in {clipped}"
        page.locator(".runs-side").screenshot(path=str(screenshot_path(f"honest-compare-{width}")))


def power_of_ten(text: str) -> bool:
    value = float(text.replace("k", "e3").replace("M", "e6").replace("\u2212", "-").replace(",", ""))
    return value > 0 and math.isclose(math.log10(value), round(math.log10(value)), abs_tol=1e-9)


def test_units_one_quantity_an_axis_readable_log_ticks_and_faults_told_apart(
    dashboard: LiveServer, chat_review: str, signed_in: Any
) -> None:
    page = signed_in("alice")
    page.goto(dashboard.url + chat_review + "#break")
    page.wait_for_selector(".run-view")
    # 300 simulated seconds at 10x real time: half a minute to inject a fault from the page.
    run(page, "duration_s=300", speed="10", wait=False)
    page.wait_for_selector(".run-view[data-status=running]", timeout=60000)
    wait_for_page(page, "Number(document.querySelector('.run-view').dataset.frames || 0) >= 5", timeout=60000)
    page.click(".run-view button:has-text('Kill host 2')")
    page.wait_for_selector(".run-view[data-status=done]", timeout=120000)
    wait_for_page(page, "document.querySelector('.run-view').dataset.frames === '300'", timeout=30000)
    page.wait_for_timeout(600)

    # TPOT in milliseconds, its SLO line at 100 ms.
    tpot = layout(page, "tpot")
    assert "ms" in tpot["y_title"], tpot["y_title"]
    assert [s["y0"] for s in tpot["shapes"] if s["yref"] == "y"] == [100], tpot["shapes"]
    values = [y for t in traces(page, "tpot") for y in t["y"] if y is not None]
    assert values and min(values) > 1, values  # milliseconds, not fractions of a second

    # One quantity an axis: the queue chart counts requests only.
    queue = traces(page, "queue")
    assert queue and not any("backlog" in t["name"] for t in queue), [t["name"] for t in queue]

    # Log ticks at powers of ten only, each once.
    ticks = layout(page, "outcomes")["y_ticks"]
    assert ticks and all(power_of_ten(t) for t in ticks) and len(set(ticks)) == len(ticks), ticks

    # The scheduled kill at 20.5 s and the injected one are told apart, in the markers and the legend.
    for chart in ("queue", "latency", "ttft"):
        state = layout(page, chart)
        markers = [s for s in state["shapes"] if s["xref"] == "x"]
        scheduled = [s for s in markers if s["name"].startswith("scheduled")]
        injected = [s for s in markers if s["name"].startswith("injected")]
        assert [s["x0"] for s in scheduled] == [20.5, 40.5], (chart, markers)
        assert len(injected) == 1 and 4 <= injected[0]["x0"] <= 299, (chart, markers)
        assert scheduled[0]["dash"] != injected[0]["dash"], (chart, markers)
        legend = " | ".join(state["legend"])
        assert "scheduled fault" in legend and "injected fault" in legend, (chart, legend)
    page.locator(".run-view [data-chart=queue]").screenshot(path=str(screenshot_path("honest-fault-markers")))
    page.locator(".run-view [data-chart=outcomes]").screenshot(path=str(screenshot_path("honest-log-ticks")))
    page.locator(".run-view [data-chart=tpot]").screenshot(path=str(screenshot_path("honest-tpot-ms")))


def trace_text_problems(page: Any) -> list[str]:
    """Trace-pass text smaller than 12 px on screen, cut short, or spilling out of its box."""
    return list(page.evaluate(
        """() => {
            const svg = document.querySelector('.trace-svg');
            const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
            const out = [];
            for (const g of svg.querySelectorAll('.hop')) {
              const box = g.querySelector('rect').getBoundingClientRect();
              for (const t of g.querySelectorAll('text')) {
                const px = parseFloat(getComputedStyle(t).fontSize) * scale;
                const r = t.getBoundingClientRect();
                if (!t.textContent) continue;
                if (px < 12) out.push(`${g.dataset.hop}: "${t.textContent}" at ${px.toFixed(1)} px`);
                if (t.textContent.includes('\u2026')) out.push(`${g.dataset.hop}: "${t.textContent}" cut`);
                if (r.right > box.right + 0.5 || r.left < box.left - 0.5 || r.bottom > box.bottom + 0.5)
                  out.push(`${g.dataset.hop}: "${t.textContent}" outside its box`);
              }
            }
            return out;
        }"""
    ))


def test_the_trace_pass_is_legible_at_800_and_1280_px_and_draws_only_what_the_fleet_has(
    dashboard: LiveServer, example_review: Any, signed_in: Any
) -> None:
    chat_review = chat_session(example_review.alice)
    page = signed_in("alice")
    # The example: two models, each with its own dispatcher and queue; a [gateway] table.
    for width in (1280, 800):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(dashboard.url + example_review.path + "#trace")
        page.wait_for_selector(".trace-svg .hop[data-hop=dispatcher]")
        page.wait_for_timeout(300)
        assert trace_text_problems(page) == [], width
        queues = page.evaluate(
            "[...document.querySelectorAll('.trace-svg .hop[data-hop=dispatcher] text.facts')].map((t) => t.textContent)")
        joined = " ".join(queues)
        assert "small: queue" in joined and "big: queue" in joined, queues
        assert "Gateway" in page.text_content(".trace-svg .hop[data-hop=gateway]")
        assert_fits(page, f"the trace pass at {width} px")
        page.locator("#trace-panel").screenshot(path=str(screenshot_path(f"honest-trace-example-{width}")))
    # The chat fleet has no [gateway] table: no gateway hop is drawn.
    for width in (1280, 800):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(dashboard.url + chat_review + "#trace")
        page.wait_for_selector(".trace-svg .hop[data-hop=worker]")
        page.wait_for_timeout(300)
        hops = page.evaluate("[...document.querySelectorAll('.trace-svg .hop')].map((g) => g.dataset.hop)")
        assert hops == ["client", "routing", "worker", "response_path"], hops
        assert trace_text_problems(page) == [], width
        page.locator("#trace-panel").screenshot(path=str(screenshot_path(f"honest-trace-chat-{width}")))
