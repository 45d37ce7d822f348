"""The numbers pass for a split model's pipeline group (``pipeline_*`` of
``[models.NAME.disaggregated]``): the share of requests it prefills, a mean long
prompt's prefill alone on one worker and over the group, the longest prompt either
prefills within the TTFT goal, and the load at which the group is busy all the time.
Every figure is read from the model's analysis (``fleet.pipeline``)."""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

from emulator.analysis.numbers import Adder, show
from emulator.scenario import Scenario

if TYPE_CHECKING:
    from emulator.analysis.fleet import ModelAnalysis

__all__ = ["pipeline_figures"]


def pipeline_figures(add: Adder, scenario: Scenario, m: ModelAnalysis) -> None:
    """The group's figures (none when the model has no group)."""
    p = m.pipeline
    if p is None:
        return
    name = m.name
    key = f"models.{name}.disaggregated"
    inputs = (f"{key}.pipeline_threshold_tokens", f"{key}.pipeline_workers", f"{key}.pipeline_chunk_tokens",
              f"{key}.pipeline_hop_s", f"{key}.pipeline_link_gb_s", *m.inputs)
    link = (f" + {p.act_s_per_token * p.chunk_tokens * 1e3:.3g} ms of a whole chunk's activations over the "
            "stage link" if p.act_s_per_token else "")
    group = f"{p.stages} stages, {p.chunk_tokens}-token chunks, {p.hop_s * 1e3:g} ms a hop{link}"
    add("pipeline_share", "Requests the pipeline group prefills", name, Fraction(p.share), "%",
        f"prompts of more than {p.threshold_tokens} tokens, {p.mean_prompt:.0f} on average", inputs)
    add("pipeline_alone_s", f"A {p.example_tokens}-token prompt (the mean long one) prefilled alone on one worker",
        name, Fraction(p.example_alone_s), "s", "its chunks one after another on one worker", inputs)
    add("pipeline_pipelined_s", "The same prompt over the idle pipeline group", name,
        Fraction(p.example_pipelined_s), "s",
        f"{group}: each chunk's fixed step cost whole on every stage, the rest a 1/{p.stages} share; "
        "chunk i on stage s after stage s - 1 and the hop, and after chunk i - 1 on stage s", inputs)
    goal = scenario.slo.ttft_s
    if goal is not None:
        add("pipeline_longest_alone_tokens", "Longest prompt one worker prefills alone within the TTFT goal", name,
            p.longest_alone, "tokens", f"{show(Fraction(p.beyond_alone), '%')} of prompts are longer: they miss "
            f"the {goal:g} s goal without the group even on an idle fleet", (*inputs, "slo.ttft_s"))
        add("pipeline_longest_tokens", "Longest prompt the group prefills alone within the TTFT goal", name,
            p.longest_pipelined, "tokens", f"{show(Fraction(p.beyond_pipelined), '%')} of prompts are longer; "
            f"{group}", (*inputs, "slo.ttft_s"))
    add("pipeline_stage_s", "A stage's busy time a long prompt", name, Fraction(p.stage_s), "s",
        "the sum of its chunks' stage costs, over the long prompts' sizes: the group takes one such prompt "
        "after another", inputs)
    if p.saturation_qps is not None:
        binds = ("it bounds the model's capacity: the long prompts are more than the 10% of requests goodput may "
                 "lose" if p.binds else
                 "past it the long prompts queue for the group and miss their goal, which leaves goodput above "
                 "90% (they are fewer than 10% of requests), so it does not bound the capacity")
        add("pipeline_saturation_qps", "Load at which the pipeline group is busy all the time", name,
            Fraction(p.saturation_qps), "QPS", f"1 / (share x stage time); {binds}", inputs)
