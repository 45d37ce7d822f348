"""The entities the static worker model moves around: a batch, and a dispatcher's plan
for closing its open batch.

Both are slotted dataclasses: a peak-load run builds hundreds of thousands of batches,
and slot reads are the interpreter's fastest attribute access. A dispatcher keeps one
``ClosePlan`` and rewrites it in place whenever it plans again (``ClosePlan.set``), so
planning allocates nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, eq=False)
class Batch:
    """A closed batch: store rows ``[first, end)`` of one model's dispatcher.

    Rows inside the range that the queue limit shed are skipped by their outcome code,
    so ``requests`` (the requests really in it) may be fewer than ``end - first``.
    ``epoch`` is the dispatcher's epoch when it closed: a batch from before a cold
    failover comes back orphaned.
    """

    first: int
    end: int
    requests: int
    tokens: int
    epoch: int
    model: int


@dataclass(slots=True, eq=False)
class ClosePlan:
    """When and how a dispatcher's open batch closes.

    ``full``: it closes by fullness at ``time_s`` after admitting the rows up to
    ``take_to`` and cutting at ``cut`` (one less when the request that did not fit
    opens the next batch); otherwise its timer closes it at ``time_s`` with whatever
    arrived by then (``take_to`` and ``cut`` unused).
    """

    time_s: float = 0.0
    full: bool = False
    take_to: int = 0
    cut: int = 0

    def set(self, time_s: float, full: bool, take_to: int, cut: int) -> ClosePlan:
        """Rewrite this plan in place; returns it."""
        self.time_s = time_s
        self.full = full
        self.take_to = take_to
        self.cut = cut
        return self
