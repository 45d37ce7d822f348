"""The numbers pass of pipelined prefill: a lone long prompt's time over the group
against the engine's, the group's figures shown with a group and absent without, and
the prefill pool split into its other workers and the group."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from emulator import Engine
from emulator.analysis.fleet import analyse
from emulator.analysis.fleet.pipeline import cut_law, pipelined_alone_s, stage_costs
from emulator.analysis.fleet.steps import step_cost
from emulator.analysis.fleet.workload import SizeLaw
from emulator.analysis.numbers import compute
from emulator.scenario import Scenario
from emulator.scenario.presets import load_preset

PRESET = load_preset("mooncake-long-context-pipeline", max_requests=None)
OFF = PRESET.with_overrides(["models.chat.disaggregated.pipeline_threshold_tokens=0"], max_requests=None)
FIGURES = ("pipeline_share", "pipeline_alone_s", "pipeline_pipelined_s", "pipeline_longest_alone_tokens",
           "pipeline_longest_tokens", "pipeline_stage_s", "pipeline_saturation_qps")


def test_the_group_figures_are_shown_with_a_group_and_absent_without() -> None:
    report = compute(PRESET)
    for key in FIGURES:
        assert report.value(key, "chat") is not None, key
    assert float(report.value("pipeline_pipelined_s", "chat")) < float(report.value("pipeline_alone_s", "chat"))
    assert report.value("pipeline_longest_tokens", "chat") > report.value("pipeline_longest_alone_tokens", "chat")
    plain = compute(OFF)
    assert not any(plain.has(key, "chat") for key in FIGURES)
    assert "pipeline" not in analyse(OFF).models["chat"].to_dict()


def test_a_lone_long_prompt_over_the_group_takes_what_the_engine_takes(tmp_path: Path) -> None:
    prompt = 126_000
    trace = tmp_path / "one.jsonl"
    trace.write_text(f'{{"arrival_s": 0.0, "prompt_tokens": {prompt}, "output_tokens": 10}}\n')
    data = PRESET.to_dict()
    data["traffic"] = {"qps": 0.0, "trace": str(trace)}
    data["duration_s"] = 120
    got = Engine(Scenario.from_dict(data, max_requests=None)).run().per_model["chat"].to_dict()
    cost = step_cost(PRESET, "chat")
    split = PRESET.models["chat"].disaggregated
    assert split is not None
    piped = pipelined_alone_s(cost, prompt, split.pipeline_chunk_tokens, split.pipeline_workers, split.pipeline_hop_s)
    assert got["pools"]["prefill_ttft_s"]["mean"] == pytest.approx(piped, rel=1e-9)
    # The same prompt on one worker, as without the group: past the 30 s goal.
    assert float(cost.prefill_alone_s(prompt)) > 30 > piped
    # Its stage time is the whole prompt's work split three ways, the fixed cost kept.
    stages = stage_costs(cost, prompt, 8192, 3)
    chunks = math.ceil(prompt / 8192)
    base = PRESET.worker.step_base_s
    assert sum(stages) == pytest.approx(chunks * base + (float(cost.prefill_alone_s(prompt)) - chunks * base) / 3,
                                        rel=1e-12)


def test_the_prefill_pool_is_its_other_workers_plus_the_group() -> None:
    m = analyse(PRESET).models["chat"]
    p = m.pipeline
    assert p is not None and p.stages == 3
    law = PRESET.models["chat"]
    assert p.share == pytest.approx(1 - SizeLaw(law.tokens, law.tokens_cv).share_at_most(65536), rel=1e-12)
    assert p.saturation_qps == pytest.approx(1 / (p.share * p.stage_s), rel=1e-12)
    assert not p.binds  # 1.2 % of requests: fewer than goodput may lose
    prefill = m.pool("prefill")
    assert prefill is not None and prefill.workers == 8
    # The pool's capacity is what its five other workers serve of the shorter prompts.
    assert float(prefill.traffic_share) == pytest.approx(1 - p.share, rel=1e-12)
    assert "5 of 8 workers" in prefill.worker.how
    # Without the group, all eight serve every prompt: a different, lower figure here
    # (the long prompts' attention weighs on every worker).
    assert analyse(OFF).models["chat"].pipeline is None


def test_a_cut_law_keeps_the_mass_and_range_of_its_part() -> None:
    law = SizeLaw(10_000, 1.5)
    long = cut_law(law, 65536, math.inf)
    assert long is not None and long.rows is not None
    assert long.rows.min() > 65536
    share, first, _ = law.moments_between(65536, math.inf)
    assert long.mean == pytest.approx(first / share, rel=0.02)
    short = cut_law(law, 0, 65536)
    assert short is not None and short.rows.max() <= 65536
