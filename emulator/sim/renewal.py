"""Bursty arrivals: a gamma renewal process carried across arrival chunks.

Gaps between arrivals are gamma with shape ``k = 1 / cv**2``, so their coefficient of
variation is ``cv`` (1 is Poisson; above 1 bursty, below 1 more regular than Poisson).

The process runs in *operational time*: one unit is one expected arrival, and a chunk
of wall-clock time ``[t0, t1)`` covers ``L = integral of rate(t) over [t0, t1)`` units.
Arrivals are the renewal epochs at unit rate, mapped back to simulated time through the
inverse of that integral. With a constant rate this is exactly a gamma renewal process
of the asked rate and cv. With a varying rate (ramp, step, diurnal, burst, or a live
rate change) it is the time-changed process: wherever the rate holds still, the gaps
are gamma with the asked cv; where it moves, they stretch with it. This is chosen over
thinning (drawing at the peak rate and keeping arrivals with probability
``rate(t) / peak``) because thinning with keep probability ``p`` turns a gap cv of
``c`` into ``sqrt(p c**2 + 1 - p)``: the off-peak traffic of a burst shape would be
nearly Poisson whatever ``arrival_cv`` says.

The state carried from one chunk to the next is the operational time left until the
next arrival, so chunk boundaries leave no trace in the gaps. The first arrival is
drawn from the stationary forward-recurrence time (a uniform fraction of a
length-biased gap, ``Gamma(k + 1)``), so a run starts as if the traffic had always
been flowing, not with an arrival at t = 0.
"""

from __future__ import annotations

import math

import numpy as np


class GammaRenewal:
    """One stream of gamma-gap arrivals at unit rate in operational time."""

    def __init__(self, cv: float, rng: np.random.Generator) -> None:
        self.shape = 1.0 / (cv * cv)
        self.cv = cv
        self.rng = rng
        # Length-biased gap times a uniform: the stationary wait to the next arrival.
        self.remaining = float(rng.random() * rng.gamma(self.shape + 1.0, 1.0 / self.shape))

    def epochs(self, units: float) -> np.ndarray:
        """Operational times of the arrivals in the next ``units`` (from 0, increasing),
        and advance the state past them."""
        if units <= 0:
            return np.zeros(0)
        first = self.remaining
        if first >= units:
            self.remaining = first - units
            return np.zeros(0)
        parts = [np.array([first])]
        last = first
        while True:
            # Enough gaps for the rest of the span in one draw, nearly always.
            need = units - last
            n = int(need + 4.0 * self.cv * math.sqrt(need) + 16)
            epochs = last + np.cumsum(self.rng.gamma(self.shape, 1.0 / self.shape, n))
            inside = int(np.searchsorted(epochs, units))
            parts.append(epochs[:inside])
            if inside < n:
                self.remaining = float(epochs[inside] - units)
                return np.concatenate(parts)
            last = float(epochs[-1])


def operational_grid(
    t0: float, t1: float, rate_at: object, breakpoints: tuple[float, ...], cells: int = 32
) -> tuple[np.ndarray, np.ndarray]:
    """Times in ``[t0, t1]`` and the integral of the rate from ``t0`` to each.

    The rate is taken at each cell's midpoint (``rate_at`` maps an array of times to
    rates), with the shape's ``breakpoints`` (where it jumps or bends) added to the grid,
    so steps and bursts are integrated exactly and smooth shapes to well under one
    arrival in a chunk.
    """
    inner = [b for b in breakpoints if t0 < b < t1]
    grid = np.unique(np.concatenate([np.linspace(t0, t1, cells + 1), inner]))
    mid = (grid[:-1] + grid[1:]) / 2.0
    rates = np.maximum(np.asarray(rate_at(mid), dtype=np.float64), 0.0)  # type: ignore[operator]
    cum = np.concatenate([[0.0], np.cumsum(rates * np.diff(grid))])
    return grid, cum


def times_from_epochs(epochs: np.ndarray, grid: np.ndarray, cum: np.ndarray) -> np.ndarray:
    """Simulated times of operational ``epochs`` (inverse of the integrated rate)."""
    if epochs.size == 0:
        return epochs
    # Flat stretches (rate 0) hold no epoch, so the inverse is well defined where used.
    return np.interp(epochs, cum, grid)
