"""Disaggregated serving in the scenario: ``[models.NAME.disaggregated]`` and the named
worker pools of ``[[hosts]]`` groups (``pool = "prefill"``), read and checked.

A host group's ``pool`` names the pool its workers belong to; a disaggregated model
names two of them, one for prefill and one for decode. Every check raises a one-line
``ScenarioError`` naming the key and the fix.
"""

from __future__ import annotations

import re
from typing import Any

from emulator.scenario import (
    admission_checks,
    catalog,
    pipeline_checks,
    prefix_checks,
    session_checks,
)
from emulator.scenario.errors import ScenarioError
from emulator.scenario.specs import (
    AutoscalerSpec,
    DisaggSpec,
    DispatcherSpec,
    HostGroup,
    ModelSpec,
    PoolSpec,
    Scenario,
)

_POOL = re.compile(r"^[A-Za-z0-9_-]+$")
_KEYS = tuple(DisaggSpec.__dataclass_fields__)
_DECIDER_KEYS = ("decider_threshold_tokens", "decider", "decider_max_prefill_queue")
#: What the decider holds its threshold against (``[models.NAME.disaggregated] decider``).
DECIDERS = ("prompt", "uncached")
#: The keys of a ``[pools.NAME]`` table.
POOL_KEYS = (
    "policy", "queue_limit", "scorers", "autoscaler", "admission", "admission_slack",
    "prefix_index", "prefix_index_capacity", "prefix_index_ttl_s", "session_affinity", "session_ttl_s",
)


def kv_bytes_per_token(model: ModelSpec) -> float | None:
    """Bytes of one token's KV for ``model``: ``kv_bytes_per_token`` of its
    disaggregated table, else 2 (K and V) x layers x KV heads x head dim x bytes per
    value from its arch (None: neither is given)."""
    spec = model.disaggregated
    if spec is not None and spec.kv_bytes_per_token is not None:
        return spec.kv_bytes_per_token
    if model.arch is None:
        return None
    shape = model.arch.shape()
    return float(2 * shape.layers * shape.kv_heads * shape.head_dim * model.arch.dtype_bytes)


def worker_pools(scenario: Scenario) -> list[str | None]:
    """Each worker's pool (its host group's ``pool``), in layout order."""
    out: list[str | None] = []
    for group in scenario.hosts:
        for _ in range(group.count):
            out.extend(group.pool for _ in group.workers)
    return out


def parse_disaggregated(raw: Any, path: str) -> DisaggSpec:
    """``[models.NAME.disaggregated]``, its keys checked one by one."""
    # cycle: checks imports this module at load time
    from emulator.scenario.checks import _show, _Table

    t = _Table(raw, path, _KEYS)
    if not t.has("prefill_workers") or not t.has("decode_workers"):
        missing = "prefill_workers" if not t.has("prefill_workers") else "decode_workers"
        for key in _DECIDER_KEYS:
            if t.has(key):
                raise ScenarioError(
                    t.key(key),
                    f"a decider needs the model split into pools, but {missing} is missing",
                    'add prefill_workers = "prefill" and decode_workers = "decode" (pools of '
                    f"[[hosts]] groups), or remove {key}",
                )
        raise ScenarioError(
            t.key(missing), "missing", f'name the pool, e.g. {missing} = "{missing.split("_")[0]}"'
        )
    names = {}
    for key in ("prefill_workers", "decode_workers"):
        name = t.text(key)
        if not _POOL.match(name):
            raise ScenarioError(
                t.key(key), f"{_show(name)} is not a usable pool name", "use letters, digits, _ and - only"
            )
        names[key] = name
    if names["prefill_workers"] == names["decode_workers"]:
        raise ScenarioError(
            t.key("decode_workers"),
            f'"{names["decode_workers"]}" is also the prefill pool',
            "give decode its own pool: a host group with another pool name",
        )
    speed = t.number("kv_transfer_gb_s", 50.0)
    if speed <= 0:
        raise ScenarioError(
            t.key("kv_transfer_gb_s"),
            f"must be greater than 0, not {_show(speed)}",
            "give the link's speed in GB/s, e.g. 50",
        )
    per_token = None
    if t.has("kv_bytes_per_token"):
        per_token = t.number("kv_bytes_per_token")
        if per_token <= 0:
            raise ScenarioError(
                t.key("kv_bytes_per_token"),
                f"must be greater than 0, not {_show(per_token)}",
                "give the bytes of one token's KV (2 x layers x KV heads x head dim x dtype bytes)",
            )
    threshold = t.integer("decider_threshold_tokens", 0, low=0)
    decider = t.text("decider", "prompt")
    if decider not in DECIDERS:
        raise ScenarioError(
            t.key("decider"), f"{_show(decider)} is not a decider",
            'use "prompt" (the threshold against the prompt\'s tokens) or "uncached" (against '
            "the tokens not cached on the picked prefill worker)",
        )
    if decider == "uncached" and threshold == 0:
        raise ScenarioError(
            t.key("decider"),
            "with decider_threshold_tokens = 0 every request has uncached tokens above it, so "
            "the decider would change nothing",
            'give decider_threshold_tokens (e.g. 256), or remove decider',
        )
    return DisaggSpec(
        prefill_workers=names["prefill_workers"],
        decode_workers=names["decode_workers"],
        kv_transfer_gb_s=speed,
        decider_threshold_tokens=threshold,
        kv_bytes_per_token=per_token,
        decider=decider,
        decider_max_prefill_queue=t.integer("decider_max_prefill_queue", 0, low=0),
        **pipeline_checks.keys(t),
    )


