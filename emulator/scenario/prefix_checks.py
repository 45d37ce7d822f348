"""Checks of the prefix-caching keys: ``[models.NAME.prefixes]``, ``worker.prefix_cache``
and ``worker.block_tokens``, and ``[dispatcher.scorers]`` of the ``weighted`` policy.

Each raises ``ScenarioError`` with the key path and the fix, like ``checks``; that
module calls these while it reads a scenario.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emulator.scenario import catalog, kv_tier_checks
from emulator.scenario.errors import ScenarioError
from emulator.scenario.specs import SCORERS, PrefixSpec
from emulator.scenario.traces import load_trace

if TYPE_CHECKING:
    from emulator.scenario.checks import _Table
    from emulator.scenario.specs import DispatcherSpec, ModelSpec, Traffic, WorkerSpec

#: Prefix groups per model: each group costs the Zipf table a number; more is a mistake.
MAX_PREFIX_GROUPS = 1_000_000


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
