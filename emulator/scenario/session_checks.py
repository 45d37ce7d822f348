"""Checks of session affinity: ``dispatcher.session_affinity`` and
``dispatcher.session_ttl_s`` (and a ``[pools.NAME]`` table's own), the router's rule
that sends a request of a session back to the worker that served the session before.

A session is a prefix group (``[models.NAME.prefixes]``, or a trace row's prefix):
the requests that share a prefix stand for the turns of one conversation, whose
history is the prefix. ``[dispatcher.scorers] session`` is the soft form under
``policy = "weighted"``: a weight for the session's worker among the other scores. Each check raises a one-line ``ScenarioError`` naming the key
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
    """Affinity (or a ``session`` scorer's weight) needs sessions (prefix groups),
    requests pushed one by one to continuous-batching workers; its TTL only with one
    of the two."""
    holding = catalog.policies_with("holds_requests")

    def scored(scorers: tuple[tuple[str, float], ...], policy: str) -> bool:
        return policy in catalog.policies_with("uses_scorers") and dict(scorers).get("session", 0.0) > 0

    where: list[tuple[str, bool, bool, float | None, str]] = [
        ("dispatcher", dispatcher.session_affinity, scored(dispatcher.scorers, dispatcher.policy),
         dispatcher.session_ttl_s if dispatcher.session_ttl_s != 600.0 else None, dispatcher.policy)]
    for p in pools:
        on = dispatcher.session_affinity if p.session_affinity is None else p.session_affinity
        policy = p.policy or dispatcher.policy
        where.append((f"pools.{p.name}", on, scored(p.scorers or dispatcher.scorers, policy), p.session_ttl_s,
                      policy))
    for path, on, by_score, ttl, policy in where:
        if ttl is not None and not (on or by_score):
            raise ScenarioError(
                f"{path}.session_ttl_s", "applies only with session affinity on (or a session scorer)",
                f"set {path}.session_affinity = true, or remove session_ttl_s",
            )
        if not (on or by_score):
            continue
        key = f"{path}.session_affinity" if on else f"{path}.scorers.session"
        what = "session_affinity" if on else "the session scorer"
        if policy in holding:
            raise ScenarioError(
                key, f'sends a session back to its worker, but "{policy}" holds requests for workers to take',
                f"use a pushing policy (round_robin, least_loaded, prefix_aware, weighted), or remove {what}",
            )
        for name, kind in batching.items():
            if kind != "continuous":
                raise ScenarioError(
                    key, f"routes requests one by one, but model {name} batches statically",
                    f'set worker.batching = "continuous", or remove {what}',
                )
        if not trace and all(m.prefixes is None for m in models.values()):
            raise ScenarioError(
                key, "needs sessions, and no request carries one: a session is a prefix group",
                f"give a model [models.NAME.prefixes] (its groups are the sessions), or remove {what}",
            )
