"""The numbers pass: a fleet config's arithmetic, exact and explained.

Every figure is computed with ``fractions.Fraction`` from the scenario's own
numbers (floats are read by their decimal spelling, so 1.5 is exactly 3/2) and
rounded only when shown, by one rule (:func:`show`). Each figure carries a
one-line explanation of how it was computed. :mod:`emulator.analysis.findings`
turns the figures into suggested findings.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction
from typing import Any

from emulator.analysis.placement import PlacementError, exact, make_problem
from emulator.analysis.placement.search import best_fleet
from emulator.scenario import Scenario

__all__ = ["Figure", "NumbersReport", "compute", "show"]

#: Most fleets scored for the best-mix figures, so the numbers pass stays well under a second.
BEST_MIX_LIMIT = 600_000

#: The quiet-hours arrival rate used for "how long a batch takes to fill when traffic is low".
QUIET_QPS = Fraction(1)


def show(value: Fraction | None, unit: str) -> str:
    """The one rounding rule: 3 significant figures (half to even), never fewer than the
    whole-number digits; exact whole numbers shown whole; seconds under 1 shown in ms.
    """
    if value is None:
        return "n/a"
    if unit == "s" and 0 < abs(value) < 1:
        return f"{_round3(value * 1000)} ms"
    text = _round3(value)
    return f"{text}{'x' if unit == 'x' else ''}" if unit in ("x", "") else f"{text} {unit}"


def _round3(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    with localcontext() as ctx:
        ctx.prec = 60
        dec = Decimal(value.numerator) / Decimal(value.denominator)
        magnitude = math.floor(math.log10(abs(float(value))))
        places = max(0, 2 - magnitude)
        rounded = dec.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_EVEN)
    text = format(rounded, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


@dataclass(frozen=True)
class Figure:
    """One computed number, its unit, and a one-line account of how it was computed."""

    key: str
    label: str
    model: str  # a model name, or "fleet"
    value: Fraction | None  # None: undefined (e.g. utilisation with no capacity)
    unit: str
    explain: str

    @property
    def display(self) -> str:
        """The value as shown, by the one rounding rule."""
        return show(self.value, self.unit)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form, as in the numbers interface."""
        return {
            "key": self.key,
            "label": self.label,
            "model": self.model,
            "value": None if self.value is None else float(self.value),
            "display": self.display,
            "unit": self.unit,
            "explain": self.explain,
        }


