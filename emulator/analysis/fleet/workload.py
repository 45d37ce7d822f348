"""One model's requests as the analysis sees them: the moments of its prompt and output
sizes, the share of prompts under a length, shared prefixes, and for a trace the rate
at which the run replays it.

Sizes drawn by the emulator are lognormal around the model's mean with its coefficient
of variation (``tokens_cv``, ``output_tokens_cv``), so their moments are exact:
E[X^2] = mean^2 (1 + cv^2). A trace gives its rows' own sizes: the rows the run replays
(``traffic.trace_speedup`` over ``duration_s``), not the whole file.

A running sequence holds its prompt and the tokens it generated so far; weighted by how
long it runs (its output length), its mean KV is E[P O] / E[O] + (E[O^2] / E[O] + 1) / 2,
which for independent lognormal sizes of cv 1 is the mean prompt plus the mean output,
not half of it: long answers stay longest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from emulator.scenario import Scenario
from emulator.scenario.traces import load_trace, replay_times

__all__ = ["PrefixLoad", "SizeLaw", "Workload", "workload_of"]

#: The window of a trace's peak rate.
PEAK_WINDOW_S = 60


@dataclass(frozen=True)
class SizeLaw:
    """A size distribution: a constant, a lognormal of this mean and cv, or a trace's rows."""

    mean: float
    cv: float = 0.0
    rows: np.ndarray | None = field(default=None, compare=False, repr=False)

    @property
    def sq(self) -> float:
        """E[X^2]."""
        if self.rows is not None:
            return float(np.mean(self.rows.astype(np.float64) ** 2))
        return self.mean * self.mean * (1.0 + self.cv * self.cv)

    def _lognormal(self) -> tuple[float, float]:
        sigma = math.sqrt(math.log1p(self.cv * self.cv))
        return math.log(self.mean) - sigma * sigma / 2, sigma

    def share_at_most(self, a: float) -> float:
        """P(X <= a)."""
        if self.rows is not None:
            return float(np.mean(self.rows <= a)) if self.rows.size else 0.0
        if self.cv == 0:
            return 1.0 if self.mean <= a else 0.0
        if a <= 0:
            return 0.0
        mu, sigma = self._lognormal()
        return _phi((math.log(a) - mu) / sigma)

    def mean_at_most(self, a: float) -> float:
        """E[min(X, a)]: the mean of the sizes cut at ``a``."""
        if self.rows is not None:
            return float(np.mean(np.minimum(self.rows, a))) if self.rows.size else 0.0
        if self.cv == 0:
            return min(self.mean, a)
        if a <= 0:
            return 0.0
        mu, sigma = self._lognormal()
        below = self.mean * _phi((math.log(a) - mu - sigma * sigma) / sigma)
        return below + a * (1.0 - _phi((math.log(a) - mu) / sigma))


    def moments_between(self, lo: float, hi: float) -> tuple[float, float, float]:
        """(P(lo < X <= hi), E[X; lo < X <= hi], E[X^2; lo < X <= hi]): the partial
        moments of the sizes in a range (each term weighted by the range's share)."""
        if hi <= lo:
            return 0.0, 0.0, 0.0
        if self.rows is not None:
            if not self.rows.size:
                return 0.0, 0.0, 0.0
            x = self.rows.astype(np.float64)
            inside = (x > lo) & (x <= hi)
            n = float(x.size)
            return float(inside.sum()) / n, float(x[inside].sum()) / n, float((x[inside] ** 2).sum()) / n
        if self.cv == 0:
            m = self.mean
            return (1.0, m, m * m) if lo < m <= hi else (0.0, 0.0, 0.0)
        mu, sigma = self._lognormal()

        def below(a: float, k: int) -> float:
            if a <= 0:
                return 0.0
            if math.isinf(a):
                return math.exp(k * mu + k * k * sigma * sigma / 2)
            return math.exp(k * mu + k * k * sigma * sigma / 2) * _phi((math.log(a) - mu - k * sigma * sigma) / sigma)

        return tuple(below(hi, k) - below(lo, k) for k in range(3))  # type: ignore[return-value]


def _phi(z: float) -> float:
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


@dataclass(frozen=True)
class PrefixLoad:
    """Shared prefixes: each group's share of the requests and its prefix tokens."""

    shares: np.ndarray = field(compare=False, repr=False)  # per group, summing to the share with a prefix
    tokens: np.ndarray = field(compare=False, repr=False)  # per group, its prefix tokens
    prefixed: float  # share of requests that carry a prefix
    mean_tokens: float  # E[prefix tokens of a request] (prefixed requests only), cut by the prompt

    @property
    def groups(self) -> int:
        return int(self.shares.size)


