"""The entities the static worker model moves around: a batch and a dispatcher's plan
for closing its open batch. Named tuples: one of each is built per batch, and the hot
path reads their fields by name at the cost of a tuple index."""

from __future__ import annotations

from typing import NamedTuple


class Batch(NamedTuple):
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


class ClosePlan(NamedTuple):
    """When and how a dispatcher's open batch closes.

    ``full``: it closes by fullness at ``time_s`` after admitting the rows up to
    ``take_to`` and cutting at ``cut`` (one less when the request that did not fit
    opens the next batch); otherwise its timer closes it at ``time_s`` with whatever
    arrived by then (``take_to`` and ``cut`` unused).
    """

    time_s: float
    full: bool
    take_to: int
    cut: int
