"""The run view's mechanism charts: their metric names are the engine's, scale events
read back from frames, and fleets using prefix caching, disaggregated pools or an
autoscaler save and run from the web."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from review_data_fixtures import *  # noqa: F403
from runs_helpers import pick, play_saved_fleet, run_preset

from reviewer.views.mechanism_charts import (
    MECHANISM_CHARTS,
    MECHANISM_METRICS,
    MECHANISM_TOTALS,
    SCALE_EVENT_PATTERN,
)
from reviewer.views.vocabulary import vocabulary

ROOT = Path(__file__).resolve().parents[3]
PRESETS = ROOT / "emulator" / "scenario" / "presets"

# Each preset, shortened, and the mechanism heading whose charts its frames must fill.
SHORT_RUNS = {
    "prefix-heavy-chat": (("duration_s=20",), "Prefix caching"),
    "disagg-decode-undersized": (("duration_s=40",), "Prefill and decode pools"),
    "autoscaled-diurnal": (("duration_s=1200", "traffic.period_s=2400", "sample_s=10",
                            "autoscaler.warmup_s=60", "autoscaler.stabilization_s=120"), "Autoscaling"),
}


def _frames_and_summary(preset: str, overrides: tuple[str, ...]) -> tuple[list[dict], dict]:
    return run_preset(preset, overrides)


def _chart_keys(mechanism: str) -> set[str]:
    return {m["key"] for c in MECHANISM_CHARTS if c["mechanism"] == mechanism for m in c["metrics"]}


@pytest.mark.parametrize("preset", list(SHORT_RUNS))
def test_it_draws_only_metrics_the_engine_puts_in_that_mechanisms_frames(preset: str) -> None:
    overrides, mechanism = SHORT_RUNS[preset]
    frames, _ = _frames_and_summary(preset, overrides)
    keys = set(frames[-1]["m"])
    assert _chart_keys(mechanism) <= keys
    # The other mechanisms' metrics are absent, so their charts stay hidden.
    others = {k for c in MECHANISM_CHARTS if c["mechanism"] != mechanism
              for k in c.get("present_keys", [m["key"] for m in c["metrics"]])}
    assert others and not (others & keys)
    assert not ((set(MECHANISM_METRICS) - _chart_keys(mechanism)) & keys)
    # Each drawn metric has a value for the model in some frame (a chart never stays empty).
    for key in _chart_keys(mechanism):
        assert any(f["m"][key][0] is not None for f in frames), key


@pytest.mark.parametrize("preset", list(SHORT_RUNS))
def test_each_total_of_a_mechanism_is_a_number_in_its_runs_summary_and_absent_from_others(preset: str) -> None:
    overrides, mechanism = SHORT_RUNS[preset]
    _, summary = _frames_and_summary(preset, overrides)
    for total in MECHANISM_TOTALS:
        if total["scope"] == "pool":
            continue  # read per scaled pool, below
        where = summary if total["scope"] == "run" else summary["per_model"]["chat"]
        value = pick(where, total["path"])
        if total["mechanism"] == mechanism and not total.get("optional"):
            assert isinstance(value, int | float), total
        elif total["mechanism"] == mechanism:
            assert value is None or isinstance(value, int | float), total
        else:
            assert value is None, total
    assert "pool_autoscale" not in summary  # no preset here scales a pool


def test_each_scaled_pool_has_the_autoscaling_totals_of_a_whole_model() -> None:
    _, summary = _frames_and_summary("dynamo-planner-ramp", ("duration_s=60",))
    pooled = [t for t in MECHANISM_TOTALS if t["scope"] == "pool"]
    whole = [t for t in MECHANISM_TOTALS if t["scope"] == "run" and t["mechanism"] == "Autoscaling"]
    assert [(t["path"], t["label"]) for t in pooled] == [(t["path"][1:], t["label"]) for t in whole]
    assert "autoscale" not in summary and set(summary["pool_autoscale"]) == {"prefill", "decode"}
    for pool in summary["pool_autoscale"].values():
        for total in pooled:
            assert isinstance(pick(pool, total["path"]), int | float), total


def test_a_run_without_mechanisms_carries_none_of_their_metrics() -> None:
    frames, _ = _frames_and_summary("doc-as-written", ("duration_s=300",))
    assert not (set(MECHANISM_METRICS) & set(frames[-1]["m"]))
    assert "prefix_hit" not in frames[-1]["w"]


def test_the_spread_reads_the_per_worker_figure_the_engine_sends() -> None:
    frames, _ = _frames_and_summary("prefix-heavy-chat", ("duration_s=20",))
    [spread] = [c["spread"] for c in MECHANISM_CHARTS if "spread" in c]
    rates = frames[-1]["w"][spread["worker_key"]]
    assert len(rates) == len(frames[-1]["w"]["state"]) and all(r is None or 0 <= r <= 1 for r in rates)


def test_the_scale_event_pattern_reads_every_autoscaler_event_of_the_frames() -> None:
    overrides, _ = SHORT_RUNS["autoscaled-diurnal"]
    frames, summary = _frames_and_summary("autoscaled-diurnal", overrides)
    pattern = re.compile(SCALE_EVENT_PATTERN)
    parsed = [pattern.match(line) for f in frames for line in f["events"] if line.startswith("scale ")]
    assert parsed and all(parsed)
    events = summary["autoscale"]["events"]
    assert len(parsed) == len(events)
    for m, e in zip(parsed, events, strict=True):
        assert m is not None
        assert m.group(1) == e["direction"] and m.group(2) == summary["autoscale"]["model"]
        assert (int(m.group(3)) if m.group(3) else None) == e["worker"]
        assert m.group(5) == e["reason"]
    assert {"up", "ready", "down", "parked"} <= {e["direction"] for e in events}
    assert set(vocabulary()["mechanismCharts"]["scaleColours"]) >= {e["direction"] for e in events}


def test_the_scripts_never_spell_out_a_mechanism_metric() -> None:
    literal = re.compile(r"""["'`]([a-z_0-9]+)["'`]""")
    static = ROOT / "static" / "reviewer"
    assert len(list(static.rglob("*.js"))) > 20  # the scripts, in their folders
    found = {f"{p.name}: {w}" for p in sorted(static.rglob("*.js"))
             for w in literal.findall(p.read_text("utf-8")) if w in MECHANISM_METRICS}
    assert found == set()


@pytest.mark.django_db
def test_the_session_page_sends_the_mechanism_charts(open_review: Any, people: dict) -> None:
    import json

    from django.test import Client

    client = Client()
    client.force_login(people["owner"])
    page = client.get(f"/sessions/{open_review.pk}/").content.decode()
    config = json.loads(re.search(r'<script id="page-config" type="application/json">(.*?)</script>',
                                  page, re.S).group(1))
    assert config["mechanismCharts"]["charts"] == MECHANISM_CHARTS


# The keys each preset's TOML must carry, so the save below exercises them.
PRESET_KEYS = {
    "prefix-heavy-chat": ("[models.chat.prefixes]", "prefix_cache = true"),
    "disagg-decode-undersized": ("[models.chat.disaggregated]", 'pool = "prefill"', 'pool = "decode"'),
    "autoscaled-diurnal": ("[autoscaler]",),
}


@pytest.mark.django_db
@pytest.mark.usefixtures("redis_url")
@pytest.mark.parametrize("preset", list(SHORT_RUNS))
def test_a_fleet_config_using_the_mechanism_saves_and_runs_from_the_session(
    preset: str, api_as: Any, review_doc: Any, people: dict
) -> None:
    text = (PRESETS / f"{preset}.toml").read_text("utf-8")
    assert all(key in text for key in PRESET_KEYS[preset])
    owner = api_as("owner")
    saved = owner.post("/api/fleets/", {"name": preset, "toml": text, "doc": review_doc.pk}, format="json")
    assert saved.status_code == 201, saved.content
    # What was saved reads back with the mechanism's keys, and saves again unchanged.
    again = owner.patch(f"/api/fleets/{saved.json()['id']}/", {"toml": saved.json()["toml"]}, format="json")
    assert again.status_code == 200, again.content
    assert again.json()["scenario"] == saved.json()["scenario"]

    overrides, mechanism = SHORT_RUNS[preset]
    run, last = play_saved_fleet(owner, people["owner"], review_doc, saved.json()["id"], list(overrides))
    assert last is not None and _chart_keys(mechanism) <= set(last["m"])
    expected_summary_key = {"Prefix caching": "prefix_hit_rate", "Prefill and decode pools": "per_model",
                            "Autoscaling": "autoscale"}[mechanism]
    assert expected_summary_key in run.summary
    if mechanism == "Prefill and decode pools":
        assert run.summary["per_model"]["chat"]["pools"]["transfers"] > 0


@pytest.mark.django_db
@pytest.mark.parametrize("preset", list(SHORT_RUNS))
def test_a_fleet_config_given_as_a_scenario_object_keeps_the_mechanisms_keys(preset: str, api_as: Any) -> None:
    from emulator.scenario import load_scenario

    scenario = load_scenario(preset, max_requests=None).to_dict()
    saved = api_as("owner").post("/api/fleets/", {"name": preset, "scenario": scenario}, format="json")
    assert saved.status_code == 201, saved.content
    assert saved.json()["scenario"] == scenario
    assert all(key in saved.json()["toml"] for key in PRESET_KEYS[preset])


@pytest.mark.django_db
def test_a_bad_mechanism_key_is_refused_naming_it(api_as: Any) -> None:
    text = (PRESETS / "autoscaled-diurnal.toml").read_text("utf-8").replace('metric = "running"', 'metric = "gpu"')
    saved = api_as("owner").post("/api/fleets/", {"name": "bad", "toml": text}, format="json")
    assert saved.status_code == 400
    assert "autoscaler.metric" in " ".join(saved.json()["toml"])
