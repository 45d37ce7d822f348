"""Checks of the prefix-caching keys: ``[models.NAME.prefixes]``, ``worker.prefix_cache``
and ``worker.block_tokens``, ``[dispatcher.scorers]`` of the ``weighted`` policy, and
the router's prefix index (``dispatcher.prefix_index``, ``prefix_index_capacity``,
``prefix_index_ttl_s``).

Each raises ``ScenarioError`` with the key path and the fix, like ``checks``; that
module calls these while it reads a scenario.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emulator.scenario import catalog, kv_tier_checks
from emulator.scenario.errors import ScenarioError
from emulator.scenario.specs import (
    DEFAULT_SCORERS,
    PREFIX_INDEXES,
    SCORERS,
    DispatcherSpec,
    PoolSpec,
    PrefixSpec,
)
from emulator.scenario.traces import load_trace

if TYPE_CHECKING:
    from emulator.scenario.checks import _Table
    from emulator.scenario.specs import ModelSpec, Traffic, WorkerSpec

#: Prefix groups per model: each group costs the Zipf table a number; more is a mistake.
MAX_PREFIX_GROUPS = 1_000_000
#: The most (worker, prefix group) pairs an estimated prefix index may remember.
MAX_INDEX_CAPACITY = 10_000_000


def prefixes(raw: Any, path: str) -> PrefixSpec:
    """``[models.NAME.prefixes]``: ``groups``, ``prefix_tokens`` and ``zipf_s``."""
    # cycle: checks imports this module at load time
    from emulator.scenario.checks import _Table

    t = _Table(raw, path, tuple(PrefixSpec.__dataclass_fields__))
    groups = t.integer("groups", low=1)
    if groups > MAX_PREFIX_GROUPS:
        raise ScenarioError(
            t.key("groups"), f"{groups:,} is more than {MAX_PREFIX_GROUPS:,} groups",
            "use fewer groups (a Zipf tail that long is nearly all one-off prompts)",
        )
    tokens = t.integer("prefix_tokens")
    if tokens <= 0:
        raise ScenarioError(
            t.key("prefix_tokens"), f"must be greater than 0, not {tokens}",
            "give the shared prefix's length in tokens, e.g. 800",
        )
    return PrefixSpec(
        groups=groups, prefix_tokens=tokens, zipf_s=t.number("zipf_s", 1.1, positive=True)
    )


def worker_keys(t: _Table, base: WorkerSpec) -> dict[str, Any]:
    """``prefix_cache``, ``block_tokens`` and ``kv_tiers`` of a worker table."""
    return {
        "prefix_cache": t.flag("prefix_cache", base.prefix_cache),
        "block_tokens": t.integer("block_tokens", base.block_tokens, low=1),
        "kv_tiers": (
            kv_tier_checks.tiers(t.raw("kv_tiers"), t.key("kv_tiers"))
            if t.has("kv_tiers") else base.kv_tiers
        ),
    }


def index_keys(t: _Table) -> dict[str, Any]:
    """``prefix_index``, ``prefix_index_capacity`` and ``prefix_index_ttl_s`` of the
    ``[dispatcher]`` table."""
    base = DispatcherSpec()
    kind = t.text("prefix_index", base.prefix_index)
    if kind not in PREFIX_INDEXES:
        raise ScenarioError(
            t.key("prefix_index"), f'"{kind}" is not a prefix index',
            'use "exact" (read every worker\'s cache) or "estimated" (the router\'s record of its routings)',
        )
    capacity = t.raw("prefix_index_capacity", base.prefix_index_capacity)
    if isinstance(capacity, float) and capacity.is_integer():
        capacity = int(capacity)
    if isinstance(capacity, bool) or not isinstance(capacity, int) or not 1 <= capacity <= MAX_INDEX_CAPACITY:
        raise ScenarioError(
            t.key("prefix_index_capacity"), f"{capacity!r} is not a whole number from 1 to {MAX_INDEX_CAPACITY:,}",
            "give how many (worker, prefix group) pairs the router remembers, e.g. 4096",
        )
    ttl = t.raw("prefix_index_ttl_s", base.prefix_index_ttl_s)
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl < float("inf"):
        raise ScenarioError(
            t.key("prefix_index_ttl_s"), f"{ttl!r} is not a number of seconds above 0",
            "give how long the router trusts a routing it recorded, e.g. 300",
        )
    return {"prefix_index": kind, "prefix_index_capacity": capacity, "prefix_index_ttl_s": float(ttl)}


def pool_index_keys(t: _Table) -> dict[str, Any]:
    """The index keys a ``[pools.NAME]`` table sets (the others stay None: the
    dispatcher's)."""
    values = index_keys(t)
    return {k: v for k, v in values.items() if t.has(k)}


def _scores_prefix(policy: str, scorers: tuple[tuple[str, float], ...]) -> bool:
    """``policy`` (with ``scorers``, when it sums them) counts the prefix score."""
    if policy in catalog.policies_with("uses_scorers"):
        return bool(dict(scorers or DEFAULT_SCORERS).get("prefix", 0.0))
    return policy in catalog.policies_with("needs_prefix_caches")


def check_pool_index(
    pool: PoolSpec, policy: str, scorers: tuple[tuple[str, float], ...], dispatcher: DispatcherSpec
) -> None:
    """A pool's own index keys: as the dispatcher's, against the pool's policy."""
    path = f"pools.{pool.name}"
    kind = pool.prefix_index if pool.prefix_index is not None else dispatcher.prefix_index
    for key in ("prefix_index_capacity", "prefix_index_ttl_s"):
        if getattr(pool, key) is not None and kind != "estimated":
            raise ScenarioError(
                f"{path}.{key}", f'applies only to prefix_index = "estimated", not "{kind}"',
                f'set [pools.{pool.name}] prefix_index = "estimated", or remove {key}',
            )
    if pool.prefix_index == "estimated" and not _scores_prefix(policy, scorers):
        raise ScenarioError(
            f"{path}.prefix_index", f'applies to a policy that scores prefixes, and pool {pool.name} '
            f'routes by "{policy}" without one',
            f'give [pools.{pool.name}] policy = "prefix_aware" (or weighted with a prefix weight), '
            "or remove prefix_index",
        )


def check_index(dispatcher: DispatcherSpec) -> None:
    """The index keys apply only where the prefix scorer counts; capacity and staleness
    only to the estimated index."""
    base = DispatcherSpec()
    kind = dispatcher.prefix_index
    for key in ("prefix_index_capacity", "prefix_index_ttl_s"):
        if getattr(dispatcher, key) != getattr(base, key) and kind != "estimated":
            raise ScenarioError(
                f"dispatcher.{key}", f'applies only to prefix_index = "estimated", not "{kind}"',
                f'set dispatcher.prefix_index = "estimated", or remove {key}',
            )
    if kind == base.prefix_index:
        return
    policy = dispatcher.policy
    if policy in catalog.policies_with("uses_scorers"):
        weights = dict(dispatcher.scorers or DEFAULT_SCORERS)
        if not weights.get("prefix", 0.0):
            raise ScenarioError(
                "dispatcher.prefix_index", "applies to the prefix scorer, whose weight is 0 here",
                "give [dispatcher.scorers] prefix a weight above 0, or remove prefix_index",
            )
    elif policy not in catalog.policies_with("needs_prefix_caches"):
        raise ScenarioError(
            "dispatcher.prefix_index", f'applies to a policy that scores prefixes, not "{policy}"',
            'set dispatcher.policy = "prefix_aware" or "weighted", or remove prefix_index',
        )


def scorers(raw: Any, path: str) -> tuple[tuple[str, float], ...]:
    """``[dispatcher.scorers]``: a weight of 0 or more for each named scorer."""
    if not isinstance(raw, dict):
        raise ScenarioError(
            path, "must be a table of scorer weights", "write scorers = { prefix = 3, queue = 2 }"
        )
    out: list[tuple[str, float]] = []
    for name, weight in raw.items():
        key = f"{path}.{name}"
        if name not in SCORERS:
            raise ScenarioError(
                key, f'"{name}" is not a scorer', f"known scorers: {', '.join(SCORERS)}"
            )
        if isinstance(weight, bool) or not isinstance(weight, int | float) or weight != weight:
            raise ScenarioError(key, f"{weight!r} is not a number", "give a weight of 0 or more")
        if weight < 0 or weight == float("inf"):
            raise ScenarioError(
                key, f"must be a finite number of 0 or more, not {weight:g}",
                "weights are shares of the score: 0 turns a scorer off",
            )
        out.append((name, float(weight)))
    if not out or all(w == 0 for _, w in out):
        raise ScenarioError(
            path, "every weight is 0 (no scorer would count)",
            "give at least one of prefix, queue, kv_free, running a weight above 0",
        )
    return tuple(out)


def check_scenario(
    models: dict[str, ModelSpec],
    resolved: dict[str, WorkerSpec],
    dispatcher: DispatcherSpec,
    traffic: Traffic,
) -> None:
    """Cross-checks: prefixes, caches and prefix-reading policies need continuous
    batching; a prefix is a part of the prompt; a key that would be ignored is an error."""
    for name, m in models.items():
        w = resolved[name]
        where = dict(m.worker_overrides)

        def key(k: str, name: str = name, where: dict[str, Any] = where) -> str:
            return f"models.{name}.worker.{k}" if k in where else f"worker.{k}"

        static = w.batching == "static"
        if m.prefixes is not None and static:
            raise ScenarioError(
                f"models.{name}.prefixes",
                f"shared prefixes need continuous batching, but model {name} batches statically",
                'set worker.batching = "continuous", or remove the prefixes table',
            )
        if w.prefix_cache and static:
            raise ScenarioError(
                key("prefix_cache"),
                f"applies to continuous batching, but model {name} batches statically",
                'set batching = "continuous" for it, or remove prefix_cache',
            )
        if w.block_tokens != 16 and not w.prefix_cache:
            raise ScenarioError(
                key("block_tokens"), "applies only with prefix_cache = true",
                "set prefix_cache = true, or remove block_tokens",
            )
        if m.prefixes is not None and m.prefixes.prefix_tokens >= m.tokens:
            raise ScenarioError(
                f"models.{name}.prefixes.prefix_tokens",
                f"{m.prefixes.prefix_tokens:,} is not below models.{name}.tokens ({m.tokens:,}): "
                "the prefix is the first part of each prompt",
                "lower prefix_tokens, or raise the model's tokens",
            )
    # Policies that read the workers' prefix caches route to continuous workers only.
    if dispatcher.policy in catalog.policies_with("needs_prefix_caches"):
        for name in models:
            if resolved[name].batching == "static":
                raise ScenarioError(
                    "dispatcher.policy",
                    f'"{dispatcher.policy}" routes by the workers\' prefix caches, but model '
                    f"{name} batches statically",
                    'set worker.batching = "continuous", or use round_robin, pull or least_loaded',
                )
    check_index(dispatcher)
    if dispatcher.scorers and dispatcher.policy not in catalog.policies_with("uses_scorers"):
        raise ScenarioError(
            "dispatcher.scorers", f'applies only to policy = "weighted", not "{dispatcher.policy}"',
            'set dispatcher.policy = "weighted", or remove the scorers table',
        )
    if traffic.trace is not None:

        trace = load_trace(traffic.trace)
        if trace.prefix_group is not None:
            statics = [n for n, w in resolved.items() if w.batching == "static"]
            if statics:
                raise ScenarioError(
                    "traffic.trace",
                    f"the trace's rows carry prefix_id, but model {statics[0]} batches statically",
                    'set worker.batching = "continuous", or drop prefix_id from the trace',
                )
