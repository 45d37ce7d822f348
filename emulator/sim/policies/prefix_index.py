"""The router's estimated prefix index (``dispatcher.prefix_index = "estimated"``).

An exact prefix scorer reads every worker's prefix cache as it is at the request's
arrival: the best a router could know. A router that cannot read the caches (llm-d's
default prefix scorer is of this kind) guesses them from its own routing history: a
worker that was sent a prefix group recently probably still holds it. This index is
that guess. It records each routing decision as a (worker, prefix group) pair with
the time it was made, and answers "was this group routed to this worker recently?":

* capacity: at most ``prefix_index_capacity`` pairs are kept; recording one more
  forgets the pair routed least recently (LRU by routing time; asking does not count
  as use);
* staleness: a pair last routed more than ``prefix_index_ttl_s`` ago is forgotten.

The index never learns of evictions at the workers, of a worker dying with its cache,
or of a cache too small for the groups sent to it: it is wrong exactly where the
workers' caches change behind the router's back. The scorer built on it
(``emulator.sim.policies.pipeline.EstimatedPrefixScorer``) gives 1 to a worker the
index holds the request's group for and 0 to the others.
"""

from __future__ import annotations

from collections import OrderedDict


class EstimatedPrefixIndex:
    """The (worker, prefix group) pairs a router routed, with a capacity and a TTL."""

    def __init__(self, capacity: int, ttl_s: float) -> None:
        if capacity < 1 or not ttl_s > 0:
            raise ValueError(f"capacity {capacity} must be >= 1 and ttl {ttl_s} above 0")
        self.capacity = capacity
        self.ttl_s = ttl_s
        #: (worker, group) -> the time it was last routed, least recent first.
        self.entries: OrderedDict[tuple[int, int], float] = OrderedDict()

    def __len__(self) -> int:
        return len(self.entries)

    def record(self, worker: int, group: int, now_s: float) -> None:
        """The router sent a request of ``group`` to ``worker`` at ``now_s``."""
        key = (worker, group)
        entries = self.entries
        if key in entries:
            entries.move_to_end(key)
        entries[key] = now_s
        if len(entries) > self.capacity:
            entries.popitem(last=False)

    def holds(self, worker: int, group: int, now_s: float) -> bool:
        """The index believes ``worker`` holds ``group`` at ``now_s`` (a stale pair is
        forgotten on the way)."""
        key = (worker, group)
        at = self.entries.get(key)
        if at is None:
            return False
        if now_s - at > self.ttl_s:
            del self.entries[key]
            return False
        return True