def parse_pool(raw: Any, path: str) -> str:
    """A host group's ``pool`` key."""
    # cycle: checks imports this module at load time
    from emulator.scenario.checks import _show

    if not isinstance(raw, str) or not _POOL.match(raw):
        raise ScenarioError(
            path, f"{_show(raw)} is not a usable pool name", 'write it like pool = "prefill"'
        )
    return raw


def check_disaggregated(
    models: dict[str, ModelSpec],
    batching: dict[str, str],
    dispatcher: DispatcherSpec,
    hosts: tuple[HostGroup, ...],
) -> None:
    """The checks that need the whole scenario: batching, policy, KV size and pools."""
    split = {name: m for name, m in models.items() if m.disaggregated is not None}
    for name, m in split.items():
        path = f"models.{name}.disaggregated"
        if batching[name] != "continuous":
            raise ScenarioError(
                path,
                f"applies to continuous batching, but model {name} batches statically",
                f'set batching = "continuous" in [worker] or [models.{name}.worker], or remove the table',
            )
        if kv_bytes_per_token(m) is None:
            raise ScenarioError(
                f"{path}.kv_bytes_per_token",
                "missing: the KV transfer's time needs the bytes of one token's KV",
                f'add [models.{name}.arch] (e.g. model = "Llama-2-70B") or give kv_bytes_per_token',
            )
    provided: dict[str, set[str]] = {}  # pool -> the models whose workers it carries
    for gi, group in enumerate(hosts):
        carried = {slot.model for slot in group.workers}
        if group.pool is None:
            for model in sorted(carried & set(split)):
                raise ScenarioError(
                    f"hosts[{gi}]",
                    f"carries {model} workers but names no pool, and {model} is disaggregated",
                    f'add pool = "{split[model].disaggregated.prefill_workers}" or '  # type: ignore[union-attr]
                    f'pool = "{split[model].disaggregated.decode_workers}"',  # type: ignore[union-attr]
                )
            continue
        if not carried & set(split):
            raise ScenarioError(
                f"hosts[{gi}].pool",
                f'"{group.pool}" is a pool, but the group carries no worker of a disaggregated model',
                "remove pool, or name it in a model's [models.NAME.disaggregated]",
            )
        provided.setdefault(group.pool, set()).update(carried)
    for name, m in split.items():
        spec = m.disaggregated
        assert spec is not None
        for key in ("prefill_workers", "decode_workers"):
            pool = getattr(spec, key)
            if name not in provided.get(pool, set()):
                known = ", ".join(sorted(p for p, ms in provided.items() if name in ms)) or "none"
                raise ScenarioError(
                    f"models.{name}.disaggregated.{key}",
                    f'"{pool}" is a pool no host group provides with {name} workers '
                    f"(its pools: {known})",
                    f'set pool = "{pool}" on a [[hosts]] group carrying {name} workers',
                )
        for pool, carried in provided.items():
            if name in carried and pool not in (spec.prefill_workers, spec.decode_workers):
                raise ScenarioError(
                    f"models.{name}.disaggregated",
                    f'{name} has workers in pool "{pool}", which is neither its prefill nor its '
                    "decode pool",
                    f'rename that group\'s pool to "{spec.prefill_workers}" or "{spec.decode_workers}"',
                )


def split_pools(models: dict[str, ModelSpec]) -> dict[str, tuple[str, str]]:
    """Each pool a disaggregated model names: pool -> (model, "prefill" or "decode")."""
    out: dict[str, tuple[str, str]] = {}
    for name, m in models.items():
        if m.disaggregated is not None:
            out.setdefault(m.disaggregated.prefill_workers, (name, "prefill"))
            out.setdefault(m.disaggregated.decode_workers, (name, "decode"))
    return out


