"""The run page's chart of the SLO planner: it reads the looks the planner keeps in
the run's summary (observed and predicted arrivals, the active workers' capacity),
which a run with a planner carries and a reactive autoscaler's does not."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from runs_helpers import run_preset

from emulator.sim.planner import LOOK_KEYS
from reviewer.views.mechanism_charts import PLANNER_CHART
from reviewer.views.vocabulary import vocabulary

ROOT = Path(__file__).resolve().parents[3]


def _summary(preset: str, overrides: list[str]) -> dict[str, Any]:
    return run_preset(preset, overrides)[1]


def test_the_vocabulary_sends_the_planner_chart_with_the_engines_look_keys() -> None:
    chart = vocabulary()["mechanismCharts"]["plannerChart"]
    assert chart == PLANNER_CHART
    assert {chart["x"], *(s["key"] for s in chart["series"])} == set(LOOK_KEYS)
    assert chart["mechanism"] in {c["mechanism"] for c in vocabulary()["mechanismCharts"]["charts"]}


def test_a_planned_run_keeps_each_look_beside_the_active_workers_capacity() -> None:
    summary = _summary("dynamo-planner-ramp", ["duration_s=240"])
    own, pools = PLANNER_CHART["summaries"]
    assert own not in summary  # the pools are planned, not the model as a whole
    assert set(summary[pools]) == {"prefill", "decode"}
    for pool, a in summary[pools].items():
        looks = a[PLANNER_CHART["looks"]]
        times = looks[PLANNER_CHART["x"]]
        assert times == pytest.approx([15.0 * (i + 1) for i in range(len(times))])  # interval_s 15
        assert len(times) == 240 // 15
        for s in PLANNER_CHART["series"]:
            assert len(looks[s["key"]]) == len(times)
        rate = a["per_worker_qps"]
        assert rate > 0
        top = 6 if pool == "prefill" else 4
        for cap in looks["capacity_qps"]:
            workers = cap / rate
            assert workers == pytest.approx(round(workers)) and 0 <= round(workers) <= top
        # The ramp rises from 4 QPS: the planner sees arrivals and predicts a rate.
        assert max(looks["observed_qps"]) > 3 and max(looks["predicted_qps"]) > 3
        # Each decision event carries the figures of the look it was made at.
        for e in a["events"]:
            if e["direction"] == "up":
                i = times.index(e["t_s"])
                assert e["predicted_qps"] == pytest.approx(looks["predicted_qps"][i])


def test_a_reactive_autoscaler_keeps_no_looks() -> None:
    summary = _summary("disagg-planner-ramp", ["duration_s=120"])
    scaled = [summary.get("autoscale"), *summary.get("pool_autoscale", {}).values()]
    assert any(scaled)
    assert all(PLANNER_CHART["looks"] not in a for a in scaled if a)


def test_the_script_reads_the_chart_from_the_vocabulary_not_by_name() -> None:
    session = ROOT / "static" / "reviewer" / "session"
    text = (session / "mechanisms.js").read_text("utf-8") + (session / "planner_looks.js").read_text("utf-8")
    assert "plannerChart" in text
    literal = re.compile(r"""["'`]([a-z_0-9]+)["'`]""")
    assert not set(literal.findall(text)) & {*LOOK_KEYS, "pool_autoscale", "looks"}
