"""The names the scenario layer validates against, and what each name implies: the
dispatch policies and the worker models, with their traits.

The scenario layer owns this catalog and imports nothing from the simulation layer;
``emulator.sim`` registers each of its policies and worker models here as it defines
them (``emulator`` imports both layers, so the catalog is full whenever a scenario is
read). A policy's traits are declared once, on the policy class (those that follow
from a routing composition, such as needing prefix caches, derived from it when the
class is defined), and copied here when it registers:

* ``needs_prefix_caches``: it routes on prefix caches (continuous workers only);
* ``routes_in_pools``: it can route within a disaggregated model's pools;
* ``holds_requests``: it holds requests at the router, and workers admit them at
  their step starts (``pull``; in front of a prefill pool too);
* ``uses_scorers``: it sums ``[dispatcher.scorers]``;
* ``alike_under_constant``: the policy it is identical to when every batch takes one
  constant time (None: none).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PolicyEntry:
    """A dispatch policy's name and traits."""

    name: str
    needs_prefix_caches: bool = False
    routes_in_pools: bool = False
    holds_requests: bool = False
    uses_scorers: bool = False
    alike_under_constant: str | None = None


@dataclass(frozen=True)
class WorkerModelEntry:
    """A worker model's name (``worker.batching``) and traits."""

    name: str
    token_level: bool = False  # it models tokens, a KV cache and steps


#: Registered dispatch policies, in the order validation lists them.
POLICIES: dict[str, PolicyEntry] = {}
#: Registered worker models, in the order validation lists them.
WORKER_MODELS: dict[str, WorkerModelEntry] = {}


def register_policy(entry: PolicyEntry) -> None:
    """Add (or replace) a dispatch policy."""
    POLICIES[entry.name] = entry


def unregister_policy(name: str) -> None:
    """Forget the policy ``name`` (for tests that add their own)."""
    POLICIES.pop(name, None)


def register_worker_model(entry: WorkerModelEntry) -> None:
    """Add (or replace) a worker model."""
    WORKER_MODELS[entry.name] = entry


def policy_names() -> tuple[str, ...]:
    """Every registered policy, in registration order."""
    return tuple(POLICIES)


def policies_with(trait: str) -> tuple[str, ...]:
    """The registered policies that have ``trait`` (a ``PolicyEntry`` flag)."""
    if trait not in PolicyEntry.__dataclass_fields__ or trait == "name":
        raise ValueError(f"{trait!r} is not a policy trait")
    return tuple(name for name, entry in POLICIES.items() if getattr(entry, trait))


def worker_model_names() -> tuple[str, ...]:
    """Every registered worker model, in registration order."""
    return tuple(WORKER_MODELS)