def parse_pools(
    raw: Any,
    models: dict[str, ModelSpec],
    batching: dict[str, str],
    dispatcher: DispatcherSpec,
    hosts: tuple[HostGroup, ...],
) -> tuple[PoolSpec, ...]:
    """``[pools.NAME]`` tables, each key checked (``POOL_KEYS``); then every pool's
    policy, scorers and bound checked against its role, whether it has a table or
    uses ``[dispatcher]``'s (raises ScenarioError)."""
    # cycle: checks imports this module at load time, and autoscale_checks imports checks
    from emulator.scenario.autoscale_checks import parse_autoscaler
    from emulator.scenario.checks import _Table

    roles = split_pools(models)
    out: list[PoolSpec] = []
    if raw is not None:
        if not isinstance(raw, dict):
            raise ScenarioError("pools", "must be a table of pools", "write [pools.prefill] policy = ...")
        if not roles:
            raise ScenarioError(
                "pools",
                "applies to the pools of a disaggregated model, and no model is split: a "
                "model's one pool routes by [dispatcher] and scales by [autoscaler]",
                "move these keys to [dispatcher] or [autoscaler], or remove [pools]",
            )
        for name, table in raw.items():
            path = f"pools.{name}"
            if name not in roles:
                raise ScenarioError(
                    path, f'"{name}" is not a pool of a disaggregated model',
                    f"the pools are {', '.join(roles)} (models.NAME.disaggregated's "
                    "prefill_workers and decode_workers)",
                )
            t = _Table(table, path, POOL_KEYS)
            policy = t.choice("policy", catalog.policy_names(), None) if t.has("policy") else None
            limit = t.integer("queue_limit", low=0) if t.has("queue_limit") else None
            scorers = (
                prefix_checks.scorers(t.raw("scorers"), t.key("scorers")) if t.has("scorers") else ()
            )
            scaler: AutoscalerSpec | None = None
            if t.has("autoscaler"):
                model, role = roles[name]
                mine = tuple(g for g in hosts if g.pool == name)
                scaler = parse_autoscaler(
                    t.raw("autoscaler"), models, batching, mine, t.key("autoscaler"), model, role
                )
                if scaler.model != model:
                    raise ScenarioError(
                        t.key("autoscaler.model"),
                        f'"{scaler.model}" has no workers in pool {name}, which is {model}\'s',
                        f'set model = "{model}", or leave model out',
                    )
            out.append(PoolSpec(
                name, policy, limit, scorers, scaler,
                admission_checks.rule(t, None), admission_checks.slack(t, None),
                **prefix_checks.pool_index_keys(t), **session_checks.keys(t, pool=True),
            ))
    given = {p.name: p for p in out}
    for name, (model, role) in roles.items():
        _check_pool(name, model, role, given.get(name), dispatcher, models[model])
    return tuple(out)


def _check_pool(
    name: str, model: str, role: str, pool: PoolSpec | None, dispatcher: DispatcherSpec,
    spec: ModelSpec,
) -> None:
    """Pool ``name`` (``model``'s ``role`` pool): its policy can route there, scorers
    only with a policy that sums them, a decode pool's bound only with a decider."""
    own = pool is not None and pool.policy is not None
    policy = pool.policy if own else dispatcher.policy  # type: ignore[union-attr]
    key = f"pools.{name}.policy" if own else "dispatcher.policy"
    pushing = catalog.policies_with("routes_in_pools")
    holding = catalog.policies_with("holds_requests")
    suggest = "least_loaded" if "least_loaded" in pushing else pushing[0]
    if role == "decode" and policy not in pushing:
        why = (
            "holds requests for workers to take, and handoffs to the decode pool are pushed"
            if policy in holding else "does not route within pools"
        )
        raise ScenarioError(
            key, f'"{policy}" {why} (pool {name} decodes {model})',
            f'give the pool a policy of its own, [pools.{name}] policy = "{suggest}" '
            f"(one of {', '.join(pushing)})",
        )
    if role == "prefill" and policy not in pushing + holding:
        raise ScenarioError(
            key, f'"{policy}" does not route within pools (pool {name} prefills {model})',
            f"use one of {', '.join(pushing + holding)}",
        )
    split = spec.disaggregated
    assert split is not None
    if role == "prefill" and policy in holding and split.decider == "uncached":
        raise ScenarioError(
            f"models.{model}.disaggregated.decider",
            f'"uncached" looks at the prefill worker the policy would pick, and "{policy}" '
            f"(pool {name}) picks none in advance",
            f'set decider = "prompt", or give pool {name} a pushing policy, [pools.{name}] '
            f'policy = "{suggest}"',
        )
    if pool is None:
        return
    prefix_checks.check_pool_index(pool, str(policy), pool.scorers or dispatcher.scorers, dispatcher)
    if pool.scorers and policy not in catalog.policies_with("uses_scorers"):
        raise ScenarioError(
            f"pools.{name}.scorers", f'applies only to a policy that sums scorers, not "{policy}"',
            f'set [pools.{name}] policy = "weighted", or remove its scorers',
        )
    if role == "decode" and pool.queue_limit and split.decider_threshold_tokens == 0:
        raise ScenarioError(
            f"pools.{name}.queue_limit",
            f"bounds the arrivals routed to pool {name}, and with decider_threshold_tokens = 0 "
            f"none is: every {model} request enters the prefill pool",
            f"set models.{model}.disaggregated.decider_threshold_tokens, or give the bound to "
            f"pool {split.prefill_workers}",
        )