@dataclass(frozen=True)
class Workload:
    """One model's requests: sizes, where they come from, and a trace's rates."""

    prompt: SizeLaw
    output: SizeLaw
    #: E[P O] / E[O]: the prompt of a running sequence, weighted by its decode time.
    prompt_running: float
    source: str
    inputs: tuple[str, ...]
    prefix: PrefixLoad | None = None
    #: A trace's arrivals as the run replays them (seconds of run time), else None.
    arrivals_s: np.ndarray | None = field(default=None, compare=False, repr=False)
    mean_qps: float | None = None  # a trace's replayed mean rate for this model
    peak_qps: float | None = None  # a trace's busiest minute (replayed), for this model
    peak_how: str = ""

    @property
    def kv_running(self) -> float:
        """A running sequence's mean KV tokens, weighted by how long it runs."""
        o = self.output
        return self.prompt_running + (o.sq / o.mean + 1.0) / 2.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt_mean": self.prompt.mean, "prompt_cv": self.prompt.cv,
            "output_mean": self.output.mean, "output_cv": self.output.cv,
            "kv_running": self.kv_running, "source": self.source,
            "mean_qps": self.mean_qps, "peak_qps": self.peak_qps, "peak_how": self.peak_how,
        }


def workload_of(scenario: Scenario, name: str) -> Workload:
    """``name``'s requests as the run offers them."""
    spec = scenario.models[name]
    t = scenario.traffic
    path = f"models.{name}"
    if t.trace is None:
        prompt = SizeLaw(float(spec.tokens), float(spec.tokens_cv))
        output = SizeLaw(float(spec.output_tokens), float(spec.output_tokens_cv))
        inputs = [f"{path}.tokens", f"{path}.output_tokens"]
        inputs += [f"{path}.{k}" for k in ("tokens_cv", "output_tokens_cv") if getattr(spec, k)]
        prefix = _drawn_prefixes(scenario, name, prompt)
        if prefix is not None:
            inputs += [f"{path}.prefixes.groups", f"{path}.prefixes.prefix_tokens", f"{path}.prefixes.zipf_s"]
        return Workload(prompt, output, prompt.mean, "the model's mean sizes", tuple(inputs), prefix)
    return _trace_workload(scenario, name)


def _drawn_prefixes(scenario: Scenario, name: str, prompt: SizeLaw) -> PrefixLoad | None:
    p = scenario.models[name].prefixes
    if p is None:
        return None
    weights = np.arange(1, p.groups + 1, dtype=np.float64) ** -p.zipf_s
    shares = weights / weights.sum()
    tokens = np.full(p.groups, float(p.prefix_tokens))
    return PrefixLoad(shares, tokens, 1.0, prompt.mean_at_most(p.prefix_tokens))


def _trace_workload(scenario: Scenario, name: str) -> Workload:
    t = scenario.traffic
    spec = scenario.models[name]
    trace = load_trace(t.trace)  # type: ignore[arg-type]
    rows, times = replay_times(trace, speedup=t.trace_speedup, start_s=t.trace_start_s, loop=t.trace_loop,
                               until_s=scenario.duration_s)
    keep = times < scenario.duration_s
    rows, times = rows[keep], times[keep]
    share = 1.0
    if trace.model is not None:
        mine = np.array([trace.model[i] == name for i in rows], dtype=bool)
        rows, times = rows[mine], times[mine]
    elif len(scenario.models) > 1:
        share = float(spec.share)
    inputs = ("traffic.trace", "traffic.trace_speedup")
    if rows.size == 0:
        prompt = SizeLaw(float(spec.tokens), float(spec.tokens_cv))
        output = SizeLaw(float(spec.output_tokens), float(spec.output_tokens_cv))
        return Workload(prompt, output, prompt.mean, f"the model's mean sizes (no {name} rows in the trace)",
                        (f"models.{name}.tokens", f"models.{name}.output_tokens"), mean_qps=0.0, peak_qps=0.0)
    p = trace.prompt_tokens[rows].astype(np.int64)
    o = trace.output_tokens[rows].astype(np.int64)
    prompt = SizeLaw(float(p.mean()), float(p.std() / p.mean()), rows=p)
    output = SizeLaw(float(o.mean()), float(o.std() / o.mean()), rows=o)
    running = float((p.astype(np.float64) * o).sum() / o.sum())
    duration = scenario.duration_s
    mean_qps = rows.size / duration * share
    # The most arrivals in any window of PEAK_WINDOW_S run seconds starting at an arrival.
    ends = times.searchsorted(times + PEAK_WINDOW_S, side="left")
    most = int((ends - np.arange(times.size)).max())
    peak = most / PEAK_WINDOW_S * share
    how = (f"the busiest {PEAK_WINDOW_S} s of the replayed trace: {most:,} arrivals"
           + (f" x share {share:g}" if share != 1.0 else ""))
    prefix = None
    if trace.prefix_group is not None and trace.prefix_tokens is not None:
        groups = trace.prefix_group[rows]
        has = groups >= 0
        if has.any():
            ids, counts = np.unique(groups[has], return_counts=True)
            per = np.zeros(ids.size)
            for k, g in enumerate(ids):
                per[k] = float(trace.prefix_tokens[rows][groups == g].max())
            cut = np.minimum(trace.prefix_tokens[rows][has], p[has])
            prefix = PrefixLoad(counts / rows.size, per, float(has.mean()), float(cut.mean()))
    source = f"the replayed trace's sizes over {rows.size:,} requests"
    return Workload(prompt, output, running, source, inputs, prefix,
                    arrivals_s=times if share == 1.0 else None, mean_qps=mean_qps, peak_qps=peak, peak_how=how)