@dataclass
class NumbersReport:
    """All figures of one scenario, and the findings they suggest."""

    scenario: str
    figures: list[Figure] = field(default_factory=list)
    findings: list[dict[str, Any]] = field(default_factory=list)

    def get(self, key: str, model: str = "fleet") -> Figure:
        """The figure with this key for a model (or "fleet"); KeyError if absent."""
        for fig in self.figures:
            if fig.key == key and fig.model == model:
                return fig
        raise KeyError(f"{model}.{key}")

    def value(self, key: str, model: str = "fleet") -> Fraction | None:
        """Exact value of a figure."""
        return self.get(key, model).value

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form: ``{"scenario", "figures": [...], "findings": [...]}``."""
        return {
            "scenario": self.scenario,
            "figures": [f.to_dict() for f in self.figures],
            "findings": [dict(f) for f in self.findings],
        }


def _s(value: Fraction | None, unit: str) -> str:
    return show(value, unit)


def _div(a: Fraction, b: Fraction) -> Fraction | None:
    return None if b == 0 else a / b


class _Builder:
    def __init__(self, report: NumbersReport) -> None:
        self.report = report

    def add(self, key: str, label: str, model: str, value: Fraction | int | None, unit: str, explain: str) -> Fraction | None:
        exact_value = None if value is None else Fraction(value)
        self.report.figures.append(Figure(key, label, model, exact_value, unit, explain))
        return exact_value


def compute(scenario: Scenario) -> NumbersReport:
    """Every figure of the numbers pass for ``scenario``, per model and for the fleet."""
    from emulator.analysis.findings import suggest
    from emulator.analysis.token_numbers import (
        peak_figures,
        token_floors,
        token_rates,
        token_workload,
    )

    report = NumbersReport(scenario.name)
    add = _Builder(report).add
    qps = exact(scenario.traffic.qps)
    peak = exact(scenario.traffic.peak_qps)
    loads = [("avg", "average", qps)]
    if peak > 0:
        loads.append(("peak", "peak", peak))
    batch_tokens = scenario.dispatcher.max_batch_tokens
    batch_s = exact(scenario.worker.batch_s)
    close = None if scenario.dispatcher.close_after_s is None else exact(scenario.dispatcher.close_after_s)
    hosts = scenario.expanded_hosts()
    host_units = [units for _, units, _ in hosts]
    total_units = sum(host_units)

    per_model: dict[str, dict[str, Fraction | None]] = {}
    for name, spec in scenario.models.items():
        tokens = spec.tokens
        fig: dict[str, Fraction | None] = {}
        per_model[name] = fig
        if scenario.batching_of(name) == "continuous":
            load = token_workload(scenario, name)
            wq = token_rates(add, fig, scenario, name, load)
            _shared_figures(add, fig, scenario, name, wq, loads, hosts, host_units, total_units, None)
            peak_figures(add, fig, scenario, name, load, peak > 0)
            token_floors(add, fig, scenario, name, load)
            continue
        b = batch_tokens // tokens if tokens > 0 else 0
        mean_note = " (at the mean size; bigger requests make fewer per batch)" if spec.tokens_cv else ""
        fig["b"] = add("requests_per_batch", "Requests per batch", name, b, "requests",
                       f"{batch_tokens} max batch tokens // {tokens} tokens per request = {b}, whole requests only{mean_note}")
        service_s = batch_s
        if scenario.worker.service == "linear" and b > 0:
            # Service time scales with the batch's tokens; batch_s is a full batch's time.
            service_s = batch_s * Fraction(b * tokens, batch_tokens)
            add("batch_service_s", "Service time of a full batch", name, service_s, "s",
                f"{_s(batch_s, 's')} x {b * tokens} / {batch_tokens} tokens (service linear in tokens)")
        wq = Fraction(b) / service_s
        fig["wq"] = add("worker_qps", "Throughput per worker", name, wq, "QPS",
                        f"{b} requests per batch / {_s(service_s, 's')} per batch = {_s(wq, 'QPS')}"
                        + _service_note(scenario.worker.service))

        def batch_figures(tag: str, word: str, offered: Fraction, fig: dict[str, Fraction | None] = fig,
                          name: str = name, b: int = b, service_s: Fraction = service_s) -> None:
            fill = _div(Fraction(b), offered)
            fig[f"fill_{tag}"] = add(f"fill_time_{tag}_s", f"Batch fill time at {word} traffic", name, fill, "s",
                                     f"{b} requests per batch / {_s(offered, 'QPS')} arriving for {name}")
            _floor_figures(add, fig, tag, word, name, b, offered, fill, close, service_s)

        _shared_figures(add, fig, scenario, name, wq, loads, hosts, host_units, total_units, batch_figures)
        quiet_fill = Fraction(b) / QUIET_QPS
        fig["fill_quiet"] = add("fill_time_quiet_s", "Batch fill time at 1 request/s", name, quiet_fill, "s",
                                f"{b} requests per batch / 1 request a second (quiet hours)")
        _floor_figures(add, fig, "quiet", "1 request/s", name, b, QUIET_QPS, quiet_fill, close, service_s)

    _fleet_figures(add, scenario, per_model, loads, batch_s, host_units)
    report.findings.extend(suggest(scenario, report))
    return report


def _shared_figures(add: Any, fig: dict[str, Fraction | None], scenario: Scenario, name: str,
                    wq: Fraction | None, loads: list[tuple[str, str, Fraction]],
                    hosts: list[Any], host_units: list[int], total_units: int,
                    per_load: Callable[[str, str, Fraction], None] | None) -> None:
    """The figures every worker model shares, from its throughput per worker ``wq``:
    placed capacity, the most workers the hosts hold, one host's loss, and per load the
    utilisation, the workers needed and the queue's growth (then ``per_load``'s own)."""
    spec = scenario.models[name]
    share = exact(spec.share)
    wq = wq or Fraction(0)
    placed = scenario.worker_count(name)
    fig["placed"] = add("workers_placed", "Workers placed", name, placed, "workers",
                        f"{placed} {name} workers counted on the {len(hosts)} hosts as configured")
    cap = placed * wq
    fig["cap"] = add("capacity_qps", "Capacity of the placed workers", name, cap, "QPS",
                     f"{placed} workers x {_s(wq, 'QPS')} each = {_s(cap, 'QPS')}")
    alone = sum(u // spec.worker_units for u in host_units)
    fig["alone"] = add("most_workers", f"Most {name} workers these hosts could hold", name, alone, "workers",
                       f"if every host held only {name} workers: {total_units} units in {len(hosts)} hosts, "
                       f"{spec.worker_units} adjacent units each, per host rounded down = {alone}")
    alone_cap = alone * wq
    fig["alone_cap"] = add("most_capacity_qps", f"Capacity if the hosts held only {name}", name, alone_cap, "QPS",
                           f"{alone} workers x {_s(wq, 'QPS')} = {_s(alone_cap, 'QPS')}")
    on_host = [(sum(1 for w in slots if w.model == name), index) for index, _, slots in hosts]
    most_here, worst_host = max(on_host, key=lambda t: (t[0], -t[1])) if on_host else (0, 0)
    left = (placed - most_here) * wq
    fig["cap_lost"] = add("capacity_one_host_lost_qps", "Capacity after losing the worst host", name, left,
                          "QPS", f"losing host:{worst_host}, which carries the most {name} workers "
                          f"({most_here} of {placed}): {placed - most_here} x {_s(wq, 'QPS')}")
    for tag, word, total in loads:
        offered = total * share
        fig[f"off_{tag}"] = add(f"offered_{tag}_qps", f"Offered load at {word} traffic", name, offered, "QPS",
                                f"{_s(total, 'QPS')} x share {float(share):g} = {_s(offered, 'QPS')}")
        util = _div(offered, cap)
        fig[f"util_{tag}"] = add(f"utilisation_{tag}", f"Utilisation at {word} traffic", name, util, "x",
                                 f"{_s(offered, 'QPS')} offered / {_s(cap, 'QPS')} capacity of the placed workers"
                                 + (" (no workers: undefined)" if util is None else ""))
        need = _div(offered, wq)
        fig[f"need_{tag}"] = add(f"workers_needed_{tag}", f"Workers needed at {word} traffic", name, need, "workers",
                                 f"{_s(offered, 'QPS')} / {_s(wq, 'QPS')} per worker, before rounding up")
        whole = None if need is None else math.ceil(need)
        fig[f"whole_{tag}"] = add(f"whole_workers_{tag}", f"Whole workers needed at {word} traffic", name, whole,
                                  "workers", f"{_s(need, 'workers')} rounded up to whole workers")
        growth = max(Fraction(0), offered - cap)
        fig[f"growth_{tag}"] = add(
            f"queue_growth_{tag}", f"Queue growth at {word} traffic", name, growth, "requests/s",
            f"{_s(offered, 'QPS')} arriving - {_s(cap, 'QPS')} served by the placed workers"
            if growth > 0 else f"capacity {_s(cap, 'QPS')} covers {_s(offered, 'QPS')}: the queue does not grow")
        if per_load is not None:
            per_load(tag, word, offered)


def _service_note(service: str) -> str:
    if service == "linear":
        return " (service linear in tokens)"
    if service == "lognormal":
        return " (service is lognormal: batch_s is its mean)"
    return ""


def _floor_figures(add: Any, fig: dict[str, Fraction | None], tag: str, word: str, name: str, b: int,
                   rate: Fraction, fill: Fraction | None, close: Fraction | None, batch_s: Fraction) -> None:
    if fill is None:
        waited, how = close, "no arrivals: a batch fills only by the close rule"
    elif close is not None and close < fill:
        waited, how = close, f"the batch closes after {_s(close, 's')}, before {_s(fill, 's')} to fill"
    else:
        waited, how = fill, f"fill {_s(fill, 's')}" + (" (no close rule)" if close is None else "")
    floor = None if waited is None else waited + batch_s
    fig[f"floor_{tag}"] = add(f"latency_floor_{tag}_s", f"Latency floor at {word}", name, floor, "s",
                              f"{how} + {_s(batch_s, 's')} in the worker; queueing comes on top")
    mean_wait = _div(Fraction(b - 1), 2 * rate) if b > 0 else None
    if mean_wait is not None and close is not None:
        mean_wait = min(mean_wait, close)
    fig[f"wait_{tag}"] = add(f"batch_wait_{tag}_s", f"Mean wait inside a filling batch at {word}", name, mean_wait, "s",
                             f"({b} - 1) / (2 x {_s(rate, 'QPS')}): the average request waits for half the rest"
                             + (f", capped at {_s(close, 's')}" if close is not None else ""))
    in_system = None if floor is None else rate * floor
    fig[f"little_{tag}"] = add(f"in_system_{tag}", f"Requests in the system at {word} (Little's law)", name, in_system,
                               "requests", f"{_s(rate, 'QPS')} x {_s(floor, 's')} latency floor: at least this many "
                               "requests are in flight")


def _fleet_figures(add: Any, scenario: Scenario, per_model: dict[str, dict[str, Fraction | None]],
                   loads: list[tuple[str, str, Fraction]], batch_s: Fraction, host_units: list[int]) -> None:
    names = list(scenario.models)
    sizes = {n: scenario.models[n].worker_units for n in names}
    wqs = {n: per_model[n]["wq"] or Fraction(0) for n in names}
    bs = {per_model[n]["b"] for n in names}
    if len(bs) == 1 and None not in bs:
        b = int(bs.pop() or 0)
        add("requests_per_batch", "Requests per batch", "fleet", b, "requests", "the same for every model")
    else:
        b = None
    if len(set(wqs.values())) == 1:
        add("worker_qps", "Throughput per worker", "fleet", wqs[names[0]], "QPS", "the same for every model")
    placed = sum(per_model[n]["placed"] or 0 for n in names)
    cap = sum((per_model[n]["cap"] or Fraction(0) for n in names), Fraction(0))
    add("workers_placed", "Workers placed", "fleet", placed, "workers",
        " + ".join(f"{_s(per_model[n]['placed'], '')} {n}" for n in names))
    add("capacity_qps", "Capacity of the placed workers", "fleet", cap, "QPS",
        " + ".join(f"{_s(per_model[n]['cap'], 'QPS')} {n}" for n in names))
    # Most workers, fleet-wide: fill every host with the type that serves the most QPS per host.
    per_host = []
    for units in host_units:
        per_host.append(max(((units // sizes[n]) * wqs[n], units // sizes[n], n) for n in names))
    most_cap = sum((c for c, _, _ in per_host), Fraction(0))
    most_workers = sum(k for _, k, _ in per_host)
    kinds = sorted({n for _, _, n in per_host})
    which = f"every host filled with {' or '.join(kinds)} workers"
    add("most_workers", "Most workers these hosts could hold", "fleet", most_workers, "workers",
        f"{which} (the mix serving the most QPS, ignoring the split): {sum(host_units)} units")
    add("most_capacity_qps", "Most capacity these hosts could give", "fleet", most_cap, "QPS",
        f"{most_workers} workers x their throughput, {which}")
    _best_mix_figures(add, scenario, names, sizes, wqs, host_units)
    for tag, word, total in loads:
        add(f"offered_{tag}_qps", f"Offered load at {word} traffic", "fleet", total, "QPS",
            f"traffic.{'qps' if tag == 'avg' else 'peak_qps'}, all models together")
        util = _div(total, cap)
        add(f"utilisation_{tag}", f"Utilisation at {word} traffic", "fleet", util, "x",
            f"{_s(total, 'QPS')} / {_s(cap, 'QPS')} placed capacity, all models together "
            "(one model can saturate first)")
        need = sum((per_model[n][f"need_{tag}"] or Fraction(0) for n in names), Fraction(0))
        add(f"workers_needed_{tag}", f"Workers needed at {word} traffic", "fleet", need, "workers",
            " + ".join(f"{_s(per_model[n][f'need_{tag}'], '')} {n}" for n in names) + ", before rounding up")
        whole = sum(int(per_model[n][f"whole_{tag}"] or 0) for n in names)
        add(f"whole_workers_{tag}", f"Whole workers needed at {word} traffic", "fleet", whole, "workers",
            " + ".join(f"{_s(per_model[n][f'whole_{tag}'], '')} {n}" for n in names) + ", each model rounded up")
        add(f"gap_{tag}", f"Gap factor at {word} traffic", "fleet", _div(total, most_cap), "x",
            f"{_s(total, 'QPS')} offered / {_s(most_cap, 'QPS')} with the most workers these hosts could hold")
        add(f"gap_placed_{tag}", f"Gap factor at {word} traffic, placed workers", "fleet", _div(total, cap), "x",
            f"{_s(total, 'QPS')} offered / {_s(cap, 'QPS')} from the workers actually placed")
        most_growth = max(Fraction(0), total - most_cap)
        add(f"queue_growth_most_{tag}", f"Queue growth at {word} traffic, most workers", "fleet", most_growth,
            "requests/s", f"{_s(total, 'QPS')} arriving - {_s(most_cap, 'QPS')} served even with the most "
            "workers these hosts could hold")
        growth = sum((per_model[n][f"growth_{tag}"] or Fraction(0) for n in names), Fraction(0))
        add(f"queue_growth_{tag}", f"Queue growth at {word} traffic, placed workers", "fleet", growth, "requests/s",
            " + ".join(f"{_s(per_model[n][f'growth_{tag}'], '')} {n}" for n in names)
            + " requests/s: each model's queue grows alone")
        if b:
            fill = _div(Fraction(b), total)  # None when there is no traffic
            add(f"fill_time_{tag}_s", f"Batch fill time at {word} traffic, all traffic to one dispatcher", "fleet",
                fill, "s", f"{b} requests / {_s(total, 'QPS')}: as if one dispatcher saw every request "
                "(each model's own dispatcher sees only its share: see per model)")
    if any(scenario.batching_of(n) != "static" for n in names):
        return  # continuous batching: each model's TTFT and TPOT floors say it
    linear = " for a batch of max_batch_tokens (service is linear in tokens)" if scenario.worker.service == "linear" else ""
    add("latency_floor_s", "Latency floor", "fleet", batch_s, "s",
        f"no request in a full batch finishes before one batch's service time (worker.batch_s){linear}")


def _best_mix_figures(add: Any, scenario: Scenario, names: list[str], sizes: dict[str, int],
                      wqs: dict[str, Fraction], host_units: list[int]) -> None:
    # The solver assumes identical hosts; a mixed fleet is described per model only.
    if not host_units or len(set(host_units)) != 1 or any(w == 0 for w in wqs.values()):
        return
    split = {n: exact(scenario.models[n].share) for n in names}
    if sum(split.values()) != 1:
        return
    try:
        problem = make_problem(len(host_units), host_units[0], sizes, split, qps_per_worker=wqs)
        best = best_fleet(problem, failures=False, limit=BEST_MIX_LIMIT)
        robust = best_fleet(problem, failures=True, limit=BEST_MIX_LIMIT)
    except PlacementError as exc:
        for key, label in (("best_mix_qps", "Most total traffic at this split, best mix"),
                           ("best_mix_one_host_lost_qps", "Most total traffic at this split surviving one host loss")):
            add(key, label, "fleet", None, "QPS", f"not computed: {exc}")
        return
    label = best.label(names)
    add("best_mix_qps", "Most total traffic at this split, best mix", "fleet", best.worst_ratio, "QPS",
        f"\"{label}\": the mix whose first saturating model saturates last (capacity / share, no failure)")
    add("best_mix_one_host_lost_qps", "Most total traffic at this split surviving one host loss", "fleet",
        robust.worst_ratio, "QPS", f"\"{robust.label(names)}\": the best worst case over losing any one host "
        "(python -m emulator place)")
