"""``round_robin``: push each closed batch to the next worker in rotation, busy or not
(the seed doc's dispatcher). A busy worker's batches wait in its private queue while
the next worker in rotation may sit idle. As a composition: the in-pool and alive
filters, no scorer, the rotation picker."""

from __future__ import annotations

from emulator.sim.policies.pipeline import BELIEVED_ALIVE, IN_POOL, ComposedPolicy, Rotation


class RoundRobin(ComposedPolicy):
    """Cyclic over the workers alive at the last health check."""

    name = "round_robin"
    routes_in_pools = True
    alike_under_constant = "pull"
    filters = (IN_POOL, BELIEVED_ALIVE)
    picker = Rotation
