"""The SLO planner's keys on an autoscaler table: each mistake is one line naming the
key and the fix, the keys round-trip, and reactive autoscalers are written as before."""

from __future__ import annotations

import pytest

from emulator import Scenario, ScenarioError
from emulator.scenario.presets import load_preset

BASE = load_preset("disagg-planner-ramp")
PRE, DEC = "pools.prefill.autoscaler", "pools.decode.autoscaler"
SLO_PRE = [f"{PRE}.metric=slo", f"-{PRE}.target"]


def build(overrides: list[str]) -> Scenario:
    """The preset with ``KEY=VALUE`` set (numbers read as numbers) and ``-KEY`` removed."""
    data = BASE.to_dict()
    for o in overrides:
        path, _, value = o.lstrip("-").partition("=")
        *where, last = path.split(".")
        table = data
        for part in where:
            table = table[part]
        if o.startswith("-"):
            del table[last]
            continue
        try:
            table[last] = float(value)
        except ValueError:
            table[last] = value
    return Scenario.from_dict(data)

MISTAKES = [
    ([f"{PRE}.metric=slo"], f"{PRE}.target", "is for the reactive metrics"),
    ([f"{PRE}.target_ttft_s=1"], f"{PRE}.target_ttft_s",
     'is a key of the SLO planner, and metric is "running"; set metric = "slo"'),
    (SLO_PRE, f"{PRE}.target_ttft_s", "missing: metric \"slo\" needs a per-worker rate; give target_ttft_s"),
    ([*SLO_PRE, f"{PRE}.target_tbt_s=0.05"], f"{PRE}.target_tbt_s",
     "does not apply here: only a decode pool is held to its time between tokens; use target_ttft_s"),
    ([f"{DEC}.metric=slo", f"-{DEC}.target", f"{DEC}.target_ttft_s=2"], f"{DEC}.target_ttft_s",
     "a decode pool is held to its time between tokens; use target_tbt_s"),
    ([*SLO_PRE, f"{PRE}.target_ttft_s=0"], f"{PRE}.target_ttft_s", "must be greater than 0, not 0"),
    ([*SLO_PRE, f"{PRE}.per_worker_qps=2", f"{PRE}.target_ttft_s=1"], f"{PRE}.target_ttft_s",
     "is given with per_worker_qps, and the planner takes one"),
    ([*SLO_PRE, f"{PRE}.per_worker_qps=2", f"{PRE}.predictor=arima"], f"{PRE}.predictor",
     '"arima" is not one of moving_average, linear_trend'),
    ([*SLO_PRE, f"{PRE}.per_worker_qps=2", f"{PRE}.window_s=0"], f"{PRE}.window_s",
     "must be greater than 0, not 0"),
    ([*SLO_PRE, f"{PRE}.per_worker_qps=2", f"{PRE}.horizon_s=-1"], f"{PRE}.horizon_s", "must be 0 or more"),
    ([*SLO_PRE, f"{PRE}.per_worker_qps=2", f"{PRE}.season_s=60"], f"{PRE}.season_s",
     "60 s is not longer than the lead (60 s)"),
    ([f"{PRE}.season_s=600"], f"{PRE}.season_s", 'is a key of the SLO planner, and metric is "running"'),
    ([*SLO_PRE, f"{PRE}.per_worker_qps=2", f"{PRE}.predictor=seasonal"], f"{PRE}.season_s",
     'missing: predictor "seasonal" needs the period of the load; give the seconds after which the load repeats'),
    # The lead is warmup_s (60 s here) and half the default window 30 s: 90 s is too short.
    ([*SLO_PRE, f"{PRE}.per_worker_qps=2", f"{PRE}.predictor=seasonal", f"{PRE}.season_s=90"], f"{PRE}.season_s",
     "90 s is not longer than the lead (60 s) plus half the window (30 s)"),
    ([*SLO_PRE, f"{PRE}.per_worker_qps=2", f"{PRE}.predictor=seasonal", f"{PRE}.season_s=200",
      f"{PRE}.horizon_s=180"], f"{PRE}.season_s", "give a period longer than 210 s"),
]


def test_a_seasonal_planner_reads_its_period() -> None:
    s = build([*SLO_PRE, f"{PRE}.per_worker_qps=2", f"{PRE}.predictor=seasonal", f"{PRE}.season_s=91"])
    spec = s.pools[0].autoscaler
    assert s.pools[0].name == "prefill"
    assert spec is not None and (spec.predictor, spec.season_s) == ("seasonal", 91.0)
    assert Scenario.from_dict(s.to_dict()) == s
    plain = build([*SLO_PRE, f"{PRE}.per_worker_qps=2"]).to_dict()["pools"]["prefill"]["autoscaler"]
    assert "season_s" not in plain
    # The load's period may stay while the file compares another predictor.
    kept = build([*SLO_PRE, f"{PRE}.per_worker_qps=2", f"{PRE}.predictor=linear_trend", f"{PRE}.season_s=600"])
    assert kept.pools[0].autoscaler is not None and kept.pools[0].autoscaler.season_s == 600.0


@pytest.mark.parametrize(("overrides", "path", "text"), MISTAKES, ids=lambda x: str(x)[:50])
def test_it_names_the_key_and_the_fix_in_one_line(overrides: list[str], path: str, text: str) -> None:
    with pytest.raises(ScenarioError) as err:
        build(overrides)
    message = str(err.value)
    assert "\n" not in message
    assert err.value.path == path
    assert text in message


def test_it_fills_the_planner_defaults_and_round_trips() -> None:
    s = build([*SLO_PRE, f"{PRE}.target_ttft_s=1.5", f"{DEC}.metric=slo", f"-{DEC}.target",
                             f"{DEC}.target_tbt_s=0.05", f"{DEC}.predictor=linear_trend", f"{DEC}.horizon_s=30"])
    pre, dec = (p.autoscaler for p in s.pools)
    assert pre is not None and dec is not None
    assert (pre.metric, pre.target, pre.target_ttft_s, pre.predictor, pre.window_s) == ("slo", 0, 1.5,
                                                                                          "moving_average", 60)
    assert pre.horizon_s is None and pre.lead_s == pre.warmup_s
    assert (dec.target_tbt_s, dec.predictor, dec.lead_s) == (0.05, "linear_trend", 30)
    assert Scenario.from_dict(s.to_dict()) == s


def test_a_reactive_autoscaler_writes_no_planner_key() -> None:
    written = BASE.to_dict()["pools"]
    for pool in written.values() if isinstance(written, dict) else written:
        assert not {"predictor", "window_s", "horizon_s", "per_worker_qps"} & set(pool["autoscaler"])
