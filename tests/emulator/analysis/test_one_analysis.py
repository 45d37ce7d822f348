"""Every preset and both example fleet configs: the numbers pass, the CLI and placement
give the same capacity, headroom and floor figures, because they all read one analysis."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from emulator.analysis.fleet import analyse
from emulator.analysis.numbers import compute
from emulator.analysis.placement import PlacementError, make_problem
from emulator.analysis.placement.scenario import current_fleet, problem_args, type_name
from emulator.cli import main
from emulator.scenario import load_scenario
from emulator.scenario.presets import PRESETS

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = [*sorted(PRESETS), str(ROOT / "reviewer" / "review" / "example" / "chat-70b-fleet.toml")]


def _cli(*args: str) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*args, "--json"]) == 0
    return json.loads(out.getvalue())


@pytest.mark.parametrize("name", CONFIGS, ids=[Path(n).stem for n in CONFIGS])
def test_numbers_cli_and_placement_agree(name):
    scenario = load_scenario(name, max_requests=None)
    a = analyse(scenario)
    stored = a.to_dict()
    report = compute(scenario, a)
    # The CLI prints the same analysis the numbers pass is computed from.
    printed = _cli("numbers", name)
    assert printed["analysis"] == stored
    assert printed["figures"] == [f.to_dict() for f in report.figures]
    # The figures say what the analysis says.
    for model, m in a.models.items():
        assert report.value("capacity_qps", model) == m.capacity_qps
        assert report.value("capacity_one_host_lost_qps", model) == (
            m.worst_loss.capacity_qps[model] if m.worst_loss else None) or m.worst_loss is None
        if m.batching == "continuous":
            assert report.value("ttft_floor_s", model) == m.floors["ttft_s"]
            assert report.value("tpot_floor_s", model) == m.floors["tpot_s"]
    if a.losses:
        assert report.value("capacity_one_host_lost_qps") == a.worst_loss.fleet_qps
    # Placement's per-worker capacity and its cases are the analysis's.
    try:
        args = problem_args(scenario, a)
    except PlacementError:
        assert len({u for _, u, _ in scenario.expanded_hosts()}) > 1  # only hosts of mixed sizes
        return
    problem = make_problem(**args)
    fleet = current_fleet(problem, scenario).to_dict(problem)
    for model, m in a.models.items():
        for pool in m.pools:
            kind = type_name(model, pool.name, m.split)
            per = pool.worker.qps / pool.traffic_share if m.split else pool.worker.qps
            if m.split and pool.role == "decode":
                per = min(per, 1 / (m.transfer_s * (1 - m.decode_direct_share)))
            assert args["qps_per_worker"][kind] == per
        if m.autoscaler is None:
            assert fleet["cases"][0]["model_capacity"][model] == pytest.approx(float(m.capacity_qps), rel=1e-12)
    by_host = {h.host: h for h in a.losses}
    for case in fleet["cases"][1:]:
        host = int(case["failure"].split(":")[1])
        for model, m in a.models.items():
            if m.autoscaler is None:
                assert case["model_capacity"][model] == pytest.approx(float(by_host[host].capacity_qps[model]),
                                                                      rel=1e-12, abs=1e-12)
    placed = _cli("place", "--scenario", name)
    assert placed["current"]["cases"] == fleet["cases"]
    # (An autoscaled model's workers are placed again elsewhere: placement ranks its
    # starting layout, the analysis counts what the autoscaler can bring back.)
    fixed = {n for n, m in a.models.items() if m.autoscaler is None}
    down = {m for h in a.losses for m in h.down} & fixed
    assert set(placed["current"]["models_down_with"]) & fixed == down
