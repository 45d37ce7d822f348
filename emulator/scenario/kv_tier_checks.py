"""Checks of the KV tier keys: ``[[worker.kv_tiers]]`` (and a model's
``[[models.NAME.worker.kv_tiers]]``), the lower tiers under the GPU prefix cache.

Each raises ``ScenarioError`` with the key path and the fix; ``checks`` calls
``tiers`` while it reads a worker table and ``check_scenario`` once the models are read.

A tier with ``shared = true`` is one store for every worker of the model's pool (a
split model's prefill pool and decode pool each have their own; a model in no pool,
one for all its workers), so it sits below every private tier: a list holds its
private tiers first, then its shared ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emulator.scenario.errors import ScenarioError
from emulator.scenario.specs import KvTierSpec

if TYPE_CHECKING:
    from emulator.scenario.specs import ModelSpec, WorkerSpec

#: Tier kinds, fastest first: a list of tiers must follow this order.
TIER_NAMES = ("cpu", "ssd", "remote")
_KEYS = tuple(KvTierSpec.__dataclass_fields__)
_EXAMPLE = '[[worker.kv_tiers]] name = "cpu", capacity_tokens = 2000000, bandwidth_gb_s = 25'


def tiers(raw: Any, path: str) -> tuple[KvTierSpec, ...]:
    """``kv_tiers``: a list of tier tables, fastest first, each name at most once
    (``[]``: none, so that ``--set worker.kv_tiers=[]`` turns a file's tiers off)."""
    # cycle: checks imports this module at load time
    from emulator.scenario.checks import _Table

    if not isinstance(raw, list):
        raise ScenarioError(path, "must be a list of tier tables", f"write {_EXAMPLE}")
    out: list[KvTierSpec] = []
    for i, item in enumerate(raw):
        t = _Table(item, f"{path}[{i}]", _KEYS)
        name = t.choice("name", TIER_NAMES)
        if out and TIER_NAMES.index(name) <= TIER_NAMES.index(out[-1].name):
            raise ScenarioError(
                t.key("name"), f'"{name}" comes after "{out[-1].name}"',
                f"list each tier once, fastest first: {', '.join(TIER_NAMES)}",
            )
        shared = t.flag("shared", False)
        if out and out[-1].shared and not shared:
            raise ScenarioError(
                t.key("shared"), f'"{name}" is private but comes after the shared "{out[-1].name}"',
                "a shared tier sits below every private tier: list private tiers first, "
                "or set shared = true here too",
            )
        if t.has("capacity_tokens") == t.has("capacity_gb"):
            raise ScenarioError(
                t.path, "needs exactly one of capacity_tokens and capacity_gb",
                "give the tier's size in KV tokens, or in GB (with the model's arch)",
            )
        tokens = t.integer("capacity_tokens", low=1) if t.has("capacity_tokens") else None
        gb = t.number("capacity_gb", positive=True) if t.has("capacity_gb") else None
        out.append(KvTierSpec(
            name=name, capacity_tokens=tokens, capacity_gb=gb,
            bandwidth_gb_s=t.number("bandwidth_gb_s", 25.0, positive=True),
            shared=shared,
        ))
    return tuple(out)  # (an empty list: no tiers, as without the key)


def tier_tokens(tier: KvTierSpec, bytes_per_token: float) -> int:
    """The tier's capacity in KV tokens."""
    if tier.capacity_tokens is not None:
        return tier.capacity_tokens
    assert tier.capacity_gb is not None
    return int(tier.capacity_gb * 1e9 // bytes_per_token)


def check_scenario(
    models: dict[str, ModelSpec], resolved: dict[str, WorkerSpec],
    bytes_per_token: dict[str, float | None],
) -> None:
    """Tiers hold prefix blocks (they need ``prefix_cache``); their bandwidth (and a
    size in GB) is turned into tokens with the model's KV bytes per token."""
    for name, m in models.items():
        w = resolved[name]
        if not w.kv_tiers:
            continue
        key = (
            f"models.{name}.worker.kv_tiers"
            if "kv_tiers" in dict(m.worker_overrides) else "worker.kv_tiers"
        )
        if not w.prefix_cache:
            raise ScenarioError(
                key, f"holds evicted prefix blocks, but model {name} has no prefix cache",
                "set prefix_cache = true (continuous batching), or remove kv_tiers",
            )
        if bytes_per_token[name] is None:
            raise ScenarioError(
                key, f"needs model {name}'s KV bytes per token to turn GB into tokens",
                f"give models.{name}.arch (or disaggregated.kv_bytes_per_token)",
            )
