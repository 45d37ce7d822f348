"""SLO-aware admission in the scenario: ``dispatcher.admission`` and
``dispatcher.admission_slack``, and the same keys of a ``[pools.NAME]`` table, read and
checked against the rest of the scenario.

``admission = "predicted_ttft"`` refuses an arrival at once when its predicted time to
first token exceeds ``admission_slack`` x ``slo.ttft_s`` (``emulator.sim.admission``
says how it is predicted). It needs the TTFT goal and continuous batching (the
prediction is made from the step model); ``admission_slack`` means nothing under the
default rule. Every check raises a one-line ``ScenarioError`` naming the key and the
fix.
"""

from __future__ import annotations

from typing import Any

from emulator.scenario.errors import ScenarioError
from emulator.scenario.specs import ModelSpec, PoolSpec, SloSpec

#: The admission rules: the waiting bound alone, or the predicted TTFT against the goal.
ADMISSIONS = ("queue_limit", "predicted_ttft")
#: The largest ``admission_slack``: a factor on the TTFT goal, not a time.
MAX_ADMISSION_SLACK = 10.0


def rule(t: Any, default: str | None) -> str | None:
    """The ``admission`` key of table ``t`` (a ``checks._Table``)."""
    if not t.has("admission"):
        return default
    value = t.text("admission")
    if value not in ADMISSIONS:
        raise ScenarioError(
            t.key("admission"), f'"{value}" is not an admission rule',
            'use "queue_limit" (only the waiting bound) or "predicted_ttft" (refuse an arrival '
            "whose predicted TTFT misses slo.ttft_s)",
        )
    return value


def slack(t: Any, default: float | None) -> float | None:
    """The ``admission_slack`` key of table ``t`` (a ``checks._Table``)."""
    if not t.has("admission_slack"):
        return default
    value = t.number("admission_slack", positive=True)
    if value > MAX_ADMISSION_SLACK:
        raise ScenarioError(
            t.key("admission_slack"), f"{value:g} is over the limit of {MAX_ADMISSION_SLACK:g}",
            "give a factor on slo.ttft_s, e.g. 1 (the goal itself) or 0.8 (a margin under it)",
        )
    return value


def check(
    dispatcher_rule: str, slack_given: bool, pools: tuple[PoolSpec, ...], models: dict[str, ModelSpec],
    batching: dict[str, str], slo: SloSpec,
) -> None:
    """The checks that need the whole scenario: the TTFT goal, continuous batching, a
    slack only with the predicted rule (``slack_given``: the dispatcher's, written and
    not the default 1), and a decode pool's rule only with a decider."""
    uses: list[tuple[str, str]] = []  # (key path, the model it applies to) of each predicted rule
    if dispatcher_rule == "predicted_ttft":
        uses.extend(("dispatcher.admission", name) for name in models)
    elif slack_given and not any(p.admission == "predicted_ttft" for p in pools):
        raise ScenarioError(
            "dispatcher.admission_slack",
            'applies to admission = "predicted_ttft", and no pool admits by it',
            'set dispatcher.admission = "predicted_ttft", or remove admission_slack',
        )
    roles = _roles(models)
    for p in pools:
        own = p.admission if p.admission is not None else dispatcher_rule
        if p.admission_slack is not None and own != "predicted_ttft":
            raise ScenarioError(
                f"pools.{p.name}.admission_slack",
                f'applies to admission = "predicted_ttft", and pool {p.name} admits by "{own}"',
                f'set [pools.{p.name}] admission = "predicted_ttft", or remove admission_slack',
            )
        if p.admission == "predicted_ttft":
            uses.append((f"pools.{p.name}.admission", roles[p.name]))
    for key, name in uses:
        if slo.ttft_s is None:
            raise ScenarioError(
                key, "predicts each arrival's TTFT against slo.ttft_s, which is not set",
                'set [slo] ttft_s (the TTFT goal in seconds), or admission = "queue_limit"',
            )
        if batching[name] != "continuous":
            raise ScenarioError(
                key,
                f"predicts TTFT from the step model of continuous batching, but model {name} "
                "batches statically",
                f'set batching = "continuous" in [worker] or [models.{name}.worker], or admission = '
                '"queue_limit"',
            )
    for p in pools:
        split = models[roles[p.name]].disaggregated
        assert split is not None, "a pool table is a split model's"
        decode = p.name == split.decode_workers
        if decode and p.admission == "predicted_ttft" and split.decider_threshold_tokens == 0:
            raise ScenarioError(
                f"pools.{p.name}.admission",
                f"judges the arrivals routed to pool {p.name}, and with decider_threshold_tokens = 0 "
                f"none is: every {roles[p.name]} request enters the prefill pool",
                f"set models.{roles[p.name]}.disaggregated.decider_threshold_tokens, or give the rule "
                f"to pool {split.prefill_workers}",
            )


def _roles(models: dict[str, ModelSpec]) -> dict[str, str]:
    """Each pool a split model names, with its model."""
    out: dict[str, str] = {}
    for name, m in models.items():
        if m.disaggregated is not None:
            out[m.disaggregated.prefill_workers] = name
            out[m.disaggregated.decode_workers] = name
    return out
