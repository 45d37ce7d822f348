"""Dispatch policies, one module each, chosen by the scenario's ``dispatcher.policy``.

A policy is registered under its ``name`` with ``register_policy`` (a class decorator);
validation accepts exactly the registered names, so a new policy is one new module plus
its registration (see ARCHITECTURE.md, "How to add a policy").
"""

from __future__ import annotations

from emulator.scenario import catalog
from emulator.sim.policies.base import DispatchPolicy, PushPolicy
from emulator.sim.policies.least_loaded import LeastLoaded
from emulator.sim.policies.prefix_aware import PrefixAware
from emulator.sim.policies.pull import Pull
from emulator.sim.policies.round_robin import RoundRobin
from emulator.sim.policies.weighted import Weighted

#: Registered policies by name, in the order validation lists them.
POLICY_REGISTRY: dict[str, type[DispatchPolicy]] = {}


def register_policy(cls: type[DispatchPolicy]) -> type[DispatchPolicy]:
    """Register a policy class under its ``name`` (usable as a class decorator)."""
    if not getattr(cls, "name", None):
        raise ValueError(f"{cls.__name__} needs a name to be registered")
    POLICY_REGISTRY[cls.name] = cls
    catalog.register_policy(catalog.PolicyEntry(
        cls.name,
        needs_prefix_caches=cls.needs_prefix_caches,
        routes_in_pools=cls.routes_in_pools,
        holds_requests=cls.workers_take_held,
        uses_scorers=cls.uses_scorers,
        alike_under_constant=cls.alike_under_constant,
    ))
    return cls


def unregister_policy(name: str) -> None:
    """Forget the policy registered as ``name`` (for tests that add their own)."""
    POLICY_REGISTRY.pop(name, None)
    catalog.unregister_policy(name)


def policy_class(name: str) -> type[DispatchPolicy]:
    """The policy registered as ``name`` (validation has already checked the name)."""
    return POLICY_REGISTRY[name]


for _cls in (RoundRobin, Pull, LeastLoaded, PrefixAware, Weighted):
    register_policy(_cls)

__all__ = [
    "POLICY_REGISTRY",
    "DispatchPolicy",
    "PushPolicy",
    "policy_class",
    "register_policy",
    "unregister_policy",
]
