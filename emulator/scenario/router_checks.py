"""Checks of ``dispatcher.proxy_hop_s``: the time each request spends between the
router's decision and its worker (a sidecar or proxy in the request's path, as in
llm-d's deployments), read and checked against the rest of the scenario. Each raises
a one-line ``ScenarioError`` naming the key and the fix.
"""

from __future__ import annotations

from typing import Any

from emulator.scenario import catalog
from emulator.scenario.errors import ScenarioError
from emulator.scenario.specs import DispatcherSpec, PoolSpec

#: The longest proxy hop: a network hop, not a queue.
MAX_PROXY_HOP_S = 10.0


def proxy_hop(t: Any) -> float:
    """The ``proxy_hop_s`` key of the ``[dispatcher]`` table (a ``checks._Table``)."""
    value = t.raw("proxy_hop_s", 0.0)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_PROXY_HOP_S:
        raise ScenarioError(
            t.key("proxy_hop_s"), f"{value!r} is not a number of seconds from 0 to {MAX_PROXY_HOP_S:g}",
            "give the delay a request takes from the router to its worker, e.g. 0.002",
        )
    return float(value)


def check(dispatcher: DispatcherSpec, batching: dict[str, str], pools: tuple[PoolSpec, ...]) -> None:
    """A hop only where requests are pushed to continuous-batching workers."""
    if dispatcher.proxy_hop_s == 0:
        return
    holding = catalog.policies_with("holds_requests")
    if dispatcher.policy in holding:
        raise ScenarioError(
            "dispatcher.proxy_hop_s",
            f'delays requests pushed to their workers, but "{dispatcher.policy}" holds them at the router',
            "use a pushing policy (round_robin, least_loaded, prefix_aware, weighted), or remove proxy_hop_s",
        )
    for p in pools:
        if p.policy in holding:
            raise ScenarioError(
                "dispatcher.proxy_hop_s",
                f'delays requests pushed to their workers, but pool {p.name} holds them ("{p.policy}")',
                f"give [pools.{p.name}] a pushing policy, or remove proxy_hop_s",
            )
    for name, kind in batching.items():
        if kind != "continuous":
            raise ScenarioError(
                "dispatcher.proxy_hop_s",
                f"delays each request on its way to its worker, but model {name} batches statically",
                'set worker.batching = "continuous", or remove proxy_hop_s',
            )
