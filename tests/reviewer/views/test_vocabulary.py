"""The server owns the shared vocabulary: the page gets it in its config, the scripts never retype it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from reviewer.views.vocabulary import FRAME_METRICS, RUN_CHARTS, TOKEN_FRAME_METRICS, vocabulary

STATIC = Path(__file__).resolve().parents[3] / "static" / "reviewer"

# Words that are also ordinary JavaScript or DOM strings ("open" is a socket
# event, "ok" a response flag), so a literal of them proves nothing.
COMMON_WORDS = {"open", "ok"}


def _words() -> set[str]:
    v = vocabulary()
    words = {c["key"] for name in ("passes", "severities", "findingStatuses", "hops") for c in v[name]}
    words |= set(v["runStatuses"]["all"]) | set(v["frameMetrics"]) | set(v["tokenFrameMetrics"])
    return words - COMMON_WORDS


def test_it_names_exactly_the_metrics_the_engine_puts_in_a_frame() -> None:
    from emulator.scenario import load_scenario
    from emulator.sim.engine import Engine

    engine = Engine(load_scenario("doc-as-written", max_requests=None), seed=1)
    frame = engine.advance_to(1.0)[0].to_dict()
    assert list(frame["m"]) == list(FRAME_METRICS)
    drawn = [m["key"] for chart in RUN_CHARTS if not chart.get("continuous")
             for m in chart["metrics"] if not m.get("continuous")]
    assert drawn and set(drawn) <= set(FRAME_METRICS)


def test_its_token_charts_draw_metrics_a_continuous_frame_carries() -> None:
    from emulator.scenario import load_scenario
    from emulator.sim.engine import Engine

    engine = Engine(load_scenario("continuous-comfortable", max_requests=None), seed=1)
    frame = engine.advance_to(2.0)[-1].to_dict()
    assert set(TOKEN_FRAME_METRICS) <= set(frame["m"])
    drawn = {m["key"] for chart in RUN_CHARTS for m in chart["metrics"] if chart.get("continuous") or m.get("continuous")}
    assert drawn and drawn <= set(TOKEN_FRAME_METRICS)
    # Every chart names the unit of its y axis.
    assert all(chart.get("y_title") for chart in RUN_CHARTS)
    # Requests waiting at the workers and running there are drawn beside the dispatcher's queue.
    queue = next(chart for chart in RUN_CHARTS if chart["key"] == "queue")
    assert {"queue_depth", "waiting", "running"} <= {m["key"] for m in queue["metrics"]}


def test_each_chart_draws_one_quantity_on_its_axis() -> None:
    """Requests and batches are never on one axis: batches have a chart of their own."""
    units = {chart["key"]: chart["y_title"] for chart in RUN_CHARTS}
    assert units["queue"] == "requests" and units["backlog"] == "batches"
    assert "backlog" not in {m["key"] for m in next(c for c in RUN_CHARTS if c["key"] == "queue")["metrics"]}
    # Per-token times read in milliseconds.
    tpot = next(chart for chart in RUN_CHARTS if chart["key"] == "tpot")
    assert tpot["scale"] == 1000 and tpot["unit"] == "ms" and "ms" in tpot["y_title"]
    # No chart bridges frames without a value.
    assert not any(chart.get("connect_gaps") for chart in RUN_CHARTS)


def test_it_leaves_no_pass_severity_status_hop_or_metric_spelled_out_in_the_scripts() -> None:
    literal = re.compile(r"""["'`]([a-z_0-9]+)["'`]""")
    assert len(list(STATIC.rglob("*.js"))) > 20  # the scripts, in their folders
    found = {
        f"{path.name}: {word}"
        for path in sorted(STATIC.rglob("*.js"))
        for word in literal.findall(path.read_text("utf-8"))
        if word in _words()
    }
    assert found == set()


@pytest.mark.django_db
def test_it_sends_the_vocabulary_in_the_session_pages_config(django_user_model: Any) -> None:
    from reviewer.review import services

    owner = django_user_model.objects.create_user("owner", password="pw-owner-123")
    doc = services.doc_create(owner=owner, title="Doc", body="Text.")
    session = services.session_create(owner=owner, doc=doc)
    client = Client()
    client.force_login(owner)
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    config = json.loads(re.search(r'<script id="page-config" type="application/json">(.*?)</script>',
                                  page, re.S).group(1))
    assert [s["key"] for s in config["severities"]] == ["fix_now", "clarify", "mention"]
    assert config["runStatuses"]["final"] == ["done", "cancelled", "failed"]
    assert config["frameMetrics"] == list(FRAME_METRICS)
    assert config["runCharts"] == RUN_CHARTS
    assert config["pass"]["BREAK"] == "break"
