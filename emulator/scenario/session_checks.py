"""Checks of session affinity: ``dispatcher.session_affinity`` and
``dispatcher.session_ttl_s`` (and a ``[pools.NAME]`` table's own), the router's rule
that sends a request of a session back to the worker that served the session before.

A session is a prefix group (``[models.NAME.prefixes]``, or a trace row's prefix):
the requests that share a prefix stand for the turns of one conversation, whose
history is the prefix. Each check raises a one-line ``ScenarioError`` naming the key
and the fix; ``checks`` reads the keys with the ``[dispatcher]`` table and calls
``check`` once the scenario is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emulator.scenario import catalog
from emulator.scenario.errors import ScenarioError

if TYPE_CHECKING:
    from emulator.scenario.specs import DispatcherSpec, ModelSpec, PoolSpec

#: The longest a router remembers an idle session: a day.
MAX_SESSION_TTL_S = 86_400.0


def keys(t: Any, pool: bool = False) -> dict[str, Any]:
    """``session_affinity`` and ``session_ttl_s`` of a ``[dispatcher]`` table (a
    ``checks._Table``), or those a ``[pools.NAME]`` table sets (``pool``)."""
    out: dict[str, Any] = {}
    if t.has("session_affinity") or not pool:
        out["session_affinity"] = t.flag("session_affinity", False)
    if t.has("session_ttl_s") or not pool:
        ttl = t.raw("session_ttl_s", 600.0)
        if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl <= MAX_SESSION_TTL_S:
            raise ScenarioError(
                t.key("session_ttl_s"), f"{ttl!r} is not a number of seconds above 0 and at most a day",
                "give how long the router remembers an idle session's worker, e.g. 600",
            )
        out["session_ttl_s"] = float(ttl)
    return out


def check(
    dispatcher: DispatcherSpec, pools: tuple[PoolSpec, ...], models: dict[str, ModelSpec],
    batching: dict[str, str], trace: bool,
) -> None:
    """Affinity needs sessions (prefix groups), requests pushed one by one to
    continuous-batching workers; its TTL only with affinity on."""
    holding = catalog.policies_with("holds_requests")
    where: list[tuple[str, bool, float | None, str]] = [
        ("dispatcher", dispatcher.session_affinity,
         dispatcher.session_ttl_s if dispatcher.session_ttl_s != 600.0 else None, dispatcher.policy)]
    for p in pools:
        on = dispatcher.session_affinity if p.session_affinity is None else p.session_affinity
        where.append((f"pools.{p.name}", on, p.session_ttl_s, p.policy or dispatcher.policy))
    for path, on, ttl, policy in where:
        if ttl is not None and not on:
            raise ScenarioError(
                f"{path}.session_ttl_s", "applies only with session affinity on",
                f"set {path}.session_affinity = true, or remove session_ttl_s",
            )
        if not on:
            continue
        key = f"{path}.session_affinity"
        if policy in holding:
            raise ScenarioError(
                key, f'sends a session back to its worker, but "{policy}" holds requests for workers to take',
                "use a pushing policy (round_robin, least_loaded, prefix_aware, weighted), or remove "
                "session_affinity",
            )
        for name, kind in batching.items():
            if kind != "continuous":
                raise ScenarioError(
                    key, f"routes requests one by one, but model {name} batches statically",
                    'set worker.batching = "continuous", or remove session_affinity',
                )
        if not trace and all(m.prefixes is None for m in models.values()):
            raise ScenarioError(
                key, "needs sessions, and no request carries one: a session is a prefix group",
                "give a model [models.NAME.prefixes] (its groups are the sessions), or remove session_affinity",
            )
