"""Arrivals at the gateway, generated in bulk a chunk of simulated time ahead.

Fresh requests are a Poisson process at ``traffic.rate_at(t)`` (thinning when the
shape varies), or with ``traffic.arrival = "gamma"`` a gamma renewal process with gaps
of coefficient of variation ``arrival_cv`` (``emulator.sim.renewal``), split among models
by share, each with its token count and its output
tokens (drawn from a stream of their own, and only when they vary, so the prompt
sizes and arrival times of a seed do not depend on them). With ``traffic.trace`` the
fresh requests are the trace's rows instead, each with exactly its sizes. Retries are
merged in at their re-send time. The gateway's per-key rate limit is a fixed one-second
window: with ``shared_counter`` one counter per key, otherwise one per key and gateway
instance (a client lands on a random instance), so a key gets up to ``instances``
times the limit. Requests over the limit are shed at admission.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from emulator.scenario import Scenario
from emulator.scenario.traces import load_trace, replay_times
from emulator.sim.prefixes import PrefixDraw
from emulator.sim.renewal import GammaRenewal, operational_grid, times_from_epochs


@dataclass
class Arrivals:
    """One chunk of attempts at the gateway, in time order."""

    time: np.ndarray
    model: np.ndarray
    tokens: np.ndarray
    key: np.ndarray
    attempt: np.ndarray
    ctr: np.ndarray
    admitted: np.ndarray
    output: np.ndarray
    #: Each attempt's shared-prefix group (-1: none) and prefix tokens (0: none).
    group: np.ndarray = None  # type: ignore[assignment]  # filled by __post_init__
    prefix: np.ndarray = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.group is None:
            self.group = np.full(self.time.size, -1, dtype=np.int64)
        if self.prefix is None:
            self.prefix = np.zeros(self.time.size, dtype=np.int64)

    def select(self, mask: np.ndarray | slice) -> Arrivals:
        """The attempts picked by ``mask`` (a boolean mask, an index array or a slice)."""
        return Arrivals(*(getattr(self, f)[mask] for f in FIELDS))


#: The fields of ``Arrivals``, in order.
FIELDS = ("time", "model", "tokens", "key", "attempt", "ctr", "admitted", "output", "group", "prefix")


def chunk_length(scenario: Scenario) -> float:
    """Length of an arrival chunk: a divisor of one second, and no longer than the retry
    backoff, so every retry is known before the chunk it lands in is generated."""
    span = 1.0
    if scenario.client.retries > 0:
        span = min(span, scenario.client.retry_backoff_s)
    return 1.0 / math.ceil(1.0 / span - 1e-9)


class ArrivalSource:
    """Generates attempts chunk by chunk and keeps the rate limiter's counters."""

    def __init__(
        self,
        scenario: Scenario,
        rng: np.random.Generator,
        output_rng: np.random.Generator | None = None,
        gap_rng: np.random.Generator | None = None,
        prefix_rng: np.random.Generator | None = None,
    ) -> None:
        self.traffic = scenario.traffic
        # Gamma gaps come from a stream of their own, so Poisson runs draw exactly as
        # before and a gamma run's sizes and keys come from the usual stream.
        self.gamma = scenario.traffic.arrival == "gamma" and scenario.traffic.trace is None
        self.gap_rng = gap_rng or rng
        self._renewals: dict[int, GammaRenewal] = {}
        self.qps_override: float | None = None
        self.rng = rng
        self.output_rng = output_rng or rng
        models = list(scenario.models.values())
        self.n_models = len(models)
        self.shares = [m.share for m in models]
        self.cum_share = np.cumsum(self.shares)
        self.tokens = np.array([m.tokens for m in models], dtype=np.int64)
        self.tokens_cv = np.array([m.tokens_cv for m in models])
        self.output = np.array([m.output_tokens for m in models], dtype=np.int64)
        self.output_cv = np.array([m.output_tokens_cv for m in models])
        self.replay: Arrivals | None = None
        self.prefix: PrefixDraw | None = None
        if any(m.prefixes is not None for m in models):
            self.prefix = PrefixDraw(
                scenario, prefix_rng or np.random.default_rng(0), _trace_groups(scenario)
            )
        if scenario.traffic.trace is not None:
            self.replay = self._replay(scenario)
        gw = scenario.gateway
        self.limit = int(gw.rate_limit_qps)
        self.keys = gw.keys
        self.instances = 1 if gw.shared_counter else gw.instances
        self.counts = np.zeros(self.keys * self.instances, dtype=np.int64)
        self.window = -1
        self._retry: list[Arrivals] = []

    def _replay(self, scenario: Scenario) -> Arrivals:
        """Every fresh request of the run from the trace: its rows at their replay times,
        each with its own sizes; rows without a model are split by share."""

        t = scenario.traffic
        assert t.trace is not None
        trace = load_trace(t.trace)
        rows, times = replay_times(
            trace,
            speedup=t.trace_speedup,
            start_s=t.trace_start_s,
            loop=t.trace_loop,
            until_s=scenario.duration_s,
        )
        n = rows.size
        if trace.model is not None:
            index = {name: i for i, name in enumerate(scenario.models)}
            model = np.array([index[name] for name in trace.model], dtype=np.int64)[rows]
        elif self.n_models > 1:
            model = np.minimum(
                np.searchsorted(self.cum_share, self.rng.random(n), side="right"),
                self.n_models - 1,
            ).astype(np.int64)
        else:
            model = np.zeros(n, dtype=np.int64)
        zeros = np.zeros(n, dtype=np.int64)
        replay = Arrivals(
            time=times,
            model=model,
            tokens=trace.prompt_tokens[rows].astype(np.int64),
            key=zeros,
            attempt=zeros.astype(np.int16),
            ctr=zeros.copy(),
            admitted=np.ones(n, dtype=bool),
            output=trace.output_tokens[rows].astype(np.int64),
        )
        if trace.prefix_group is not None and trace.prefix_tokens is not None:
            replay.group = trace.prefix_group[rows].astype(np.int64)
            replay.prefix = trace.prefix_tokens[rows].astype(np.int64)
        if self.prefix is not None:
            bare = np.flatnonzero(replay.group < 0)  # rows that name no prefix draw one
            group, prefix = self.prefix.draw(replay.model[bare], replay.tokens[bare])
            replay.group[bare], replay.prefix[bare] = group, prefix
        return replay

    def _replayed(self, t0: float, t1: float) -> Arrivals:
        """The trace's requests arriving in ``[t0, t1)``, with gateway keys drawn when a
        rate limit needs them."""
        assert self.replay is not None
        times = self.replay.time
        part = self.replay.select(
            slice(int(np.searchsorted(times, t0)), int(np.searchsorted(times, t1)))
        )
        if self.limit and part.time.size:
            part.key = self.rng.integers(0, self.keys, part.time.size)
        return part

    def set_rate(self, qps: float) -> None:
        """Make fresh traffic constant at ``qps`` (all models) from the next draw on."""
        self.qps_override = qps

    # -- fresh traffic -------------------------------------------------------------
    def rate_of(self, times: np.ndarray) -> np.ndarray:
        """Offered rate (all models) at each of ``times``."""
        if self.qps_override is not None:
            return np.full(times.shape, self.qps_override)
        t = self.traffic
        low, high = t.qps, t.peak_qps
        if t.shape == "ramp":
            frac = np.ones_like(times) if t.ramp_s <= 0 else np.clip(times / t.ramp_s, 0.0, 1.0)
            return low + (high - low) * frac
        if t.shape == "step":
            return np.where(times >= t.step_at_s, high, low)
        if t.shape == "diurnal":
            return low + (high - low) * (1.0 - np.cos(2.0 * np.pi * times / t.period_s)) / 2.0
        if t.shape == "burst":
            inside = (times >= t.burst_at_s) & (times < t.burst_at_s + t.burst_s)
            return np.where(inside, high, low)
        return np.full(times.shape, low)

    def _gamma_times(self, stream: int, share: float, t0: float, t1: float) -> np.ndarray:
        """Arrival times in ``[t0, t1)`` of gamma stream ``stream`` (a model, or -1 for
        all models together) carrying ``share`` of the rate; see ``emulator.sim.renewal``."""
        renewal = self._renewals.get(stream)
        if renewal is None:
            renewal = self._renewals[stream] = GammaRenewal(self.traffic.arrival_cv, self.gap_rng)
        if t1 <= t0:
            return np.zeros(0)
        if self.qps_override is not None or self.traffic.shape == "constant":
            base = self.traffic.qps if self.qps_override is None else self.qps_override
            rate = base * share
            if rate <= 0:
                return np.zeros(0)
            times = t0 + renewal.epochs(rate * (t1 - t0)) / rate
        else:
            grid, cum = operational_grid(
                t0, t1, lambda t: self.rate_of(t) * share, self.traffic.breakpoints()
            )
            times = times_from_epochs(renewal.epochs(float(cum[-1])), grid, cum)
        # Rounding must not push an arrival into the next chunk's half-open interval.
        return np.minimum(times, np.nextafter(t1, t0))

    def fresh(self, t0: float, t1: float) -> Arrivals:
        """Fresh (first-attempt) requests arriving in ``[t0, t1)``."""
        if self.replay is not None:
            return self._replayed(t0, t1)
        rng = self.rng
        if self.qps_override is not None:
            top, varying = self.qps_override, False
        else:
            top, varying = self.traffic.max_rate(), self.traffic.shape != "constant"
        if self.gamma:
            times = self._gamma_times(-1, 1.0, t0, t1)
            n = times.size
        else:
            n = int(rng.poisson(top * (t1 - t0))) if top > 0 and t1 > t0 else 0
            times = np.sort(t0 + (t1 - t0) * rng.random(n))
            if varying and n:
                times = times[rng.random(n) * top < self.rate_of(times)]
                n = times.size
        model = (
            np.minimum(
                np.searchsorted(self.cum_share, rng.random(n), side="right"), self.n_models - 1
            )
            if self.n_models > 1
            else np.zeros(n, dtype=np.int64)
        )
        tokens = self.tokens[model]
        if self.tokens_cv.any() and n:
            tokens = self._varied_tokens(model)
        key = rng.integers(0, self.keys, n) if self.limit else np.zeros(n, dtype=np.int64)
        return self._prefixed(
            Arrivals(
                time=times,
                model=model,
                tokens=tokens,
                key=key,
                attempt=np.zeros(n, dtype=np.int16),
                ctr=np.zeros(n, dtype=np.int64),
                admitted=np.ones(n, dtype=bool),
                output=self._outputs(model),
            )
        )

    def _prefixed(self, arr: Arrivals) -> Arrivals:
        """``arr`` with the prefix groups of its fresh requests drawn (models with
        prefixes only; their own stream)."""
        if self.prefix is not None and arr.time.size:
            arr.group, arr.prefix = self.prefix.draw(arr.model, arr.tokens)
        return arr

    # -- retries -------------------------------------------------------------------
    def add_retries(
        self,
        time: np.ndarray,
        model: int,
        tokens: np.ndarray,
        key: np.ndarray,
        attempt: np.ndarray,
        output: np.ndarray | None = None,
        group: np.ndarray | None = None,
        prefix: np.ndarray | None = None,
    ) -> None:
        """Queue re-sends (``attempt`` already counts this one; a re-sent request keeps
        its sizes and its prefix) for their chunk."""
        if time.size == 0:
            return
        n = time.size
        self._retry.append(
            Arrivals(
                time=time.astype(np.float64),
                model=np.full(n, model, dtype=np.int64),
                tokens=tokens.astype(np.int64),
                key=key.astype(np.int64),
                attempt=attempt.astype(np.int16),
                ctr=np.zeros(n, dtype=np.int64),
                admitted=np.ones(n, dtype=bool),
                output=(
                    np.full(n, self.output[model], dtype=np.int64)
                    if output is None
                    else output.astype(np.int64)
                ),
                group=np.full(n, -1, dtype=np.int64) if group is None else group.astype(np.int64),
                prefix=np.zeros(n, dtype=np.int64) if prefix is None else prefix.astype(np.int64),
            )
        )

    def _take_retries(self, t1: float) -> Arrivals | None:
        if not self._retry:
            return None
        pool = _concat(self._retry)
        due = pool.time < t1
        rest = pool.select(~due)
        self._retry = [rest] if rest.time.size else []
        return pool.select(due) if due.any() else None

    # -- a chunk -------------------------------------------------------------------
    def chunk(self, t0: float, t1: float, window: int) -> list[Arrivals]:
        """All attempts in ``[t0, t1)`` (fresh and retries), per model, in time order.

        Without a rate limit each model's Poisson stream is drawn on its own (splitting
        a Poisson process by share gives independent ones); with it, the models' streams
        are drawn together, since an API key's counter spans models.
        """
        retries = self._take_retries(t1)
        if self.limit:
            arr = self.fresh(t0, t1)
            if retries is not None:
                arr = _concat([arr, retries])
                arr = arr.select(np.argsort(arr.time, kind="stable"))
            self.rate_limit(arr, window)
            return self.split(arr)
        out = self.fresh_by_model(t0, t1)
        if retries is not None:
            for m, again in enumerate(self.split(retries)):
                if again.time.size:
                    both = _concat([out[m], again])
                    out[m] = both.select(np.argsort(both.time, kind="stable"))
        return out

    def fresh_by_model(self, t0: float, t1: float) -> list[Arrivals]:
        """Fresh requests in ``[t0, t1)``, drawn model by model (no rate limit)."""
        if self.replay is not None:
            return self.split(self._replayed(t0, t1))
        rng = self.rng
        if self.qps_override is not None:
            top, varying = self.qps_override, False
        else:
            top, varying = self.traffic.max_rate(), self.traffic.shape != "constant"
        out = []
        for m, share in enumerate(self.shares):
            if self.gamma:
                times = self._gamma_times(m, share, t0, t1)
                n = times.size
            else:
                rate = top * share
                n = int(rng.poisson(rate * (t1 - t0))) if rate > 0 and t1 > t0 else 0
                times = np.sort(t0 + (t1 - t0) * rng.random(n))
                if varying and n:
                    times = times[rng.random(n) * top < self.rate_of(times)]
                    n = times.size
            tokens = np.full(n, self.tokens[m], dtype=np.int64)
            if self.tokens_cv[m] > 0 and n:
                tokens = self._varied_tokens(np.full(n, m))
            zeros = np.zeros(n, dtype=np.int64)
            out.append(
                self._prefixed(Arrivals(
                    time=times,
                    model=np.full(n, m, dtype=np.int64),
                    tokens=tokens,
                    key=zeros,
                    attempt=zeros.astype(np.int16),
                    ctr=zeros,
                    admitted=np.ones(n, dtype=bool),
                    output=(
                        np.full(n, self.output[m], dtype=np.int64)
                        if self.output_cv[m] == 0
                        else self._outputs(np.full(n, m, dtype=np.int64))
                    ),
                ))
            )
        return out

    def _outputs(self, model: np.ndarray) -> np.ndarray:
        """Output tokens for requests of ``model``: each model's mean, or lognormal around
        it with its ``output_tokens_cv`` (drawn from the output stream only then)."""
        out = self.output[model]
        if not (self.output_cv.any() and model.size):
            return out
        cv = self.output_cv[model]
        sigma = np.sqrt(np.log1p(cv * cv))
        mu = np.log(out) - sigma * sigma / 2.0
        varied = np.maximum(1, np.rint(np.exp(mu + sigma * self.output_rng.standard_normal(model.size))))
        return np.where(cv > 0, varied.astype(np.int64), out)

    def _varied_tokens(self, model: np.ndarray) -> np.ndarray:
        """Token counts for requests of ``model`` (lognormal around each model's mean)."""
        tokens = self.tokens[model]
        cv = self.tokens_cv[model]
        sigma = np.sqrt(np.log1p(cv * cv))
        mu = np.log(tokens) - sigma * sigma / 2.0
        varied = np.maximum(1, np.rint(np.exp(mu + sigma * self.rng.standard_normal(model.size))))
        return np.where(cv > 0, varied.astype(np.int64), tokens)

    def split(self, arr: Arrivals) -> list[Arrivals]:
        """``arr`` split by model (each part keeps time order)."""
        if self.n_models == 1:
            return [arr]
        ordered = arr.select(np.argsort(arr.model, kind="stable"))
        bounds = np.searchsorted(ordered.model, np.arange(self.n_models + 1))
        return [
            ordered.select(slice(int(bounds[m]), int(bounds[m + 1]))) for m in range(self.n_models)
        ]

    def rate_limit(self, arr: Arrivals, window: int) -> None:
        """Mark which attempts the per-key counters admit in the one-second ``window``."""
        if window != self.window:
            self.counts[:] = 0
            self.window = window
        n = arr.time.size
        if n == 0:
            return
        instance = self.rng.integers(0, self.instances, n) if self.instances > 1 else 0
        arr.ctr = arr.key * self.instances + instance
        order = np.argsort(arr.ctr, kind="stable")  # keeps time order within a counter
        sorted_ctr = arr.ctr[order]
        starts = np.flatnonzero(np.r_[True, sorted_ctr[1:] != sorted_ctr[:-1]])
        first = np.repeat(starts, np.diff(np.r_[starts, n]))
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n) - first + self.counts[sorted_ctr]
        arr.admitted = rank < self.limit
        self.counts += np.bincount(arr.ctr[arr.admitted], minlength=self.counts.size)

    def release(self, ctr: np.ndarray) -> None:
        """Give back rate-limit slots of admitted attempts that were withdrawn."""
        if self.limit and ctr.size:
            self.counts -= np.bincount(ctr, minlength=self.counts.size)


def _trace_groups(scenario: Scenario) -> int:
    """How many prefix ids the scenario's trace names (drawn groups are numbered after)."""
    if scenario.traffic.trace is None:
        return 0

    groups = load_trace(scenario.traffic.trace).prefix_group
    return int(groups.max()) + 1 if groups is not None and groups.size else 0


def _concat(parts: list[Arrivals]) -> Arrivals:
    if len(parts) == 1:
        return parts[0]
    return Arrivals(*(np.concatenate([getattr(p, f) for p in parts]) for f in FIELDS))
