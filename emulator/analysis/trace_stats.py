"""Statistics of a request trace: how many requests, over how long, how the rate moves
minute by minute, and how prompt and output lengths are spread.

Used by ``python -m emulator trace-stats``; the dict form is what ``--json`` prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from emulator.scenario.traces import Trace

#: Width of the rate-over-time bins, in seconds of trace time.
MINUTE_S = 60.0
PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class LengthStats:
    """The spread of one token-count column."""

    mean: float
    p50: float
    p90: float
    p99: float
    max: int
    min: int

    @classmethod
    def of(cls, values: np.ndarray) -> LengthStats:
        """Mean, percentiles (numpy's linear interpolation), max and min of ``values``."""
        p50, p90, p99 = (float(v) for v in np.percentile(values, PERCENTILES))
        return cls(
            mean=float(values.mean()), p50=p50, p90=p90, p99=p99,
            max=int(values.max()), min=int(values.min()),
        )


@dataclass(frozen=True)
class TraceStats:
    """What ``trace-stats`` reports about a trace.

    ``per_minute_qps[k]`` is the arrivals in ``[60 k, 60 (k + 1))`` seconds after the
    first row, divided by 60; the last minute is usually partial, so it is left out of
    the mean and the peak (it would read low) unless it is the only one.
    """

    name: str
    count: int
    duration_s: float
    mean_qps: float | None
    per_minute_qps: tuple[float, ...]
    mean_minute_qps: float
    peak_minute_qps: float
    min_minute_qps: float
    prompt_tokens: LengthStats
    output_tokens: LengthStats
    models: dict[str, int] | None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict of every figure."""
        return {
            "name": self.name,
            "count": self.count,
            "duration_s": self.duration_s,
            "mean_qps": self.mean_qps,
            "rate_over_time": {
                "bin_s": MINUTE_S,
                "per_minute_qps": list(self.per_minute_qps),
                "mean_minute_qps": self.mean_minute_qps,
                "peak_minute_qps": self.peak_minute_qps,
                "min_minute_qps": self.min_minute_qps,
            },
            "prompt_tokens": self.prompt_tokens.__dict__.copy(),
            "output_tokens": self.output_tokens.__dict__.copy(),
            "models": self.models,
        }


def trace_stats(trace: Trace) -> TraceStats:
    """The statistics of ``trace`` (which has at least one row, as every read trace has)."""
    minute = np.floor(trace.arrival_s / MINUTE_S).astype(np.int64)
    counts = np.bincount(minute)
    rates = counts / MINUTE_S
    whole = rates[:-1] if rates.size > 1 else rates
    models = None
    if trace.model is not None:
        names, n = np.unique(np.array(trace.model), return_counts=True)
        models = {str(k): int(v) for k, v in zip(names, n, strict=True)}
    return TraceStats(
        name=trace.name,
        count=len(trace),
        duration_s=trace.duration_s,
        mean_qps=trace.mean_qps,
        per_minute_qps=tuple(float(r) for r in rates),
        mean_minute_qps=float(whole.mean()),
        peak_minute_qps=float(whole.max()),
        min_minute_qps=float(whole.min()),
        prompt_tokens=LengthStats.of(trace.prompt_tokens),
        output_tokens=LengthStats.of(trace.output_tokens),
        models=models,
    )
