"""Pipelined prefill in the scenario: the ``pipeline_*`` keys of
``[models.NAME.disaggregated]``, read and checked against the rest of the scenario.

``pipeline_threshold_tokens`` above 0 turns it on: the last ``pipeline_workers`` (2 or
more) workers of the model's prefill pool form a pipeline group reserved for prompts
longer than the threshold (``emulator.sim.workers.pipeline`` runs it). The group is a
fixed set of the pool's workers, so the pool must keep at least one other worker for
the shorter prompts and may not be autoscaled, and SLO-aware admission, whose
prediction knows one worker's steps only, may not judge the pool. Every check raises
a one-line ``ScenarioError`` naming the key and the fix.
"""

from __future__ import annotations

from typing import Any

from emulator.scenario import catalog
from emulator.scenario.errors import ScenarioError
from emulator.scenario.specs import DispatcherSpec, HostGroup, ModelSpec, PoolSpec

#: The pipeline's keys besides the threshold that turns it on.
_OTHERS = ("pipeline_workers", "pipeline_chunk_tokens", "pipeline_hop_s", "pipeline_link_gb_s")


def keys(t: Any) -> dict[str, Any]:
    """The ``pipeline_*`` keys of a ``[models.NAME.disaggregated]`` table ``t`` (a
    ``checks._Table``), as ``DisaggSpec`` fields."""
    threshold = t.integer("pipeline_threshold_tokens", 0, low=0)
    if threshold == 0:
        # A threshold written as 0 turns a written group off (``--set
        # ...pipeline_threshold_tokens=0``); the group's keys without any threshold are a
        # mistake.
        for key in _OTHERS:
            if t.has(key) and not t.has("pipeline_threshold_tokens"):
                raise ScenarioError(
                    t.key(key),
                    "applies to pipelined prefill, which is off without pipeline_threshold_tokens",
                    "give pipeline_threshold_tokens (the prompt length above which a prompt is "
                    f"pipelined, e.g. 32768), or remove {key}",
                )
        return {}
    if not t.has("pipeline_workers"):
        raise ScenarioError(
            t.key("pipeline_workers"),
            "missing: pipelined prefill needs the number of prefill workers in its group",
            "give pipeline_workers = 2 or more (each holds that share of the layers)",
        )
    stages = t.integer("pipeline_workers")
    if stages < 2:
        raise ScenarioError(
            t.key("pipeline_workers"),
            f"must be at least 2, not {stages}: one worker alone is no pipeline",
            "set pipeline_workers = 2 or more, or remove pipeline_threshold_tokens",
        )
    hop = t.number("pipeline_hop_s", 0.0)
    if hop < 0:
        raise ScenarioError(
            t.key("pipeline_hop_s"), f"must be 0 or more, not {hop:g}",
            "give the seconds a chunk's activations take from one stage to the next, e.g. 0.002",
        )
    link = t.number("pipeline_link_gb_s", 0.0)
    if link < 0:
        raise ScenarioError(
            t.key("pipeline_link_gb_s"), f"must be 0 or more, not {link:g}",
            "give the GB/s a chunk's activations cross a stage boundary at, e.g. 50, or 0 for none",
        )
    return {
        "pipeline_threshold_tokens": threshold,
        "pipeline_workers": stages,
        "pipeline_chunk_tokens": t.integer("pipeline_chunk_tokens", 0, low=0),
        "pipeline_hop_s": float(hop),
        "pipeline_link_gb_s": float(link),
    }


def activation_bytes(model: ModelSpec) -> float | None:
    """Bytes of one token's activations at a stage boundary: hidden size x dtype bytes
    (None: the model's hidden size is not known)."""
    if model.arch is None:
        return None
    hidden = model.arch.shape().hidden
    return None if hidden is None else float(hidden * model.arch.dtype_bytes)


def prefill_pool_size(name: str, pool: str, hosts: tuple[HostGroup, ...]) -> int:
    """Model ``name``'s workers in pool ``pool``."""
    return sum(
        g.count * sum(1 for slot in g.workers if slot.model == name) for g in hosts if g.pool == pool
    )


def check_scenario(
    models: dict[str, ModelSpec], hosts: tuple[HostGroup, ...], pools: tuple[PoolSpec, ...],
    dispatcher: DispatcherSpec, budgets: dict[str, int],
) -> None:
    """The checks that need the whole scenario: the group's size against the prefill
    pool, a chunk within a step's token budget (``budgets``: each model's
    ``max_batched_tokens``), a pushing policy, no autoscaler on that pool, and no
    predicted-TTFT admission there."""
    given = {p.name: p for p in pools}
    for name, m in models.items():
        split = m.disaggregated
        if split is None or not split.pipeline_threshold_tokens:
            continue
        if split.pipeline_link_gb_s and activation_bytes(m) is None:
            raise ScenarioError(
                f"models.{name}.disaggregated.pipeline_link_gb_s",
                "a chunk's activations need the model's hidden size, and model "
                f"{name} has none",
                f'add [models.{name}.arch] (e.g. model = "Llama-2-70B", or hidden_size), or give '
                "pipeline_hop_s alone",
            )
        pool = split.prefill_workers
        size = prefill_pool_size(name, pool, hosts)
        if split.pipeline_workers >= size:
            raise ScenarioError(
                f"models.{name}.disaggregated.pipeline_workers",
                f"the group takes {split.pipeline_workers} of pool {pool}'s {size} {name} workers "
                "and would leave none for the prompts at or under pipeline_threshold_tokens",
                f"set pipeline_workers to at most {size - 1}, or give pool {pool} more hosts",
            )
        if split.pipeline_chunk_tokens > budgets[name]:
            raise ScenarioError(
                f"models.{name}.disaggregated.pipeline_chunk_tokens",
                f"{split.pipeline_chunk_tokens} is more than a step's token budget, "
                f"max_batched_tokens = {budgets[name]}",
                f"give at most {budgets[name]}, or 0 for the budget itself",
            )
        spec = given.get(pool)
        policy = spec.policy if spec is not None and spec.policy is not None else dispatcher.policy
        if policy in catalog.policies_with("holds_requests"):
            key = f"pools.{pool}.policy" if spec is not None and spec.policy is not None else "dispatcher.policy"
            raise ScenarioError(
                key,
                f'"{policy}" holds requests for the workers to take, and pool {pool}\'s pipeline '
                "group is pushed its long prompts",
                f'give pool {pool} a pushing policy, e.g. [pools.{pool}] policy = "least_loaded"',
            )
        if spec is not None and spec.autoscaler is not None:
            raise ScenarioError(
                f"pools.{pool}.autoscaler",
                f"pool {pool} holds {name}'s pipeline group, a fixed set of its workers that an "
                "autoscaler would park",
                f"remove [pools.{pool}.autoscaler], or models.{name}.disaggregated.pipeline_threshold_tokens",
            )
        own = spec.admission if spec is not None and spec.admission is not None else None
        rule = own if own is not None else dispatcher.admission
        if rule == "predicted_ttft":
            key = f"pools.{pool}.admission" if own is not None else "dispatcher.admission"
            raise ScenarioError(
                key,
                f'"predicted_ttft" predicts one prefill worker\'s steps, and pool {pool} pipelines '
                f"{name}'s long prompts over {split.pipeline_workers} workers",
                f'use admission = "queue_limit" for pool {pool}, or remove '
                f"models.{name}.disaggregated.pipeline_threshold_tokens",
            )
