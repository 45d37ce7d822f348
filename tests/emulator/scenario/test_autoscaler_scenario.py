"""``[autoscaler]`` in the scenario format: every mistake is one line naming the key and
the fix, the table round-trips, and the CLI prints the scale events."""

from __future__ import annotations

import subprocess
import sys

import pytest
from scenarios import shortened

from emulator import Engine, Scenario, ScenarioError
from emulator.cli.run import autoscale_lines, format_summary
from emulator.scenario.presets import load_preset

BASE = load_preset("autoscaled-diurnal")

# (overrides, expected key path, text the message must contain)
MISTAKES = [
    (["autoscaler.min_workers=9"], "autoscaler.min_workers",
     "9 is more than max_workers (8); lower min_workers or raise max_workers"),
    (["autoscaler.metric=gpu"], "autoscaler.metric",
     '"gpu" is not a metric the autoscaler reads; choose one of queue, kv, running'),
    (["autoscaler.target=0"], "autoscaler.target", "must be greater than 0, not 0"),
    (["autoscaler.target=-3"], "autoscaler.target", "must be greater than 0, not -3"),
    (["autoscaler.metric=kv", "autoscaler.target=70"], "autoscaler.target",
     "70 is more than 1, and the kv metric is the fraction of the KV cache in use; give a fraction"),
    (["autoscaler.interval_s=0"], "autoscaler.interval_s", "must be greater than 0, not 0"),
    (["autoscaler.warmup_s=-1"], "autoscaler.warmup_s", "must be 0 or more, not -1"),
    (["autoscaler.cooldown_s=-0.5"], "autoscaler.cooldown_s", "must be 0 or more, not -0.5"),
    (["autoscaler.stabilization_s=-60"], "autoscaler.stabilization_s", "must be 0 or more"),
    (["autoscaler.max_workers=9"], "autoscaler.max_workers",
     "9 is more than the hosts can place: 1 chat workers now and room for 7 more of 2 adjacent "
     "units; lower max_workers to 8 or add hosts with free units"),
    (["autoscaler.max_workers=0"], "autoscaler.max_workers", "must be at least 1"),
    (["autoscaler.min_workers=2"], "autoscaler.min_workers",
     "2 is more than the 1 chat workers the hosts start with; place at least 2 chat workers"),
    (['hosts[0].workers=["chat@0", "chat@2"]', "autoscaler.max_workers=1"],
     "autoscaler.max_workers", "1 is fewer than the 2 chat workers the hosts start with"),
    (["autoscaler.model=big"], "autoscaler.model", '"big" names no model; models are chat'),
    (["autoscaler.targte=3"], "autoscaler.targte", "unknown key; known keys here: model, metric"),
    (["autoscaler.min_workers=1.5"], "autoscaler.min_workers", "1.5 is not a whole number"),
]


@pytest.mark.parametrize(("overrides", "path", "text"), MISTAKES, ids=lambda x: str(x)[:40])
def test_it_names_the_key_and_the_fix_in_one_line(overrides: list[str], path: str, text: str) -> None:
    with pytest.raises(ScenarioError) as err:
        BASE.with_overrides(overrides)
    message = str(err.value)
    assert "\n" not in message
    assert err.value.path == path
    assert message.startswith(f"{path}:")
    assert text in message


def test_it_refuses_a_missing_metric_and_a_static_or_unnamed_model() -> None:
    data = BASE.to_dict()
    del data["autoscaler"]["metric"]
    with pytest.raises(ScenarioError, match=r"^autoscaler\.metric: missing; choose one of queue, kv, running"):
        Scenario.from_dict(data)
    doc = load_preset("doc-as-written")
    with pytest.raises(ScenarioError, match=r"^autoscaler\.model: missing: the scenario has several models; name"):
        doc.with_overrides(["autoscaler.metric=queue"])
    with pytest.raises(ScenarioError, match=r"^autoscaler: model small batches statically; .*continuous"):
        doc.with_overrides(["autoscaler.model=small", "autoscaler.metric=queue", "autoscaler.target=2",
                            "autoscaler.max_workers=8"])


def test_it_fills_defaults_and_round_trips() -> None:
    s = BASE.with_overrides(["autoscaler.target=10", "autoscaler.metric=queue"])
    assert s.autoscaler is not None
    assert (s.autoscaler.target, s.autoscaler.metric, s.autoscaler.model) == (10, "queue", "chat")
    assert Scenario.from_dict(s.to_dict()) == s
    data = BASE.to_dict()
    data["autoscaler"] = {"metric": "running", "target": 8, "max_workers": 4}
    minimal = Scenario.from_dict(data).autoscaler
    assert minimal is not None
    assert (minimal.model, minimal.min_workers, minimal.interval_s, minimal.warmup_s) == ("chat", 1, 15, 60)
    assert (minimal.cooldown_s, minimal.stabilization_s) == (0, 0)
    # Without the table nothing is written back: older scenarios keep their spelling.
    assert "autoscaler" not in load_preset("continuous-comfortable").to_dict()


def test_the_cli_prints_the_scale_events() -> None:
    s = shortened(BASE, 3600)
    summary = Engine(s).run()
    assert summary.autoscale is not None
    text = format_summary(s.name, summary)
    assert "autoscaler (chat, running, target 12)" in text
    assert "1 waiting with no active worker" in text  # the wake-up from zero
    lines = autoscale_lines(summary.autoscale)
    ups = [e for e in summary.autoscale["events"] if e["direction"] == "up"]
    assert len([line for line in lines if " up " in line]) == min(len(ups), 40)
    again = type(summary).from_dict(summary.to_dict())
    assert again.autoscale == summary.to_dict()["autoscale"]


def test_a_collapsed_run_of_blocked_looks_is_one_row() -> None:
    auto = {
        "model": "m", "metric": "queue", "target": 2.0, "scaled_up": 0, "scaled_down": 0,
        "blocked": 3, "peak_workers": 1, "worker_s": 10.0,
        "workers_end": {"active": 1, "warming": 0, "draining": 0, "parked": 0, "dead": 0},
        "events": [
            {"t_s": t, "direction": "blocked", "worker": None, "reason": "no free block"}
            for t in (15.0, 30.0, 45.0)
        ],
    }
    lines = autoscale_lines(auto)
    assert lines[-1].split() == ["15-45", "blocked", "-", "-", "no", "free", "block", "(3", "looks)"]


def test_the_cli_exits_2_with_one_line_for_a_bad_autoscaler() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "emulator", "run", "autoscaled-diurnal", "--set", "autoscaler.min_workers=9"],
        capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: autoscaler.min_workers: 9 is more than max_workers (8); lower min_workers or raise max_workers"
    ]


def test_the_preset_times_out_requests_that_wake_a_fleet_scaled_to_zero() -> None:
    """Its finding, on its first hour: at night the fleet scales to zero and a request
    that wakes it waits for a 3-minute cold start, past the clients' 60 s timeout; with
    one worker kept warm nothing times out."""
    cold = Engine(shortened(BASE, 3600)).run()
    warm = Engine(shortened(BASE, 3600, "autoscaler.min_workers=1")).run()
    assert cold.autoscale is not None and warm.autoscale is not None
    wakes = [e for e in cold.autoscale["events"] if "no active worker" in e["reason"]]
    assert wakes and cold.timed_out >= len(wakes)
    assert warm.timed_out == 0 and warm.offered == cold.offered
    assert warm.autoscale["worker_s"] > cold.autoscale["worker_s"]
