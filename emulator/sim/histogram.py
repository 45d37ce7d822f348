"""Streaming latency statistics: a fixed log-spaced histogram, so memory does not grow
with the number of requests served."""

from __future__ import annotations

import numpy as np

_LOW_S = 1e-4  # latencies below land in the first bin
_DECADES = 10  # up to 1e6 s
_PER_DECADE = 1000  # bin width 0.23 % of the value


class LatencyHistogram:
    """Counts latencies in log-spaced bins; exact count, sum (mean) and max."""

    def __init__(self) -> None:
        self.bins = np.zeros(_DECADES * _PER_DECADE, dtype=np.int64)
        self.count = 0
        self.total_s = 0.0
        self.max_s = 0.0

    def add(self, values_s: np.ndarray) -> None:
        """Add an array of latencies (seconds)."""
        if values_s.size == 0:
            return
        logs = np.log10(np.maximum(values_s, _LOW_S) / _LOW_S) * _PER_DECADE
        index = np.minimum(logs.astype(np.int64), self.bins.size - 1)
        if index.size < 2000:  # a full-width bincount costs more than it saves here
            np.add.at(self.bins, index, 1)
        else:
            self.bins += np.bincount(index, minlength=self.bins.size)
        self.count += int(values_s.size)
        self.total_s += float(values_s.sum())
        self.max_s = max(self.max_s, float(values_s.max()))

    def merge(self, other: LatencyHistogram) -> None:
        """Add another histogram's counts into this one."""
        self.bins += other.bins
        self.count += other.count
        self.total_s += other.total_s
        self.max_s = max(self.max_s, other.max_s)

    def quantile(self, q: float) -> float | None:
        """The q-quantile (0..1), interpolated inside its bin; None when empty."""
        if self.count == 0:
            return None
        rank = q * (self.count - 1)
        cumulative = np.cumsum(self.bins)
        b = int(np.searchsorted(cumulative, rank, side="right"))
        below = int(cumulative[b - 1]) if b > 0 else 0
        frac = (rank - below + 0.5) / self.bins[b]
        value = _LOW_S * 10 ** ((b + min(max(float(frac), 0.0), 1.0)) / _PER_DECADE)
        return min(value, self.max_s)

    def mean(self) -> float | None:
        """Exact mean latency; None when empty."""
        return self.total_s / self.count if self.count else None

    def stats(self) -> dict[str, float | None]:
        """``{"p50", "p95", "p99", "max", "mean"}`` in seconds (None when empty)."""
        return {
            "p50": self.quantile(0.50),
            "p95": self.quantile(0.95),
            "p99": self.quantile(0.99),
            "max": self.max_s if self.count else None,
            "mean": self.mean(),
        }


def frame_percentiles(values_s: np.ndarray) -> tuple[float | None, float | None, float | None]:
    """Exact p50, p95 and p99 of one frame's latencies (None when there are none).

    Linear interpolation between order statistics, as numpy's default quantile, but
    without its per-call overhead (a live run computes this for every frame).
    """
    n = values_s.size
    if n == 0:
        return None, None, None
    picks = []
    for q in (0.5, 0.95, 0.99):
        pos = q * (n - 1)
        lo = int(pos)
        picks.append((lo, min(lo + 1, n - 1), pos - lo))
    needed = sorted({i for lo, hi, _ in picks for i in (lo, hi)})
    part = np.partition(values_s, needed)  # only the order statistics we need
    out = [float(part[lo] + (part[hi] - part[lo]) * frac) for lo, hi, frac in picks]
    return out[0], out[1], out[2]
