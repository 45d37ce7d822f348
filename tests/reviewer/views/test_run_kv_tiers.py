"""Lower KV tiers on the run page and in the fleet editor: their charts draw the
engine's own frame metrics for runs with tiers and none without, their totals read the
summary, and a fleet config with ``[[worker.kv_tiers]]`` is saved and run from the web."""

from __future__ import annotations

from pathlib import Path

from reviewer.views.mechanism_charts import MECHANISM_CHARTS, MECHANISM_METRICS, MECHANISM_TOTALS

ROOT = Path(__file__).resolve().parents[3]
PRESET = ROOT / "emulator" / "scenario" / "presets" / "mooncake-dram-tier.toml"
MECHANISM = "KV tiers"


def _run(overrides: list[str]) -> tuple[list[dict], dict]:
    from emulator.scenario import load_scenario
    from emulator.sim.engine import Engine

    sc = load_scenario("mooncake-dram-tier", max_requests=None).with_overrides(overrides, max_requests=None)
    engine = Engine(sc, seed=1)
    frames = [f.to_dict() for f in engine.advance_to(sc.duration_s)]
    return frames, engine.summary().to_dict()


def _charts() -> list[dict]:
    return [c for c in MECHANISM_CHARTS if c["mechanism"] == MECHANISM]


def _pick(data: object, path: list[str]) -> object:
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def test_its_charts_draw_the_tier_metrics_the_engine_fills_and_its_totals_are_numbers() -> None:
    frames, summary = _run(["duration_s=60"])
    keys = {m["key"] for c in _charts() for m in c["metrics"]}
    assert {"tier_hit_rate", "tier_load_s"} <= keys and {"tier_hit_rate", "tier_load_s"} <= set(MECHANISM_METRICS)
    for key in keys:
        assert any(f["m"][key][0] is not None for f in frames), key
    # The tier is hit in this run: some frame loads prefix KV from DRAM, taking time.
    assert any((f["m"]["tier_hit_rate"][0] or 0) > 0 for f in frames)
    assert sum(f["m"]["tier_load_s"][0] or 0 for f in frames) > 0
    model = summary["per_model"]["chat"]
    shown = {tuple(t["path"]): _pick(model, t["path"]) for t in MECHANISM_TOTALS if t["mechanism"] == MECHANISM}
    for path in (("kv_tiers", "gpu", "hit_rate"), ("kv_tiers", "cpu", "hit_rate"), ("kv_tiers", "cpu", "load_s")):
        assert isinstance(shown[path], int | float), path
    # A tier the fleet has not got is left out (its path does not resolve).
    assert shown[("kv_tiers", "ssd", "hit_rate")] is None


def test_a_run_without_tiers_shows_none_of_their_charts_or_totals() -> None:
    frames, summary = _run(["duration_s=30", "worker.kv_tiers=[]"])
    present = {k for c in _charts() for k in c.get("present_keys", [m["key"] for m in c["metrics"]])}
    assert present and not (present & set(frames[-1]["m"]))
    assert "prefix_hit_rate" in frames[-1]["m"]  # the GPU cache's own chart stays
    assert "kv_tiers" not in summary["per_model"]["chat"]
