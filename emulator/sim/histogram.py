"""Streaming latency statistics: a fixed log-spaced histogram, so memory does not grow
with the number of requests served."""

from __future__ import annotations

from itertools import chain

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

    def add_weighted(self, values_s: np.ndarray, weights: np.ndarray) -> None:
        """Add latencies, each ``weights`` times (whole counts)."""
        if values_s.size == 0:
            return
        logs = np.log10(np.maximum(values_s, _LOW_S) / _LOW_S) * _PER_DECADE
        index = np.minimum(logs.astype(np.int64), self.bins.size - 1)
        if index.size < 2000:  # a full-width bincount costs more than it saves here
            np.add.at(self.bins, index, weights.astype(np.int64))
        else:
            self.bins += np.rint(np.bincount(index, weights, self.bins.size)).astype(np.int64)
        self.count += int(weights.sum())
        self.total_s += float((values_s * weights).sum())
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
        """``{"p50", "p90", "p95", "p99", "max", "mean"}`` in seconds (None when
        empty)."""
        return {
            "p50": self.quantile(0.50),
            "p90": self.quantile(0.90),
            "p95": self.quantile(0.95),
            "p99": self.quantile(0.99),
            "max": self.max_s if self.count else None,
            "mean": self.mean(),
        }


def frame_percentiles(values_s: np.ndarray) -> tuple[float | None, float | None, float | None]:
    """Exact p50, p95 and p99 of one frame's latencies (None when there are none)."""
    p50, _, p95, p99 = frame_quantiles(values_s)
    return p50, p95, p99


#: The percentiles every latency figure reports.
FRAME_QS = (0.5, 0.9, 0.95, 0.99)


def frame_quantiles(values_s: np.ndarray, qs: tuple[float, ...] = FRAME_QS) -> list[float | None]:
    """Exact quantiles (p50, p90, p95, p99 unless told) of one frame's latencies (None
    when there are none).

    Linear interpolation between order statistics, as numpy's default quantile, but
    without its per-call overhead (a live run computes this for every frame).
    """
    n = values_s.size
    if n == 0:
        return [None] * len(qs)
    picks = []
    for q in qs:
        pos = q * (n - 1)
        lo = int(pos)
        picks.append((lo, min(lo + 1, n - 1), pos - lo))
    needed = sorted({i for lo, hi, _ in picks for i in (lo, hi)})
    part = np.partition(values_s, needed)  # only the order statistics we need
    return [float(part[lo] + (part[hi] - part[lo]) * frac) for lo, hi, frac in picks]


def weighted_quantiles(
    values_s: np.ndarray, weights: np.ndarray, qs: tuple[float, ...] = FRAME_QS
) -> list[float | None]:
    """Exact quantiles of values each counted ``weights`` times (whole counts), by the
    same interpolation as ``frame_quantiles`` on the values repeated."""
    total = int(weights.sum()) if weights.size else 0
    if total == 0:
        return [None] * len(qs)
    order = np.argsort(values_s, kind="stable")
    v, cum = values_s[order], np.cumsum(weights[order])
    out: list[float | None] = []
    for q in qs:
        pos = q * (total - 1)
        lo = int(pos)
        a = v[int(np.searchsorted(cum, lo, side="right"))]
        b = v[int(np.searchsorted(cum, min(lo + 1, total - 1), side="right"))]
        out.append(float(a + (b - a) * (pos - lo)))
    return out


class GapBook:
    """Times between tokens of one model: the frame's gaps ((gap, count) pairs, and
    arithmetic runs of gaps) until the frame closes, then the run's histogram. The
    lists are cleared in place, so a worker may keep their ``append``."""

    __slots__ = ("hist", "pairs", "runs")

    def __init__(self) -> None:
        #: (gap_s, count): ``count`` tokens came ``gap_s`` after their previous one.
        self.pairs: list[tuple[float, int]] = []
        #: (first_s, rise_s, steps, count): gaps first_s, first_s + rise_s, ... (steps
        #: of them), each for ``count`` tokens.
        self.runs: list[tuple[float, float, int, int]] = []
        self.hist = LatencyHistogram()

    def add(self, gap_s: float, count: int) -> None:
        """``count`` tokens came ``gap_s`` after their request's previous one."""
        self.pairs.append((gap_s, count))

    def add_run(self, first_s: float, rise_s: float, steps: int, count: int) -> None:
        """``steps`` gaps first_s, first_s + rise_s, ..., each for ``count`` tokens."""
        self.runs.append((first_s, rise_s, steps, count))

    def pending(self) -> tuple[np.ndarray, np.ndarray]:
        """The gaps booked since the last frame, as values and counts."""
        flat = np.fromiter(chain.from_iterable(self.pairs), np.float64, 2 * len(self.pairs))
        values, weights = flat[0::2], flat[1::2].astype(np.int64)
        if not self.runs:
            return values, weights
        runs = np.array(self.runs, dtype=np.float64)
        steps = runs[:, 2].astype(np.int64)
        starts = np.cumsum(steps) - steps
        j = np.arange(int(steps.sum()), dtype=np.float64) - np.repeat(starts, steps)
        run_values = np.repeat(runs[:, 0], steps) + np.repeat(runs[:, 1], steps) * j
        run_weights = np.repeat(runs[:, 3].astype(np.int64), steps)
        return np.concatenate([values, run_values]), np.concatenate([weights, run_weights])

    def frame(self) -> tuple[np.ndarray, np.ndarray]:
        """Close the frame: its gaps (added to the run's histogram)."""
        values, weights = self.pending()
        self.pairs.clear()
        self.runs.clear()
        self.hist.add_weighted(values, weights)
        return values, weights

    def run_histogram(self, extra: GapBook | None = None) -> LatencyHistogram:
        """The run's gaps so far (those of the open frame included, and ``extra``'s)."""
        hist = LatencyHistogram()
        hist.merge(self.hist)
        hist.add_weighted(*self.pending())
        if extra is not None:
            hist.add_weighted(*extra.pending())
        return hist
