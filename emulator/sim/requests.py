"""Per-model storage of request attempts in arrival order, as parallel numpy arrays.

Requests are addressed by absolute index (never reused); ``base`` is the absolute
index of the first row kept. Rows are appended a chunk of arrivals ahead of the
simulation and dropped from the front once their outcome is final and no batch
refers to them, so memory follows the requests in the system, not those served.
"""

from __future__ import annotations

import numpy as np

#: Outcome codes stored per request.
PENDING, OK, TIMED_OUT, SHED, LOST, ORPHANED = 0, 1, 2, 3, 4, 5

_FIELDS = (
    ("arrival", np.float64),
    ("tokens", np.int64),
    ("output", np.int64),  # output tokens (token-level serving; 1 otherwise)
    ("cum_tokens", np.int64),  # running total of tokens, for cutting batches by tokens
    ("attempt", np.int16),
    ("key", np.int32),
    ("ctr", np.int32),  # the gateway rate-limit counter the request was counted on
    ("outcome", np.int8),
    ("group", np.int32),  # its shared-prefix group (-1: none)
    ("prefix", np.int32),  # its shared prefix's tokens (0: none)
)


class RequestStore:
    """Growable parallel arrays of request attempts, addressed by absolute index."""

    def __init__(self, capacity: int = 4096) -> None:
        self.base = 0
        self.end = 0
        for name, dtype in _FIELDS:
            setattr(self, name, np.zeros(capacity, dtype=dtype))
        self.arrival: np.ndarray
        self.tokens: np.ndarray
        self.output: np.ndarray
        self.cum_tokens: np.ndarray
        self.attempt: np.ndarray
        self.key: np.ndarray
        self.ctr: np.ndarray
        self.outcome: np.ndarray
        self.group: np.ndarray
        self.prefix: np.ndarray

    def __len__(self) -> int:
        return self.end - self.base

    def _reserve(self, extra: int) -> None:
        used = self.end - self.base
        if used + extra <= self.arrival.size:
            return
        size = max(4096, 2 * (used + extra))
        for name, dtype in _FIELDS:
            old = getattr(self, name)
            new = np.zeros(size, dtype=dtype)
            new[:used] = old[:used]
            setattr(self, name, new)

    def append(
        self,
        arrival: np.ndarray,
        tokens: np.ndarray,
        attempt: np.ndarray,
        key: np.ndarray,
        ctr: np.ndarray,
        output: np.ndarray | int = 1,
        group: np.ndarray | int = -1,
        prefix: np.ndarray | int = 0,
    ) -> None:
        """Append attempts (already in time order, all later than the stored ones)."""
        n = arrival.size
        if n == 0:
            return
        self._reserve(n)
        lo = self.end - self.base
        hi = lo + n
        self.arrival[lo:hi] = arrival
        self.tokens[lo:hi] = tokens
        self.output[lo:hi] = output
        start = self.cum_tokens[lo - 1] if lo > 0 else 0
        self.cum_tokens[lo:hi] = start + np.cumsum(tokens)
        self.attempt[lo:hi] = attempt
        self.key[lo:hi] = key
        self.ctr[lo:hi] = ctr
        self.outcome[lo:hi] = PENDING
        self.group[lo:hi] = group
        self.prefix[lo:hi] = prefix
        self.end += n

    def truncate(self, new_end: int) -> None:
        """Forget the rows from ``new_end`` on (arrivals not yet reached)."""
        self.end = max(self.base, min(new_end, self.end))

    def compact(self, low: int) -> None:
        """Drop rows before absolute index ``low`` once they are a large share."""
        drop = low - self.base
        used = self.end - self.base
        if drop <= 0 or drop < used // 2 and drop < 1 << 16:
            return
        keep = used - drop
        for name, _ in _FIELDS:
            arr = getattr(self, name)
            arr[:keep] = arr[drop:used]
        self.base = low

    def cum_before(self, index: int) -> int:
        """Total tokens of the rows before absolute ``index`` (since the store began)."""
        pos = index - self.base
        return int(self.cum_tokens[pos - 1]) if pos > 0 else self._cum_floor()

    def _cum_floor(self) -> int:
        # Rows before base are gone: recover their running total from the first kept row.
        if self.end > self.base:
            return int(self.cum_tokens[0] - self.tokens[0])
        return 0

    def tokens_between(self, lo: int, hi: int) -> int:
        """Total tokens of rows ``[lo, hi)`` (absolute indexes)."""
        if hi <= lo:
            return 0
        return int(self.cum_tokens[hi - 1 - self.base]) - self.cum_before(lo)
