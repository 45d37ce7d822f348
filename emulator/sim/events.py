"""The event core: a heap of ``(time, priority, seq, kind, a, b)``.

The sequence counter makes equal times run in scheduling order, so a run is a pure
function of its scenario and seed. ``priority`` orders kinds at the same instant:
arrival chunks first, then ordinary events, then the frame that closes the interval
(a fault at t = 120 belongs to the frame ending at 120).
"""

from __future__ import annotations

import heapq
from itertools import count
from typing import Any

CHUNK, CLOSE, DONE, FAULT, HEALTH, FAILOVER_END, FRAME = range(7)
_PRIORITY = {CHUNK: 0, CLOSE: 1, DONE: 1, FAULT: 1, HEALTH: 1, FAILOVER_END: 1, FRAME: 2}

Event = tuple[float, int, int, int, Any, Any]


class EventQueue:
    """A deterministic priority queue of simulation events.

    ``heap`` and ``seq`` are public so the engine's hot path can push without a call;
    entries must keep the ``(time, priority, seq, kind, a, b)`` shape.
    """

    def __init__(self) -> None:
        self.heap: list[Event] = []
        self.seq = count()
        self.processed = 0

    def push(self, time_s: float, kind: int, a: Any = None, b: Any = None) -> None:
        """Schedule an event of ``kind`` at ``time_s`` carrying two payload values."""
        heapq.heappush(self.heap, (time_s, _PRIORITY[kind], next(self.seq), kind, a, b))

    def next_time(self) -> float:
        """Time of the earliest event (infinity when empty)."""
        return self.heap[0][0] if self.heap else float("inf")

    def pop(self) -> Event:
        """Remove and return the earliest event."""
        self.processed += 1
        return heapq.heappop(self.heap)

    def __len__(self) -> int:
        return len(self.heap)
