"""The numbers pass: the figures of a fleet config's analysis, each explained.

Every figure comes from the one analysis of the fleet (``emulator.analysis.fleet``):
capacity per model and pool, the floors, the KV check, the headroom under each host's
loss. Figures are exact (``fractions.Fraction``) where the arithmetic is rational and
are rounded only when shown, by one rule (:func:`show`). Each figure carries a one-line
account of how it was computed and the scenario keys it stands on (``inputs``), so a
reader can tell a figure from the doc's numbers from one resting on an assumption.
:mod:`emulator.analysis.findings` turns the figures into suggested findings, and the
headline names the few figures a reader needs first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from emulator.analysis.fleet import analyse
from emulator.analysis.placement import PlacementError, exact, make_problem
from emulator.analysis.placement.search import best_fleet
from emulator.scenario import Scenario

if TYPE_CHECKING:
    from emulator.analysis.fleet import FleetAnalysis

__all__ = ["Figure", "NumbersReport", "compute", "show"]

#: Most fleets scored for the best-mix figures, so the numbers pass stays well under a second.
BEST_MIX_LIMIT = 600_000


def show(value: Fraction | None, unit: str) -> str:
    """The one rounding rule: 3 significant figures (half to even), never fewer than the
    whole-number digits; exact whole numbers shown whole; seconds under 1 shown in ms.
    """
    if value is None:
        return "n/a"
    if unit == "s" and 0 < abs(value) < 1:
        return f"{_round3(value * 1000)} ms"
    if unit == "%":
        return f"{_round3(value * 100)}%"
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
    """One computed number, its unit, a one-line account of how it was computed, and
    the scenario keys (key paths) it stands on."""

    key: str
    label: str
    model: str  # a model name, or "fleet"
    value: Fraction | None  # None: undefined (e.g. utilisation with no capacity)
    unit: str
    explain: str
    inputs: tuple[str, ...] = ()

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
            "inputs": list(self.inputs),
        }


@dataclass
class NumbersReport:
    """All figures of one scenario, the headline, the findings they suggest, and the
    analysis they were read from."""

    scenario: str
    figures: list[Figure] = field(default_factory=list)
    findings: list[dict[str, Any]] = field(default_factory=list)
    headline: list[dict[str, Any]] = field(default_factory=list)
    analysis: FleetAnalysis | None = None

    def get(self, key: str, model: str = "fleet") -> Figure:
        """The figure with this key for a model (or "fleet"); KeyError if absent."""
        for fig in self.figures:
            if fig.key == key and fig.model == model:
                return fig
        raise KeyError(f"{model}.{key}")

    def has(self, key: str, model: str = "fleet") -> bool:
        """Whether the report has this figure."""
        return any(f.key == key and f.model == model for f in self.figures)

    def value(self, key: str, model: str = "fleet") -> Fraction | None:
        """Exact value of a figure."""
        return self.get(key, model).value

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form: ``{"scenario", "figures", "headline", "findings", "analysis"}``."""
        return {
            "scenario": self.scenario,
            "figures": [f.to_dict() for f in self.figures],
            "headline": [dict(h) for h in self.headline],
            "findings": [dict(f) for f in self.findings],
            "analysis": None if self.analysis is None else self.analysis.to_dict(),
        }


class Adder:
    """Appends figures to a report; ``add`` returns the exact value it stored."""

    def __init__(self, report: NumbersReport) -> None:
        self.report = report

    def __call__(self, key: str, label: str, model: str, value: Fraction | int | float | None, unit: str,
                 explain: str, inputs: tuple[str, ...] | list[str] = ()) -> Fraction | None:
        exact_value = None if value is None else Fraction(value)
        self.report.figures.append(Figure(key, label, model, exact_value, unit, explain, tuple(inputs)))
        return exact_value


def div(a: Fraction | None, b: Fraction | None) -> Fraction | None:
    """a / b, None when either is None or b is 0."""
    return None if a is None or b is None or b == 0 else a / b


def compute(scenario: Scenario, analysis: FleetAnalysis | None = None) -> NumbersReport:
    """Every figure of the numbers pass for ``scenario`` (from ``analysis``, worked out
    here when not given), per model and for the fleet, with the headline and findings."""
    # cycle: batch_numbers, findings and token_numbers import this module's helpers at load time
    from emulator.analysis.batch_numbers import batch_figures
    from emulator.analysis.findings import suggest
    from emulator.analysis.token_numbers import token_figures

    fa = analysis if analysis is not None else analyse(scenario)
    report = NumbersReport(scenario.name, analysis=fa)
    add = Adder(report)
    for m in fa.models.values():
        if m.batching == "static":
            batch_figures(add, scenario, m, fa)
        else:
            token_figures(add, scenario, m, fa)
    _fleet_figures(add, scenario, fa)
    report.headline = headline(report, scenario)
    report.findings.extend(suggest(scenario, report))
    return report


def share_inputs(name: str) -> tuple[str, ...]:
    return ("traffic.qps", f"models.{name}.share")


def _fleet_figures(add: Adder, scenario: Scenario, fa: FleetAnalysis) -> None:
    names = list(fa.models)
    models = fa.models
    host_units = [units for _, units, _ in scenario.expanded_hosts()]
    per_worker = {n: _serving_qps(fa, n) for n in names}
    all_inputs = tuple(dict.fromkeys(k for m in models.values() for k in m.inputs))
    static = [n for n in names if models[n].batching == "static"]
    batches = {int(models[n].pools[0].worker.limit) for n in static}
    if len(static) == len(names) and len(batches) == 1:
        b = batches.pop()
        add("requests_per_batch", "Requests per batch", "fleet", b, "requests", "the same for every model",
            models[names[0]].pools[0].worker.inputs)
    if len(set(per_worker.values())) == 1 and all(len(models[n].pools) == 1 for n in names):
        add("worker_qps", "Throughput per worker", "fleet", per_worker[names[0]], "QPS", "the same for every model",
            all_inputs)
    placed = sum(m.workers for m in models.values())
    add("workers_placed", "Workers placed", "fleet", placed, "workers",
        " + ".join(f"{m.workers} {n}" for n, m in models.items()), ("hosts",))
    nominal = sum((_placed_capacity(m) for m in models.values()), Fraction(0))
    add("capacity_qps", "Capacity of the placed workers", "fleet", nominal, "QPS",
        " + ".join(f"{show(_placed_capacity(m), 'QPS')} {n}" for n, m in models.items())
        + ": each model's workers, whatever the split of traffic", all_inputs)
    first = fa.saturates_first
    shares = ", ".join(f"{n} {float(m.share):g}" for n, m in models.items())
    add("capacity_at_split_qps", "Capacity at the split, as placed", "fleet", fa.capacity_qps, "QPS",
        f"the most traffic, split {shares}, before the first model saturates"
        + (f" ({first}: {show(models[first].capacity_qps, 'QPS')} / share {float(models[first].share):g})"
           if first else ""), (*all_inputs, "hosts"))
    if fa.throughput_qps != fa.capacity_qps:
        add("throughput_at_split_qps", "Throughput at the split, goals aside", "fleet", fa.throughput_qps, "QPS",
            "what the placed workers complete at their concurrency limits, whatever the latency", all_inputs)
    if fa.goals_left_out:
        add("goals_left_out", "Goals no load meets, left out of the capacity", "fleet", len(fa.goals_left_out), "",
            ", ".join(f"slo.{g}" for g in fa.goals_left_out) + ": their floors are above them (see the findings)",
            tuple(f"slo.{g}" for g in fa.goals_left_out))
    if fa.offered_capacity_qps != fa.capacity_qps:
        add("offered_capacity_qps", "Mean rate of this trace the fleet serves", "fleet", fa.offered_capacity_qps,
            "QPS", "the trace replayed faster or slower over the same run: the highest mean rate at which a "
            f"queue served at {show(fa.capacity_qps, 'QPS')} keeps 90% of requests within their TTFT goal "
            "(its busy minutes count)", (*all_inputs, "traffic.trace", "traffic.trace_speedup", "slo.ttft_s"))
    _most_figures(add, scenario, fa, per_worker, host_units, all_inputs)
    peak, avg = fa.offered_peak_qps, fa.offered_avg_qps
    loads = [("avg", "average", avg)] + ([("peak", "peak", peak)] if peak is not None else [])
    for tag, word, total in loads:
        add(f"offered_{tag}_qps", f"Offered load at {word} traffic", "fleet", total, "QPS",
            "traffic.qps, all models together" if tag == "avg" and scenario.traffic.trace is None
            else "the trace's mean rate as replayed" if tag == "avg"
            else "no traffic.peak_qps: constant traffic peaks at its mean" if not fa.peak_given
            else "traffic.peak_qps, all models together" if scenario.traffic.trace is None
            else "the trace's busiest minute as replayed",
            ("traffic.qps",) if tag == "avg" or not fa.peak_given else ("traffic.peak_qps",))
        add(f"utilisation_{tag}", f"Utilisation at {word} traffic", "fleet", div(total, fa.throughput_qps), "%",
            f"{show(total, 'QPS')} offered / {show(fa.throughput_qps, 'QPS')} the placed workers complete at the "
            "split: utilisation, not a gap to a goal", all_inputs)
        needs = [models[n].offered_avg_qps if tag == "avg" else models[n].offered_peak_qps for n in names]
        maybe = [div(o, per_worker[n]) for o, n in zip(needs, names, strict=True)]
        need = [v for v in maybe if v is not None]
        if len(need) == len(maybe):
            add(f"workers_needed_{tag}", f"Workers needed at {word} traffic", "fleet", sum(need, Fraction(0)),
                "workers", " + ".join(f"{show(v, '')} {n}" for v, n in zip(need, names, strict=True))
                + ", before rounding up", all_inputs)
            add(f"whole_workers_{tag}", f"Whole workers needed at {word} traffic", "fleet",
                sum(math.ceil(v) for v in need), "workers",
                " + ".join(f"{math.ceil(v)} {n}" for v, n in zip(need, names, strict=True))
                + ", each model rounded up", all_inputs)
        if len(static) == len(names) and len({int(models[n].pools[0].worker.limit) for n in static}) == 1:
            b = int(models[names[0]].pools[0].worker.limit)
            add(f"fill_time_{tag}_s", f"Batch fill time at {word} traffic, all traffic to one dispatcher", "fleet",
                div(Fraction(b), total), "s", f"{b} requests / {show(total, 'QPS')}: as if one dispatcher saw every "
                "request (each model's own dispatcher sees only its share: see per model)",
                ("traffic.qps", "dispatcher.max_batch_tokens"))
        growth = sum((max(Fraction(0), o - models[n].throughput_qps) for o, n in zip(needs, names, strict=True)
                      if o is not None), Fraction(0))
        add(f"queue_growth_{tag}", f"Queue growth at {word} traffic, placed workers", "fleet", growth,
            "requests/s", " + ".join(
                f"{show(max(Fraction(0), o - models[n].throughput_qps), '')} {n}"
                for o, n in zip(needs, names, strict=True) if o is not None)
            + " requests/s: each model's queue grows alone", all_inputs)
    goal = fa.goals["qps"]
    if goal is not None and goal > 0:
        add("gap_peak", "Gap at the peak, as placed", "fleet", fa.gaps["qps"], "x",
            f"{show(goal, 'QPS')} to carry / {show(fa.capacity_qps, 'QPS')} capacity at the split as placed"
            + ("" if fa.peak_given else " (no traffic.peak_qps: constant traffic peaks at its mean)"),
            (*all_inputs, "traffic.peak_qps", "hosts"))
    for key, floor_key, goal_key in (("gap_ttft", "ttft_floor_s", "ttft_s"), ("gap_tpot", "tpot_floor_s", "tpot_s")):
        g = fa.gaps[key.removeprefix("gap_")]
        if g is not None:
            add(key, f"{goal_key.removesuffix('_s').upper()} floor / goal", "fleet", g, "x",
                f"the slowest model's {floor_key.replace('_', ' ').removesuffix(' s')} (a minimum) / slo.{goal_key} "
                f"{show(fa.goals[goal_key], 's')}: above 1, no load meets the goal", (*all_inputs, f"slo.{goal_key}"))
    worst = fa.worst_loss
    if worst is not None:
        down = f"; it takes {', '.join(worst.down)} down" if worst.down else ""
        add("capacity_one_host_lost_qps", "Capacity at the split after the worst host loss", "fleet",
            worst.fleet_qps, "QPS", f"losing host:{worst.host}{down}: the most traffic at the split the other "
            "hosts serve", (*all_inputs, "hosts"))
    if static and len(static) == len(names):
        floor = max(models[n].floors["latency_s"] or Fraction(0) for n in names)
        linear = scenario.worker.service == "linear"
        add("latency_floor_s", "Latency floor (the least a request takes)", "fleet", floor, "s",
            "no request finishes before one batch's service time (worker.batch_s"
            + (", for a batch of max_batch_tokens: service is linear in tokens" if linear else "")
            + "); waiting for the batch to fill and for a free worker comes on top", ("worker.batch_s",))


def _placed_capacity(m: Any) -> Fraction:
    """What a model's workers as placed serve (an autoscaled model: its starting workers)."""
    if m.autoscaler is not None:
        return m.workers * m.pools[0].worker.qps
    return m.capacity_qps


def _serving_qps(fa: FleetAnalysis, name: str) -> Fraction:
    """Requests a second one worker of the model serves: its binding pool's worker (a
    split model's per-worker figure counts both pools' workers)."""
    m = fa.models[name]
    if len(m.pools) == 1:
        return m.pools[0].worker.qps
    return m.capacity_qps / m.workers if m.workers else Fraction(0)


def _most_figures(add: Adder, scenario: Scenario, fa: FleetAnalysis, per_worker: dict[str, Fraction],
                  host_units: list[int], inputs: tuple[str, ...]) -> None:
    """The most the hosts could hold and serve, ignoring the split, and the best mix at it."""
    names = list(fa.models)
    sizes = {n: scenario.models[n].worker_units for n in names}
    if not host_units:
        return
    per_host = [max(((u // sizes[n]) * per_worker[n], u // sizes[n], n) for n in names) for u in host_units]
    most_cap = sum((c for c, _, _ in per_host), Fraction(0))
    most_workers = sum(k for _, k, _ in per_host)
    kinds = sorted({n for _, _, n in per_host})
    which = f"every host filled with {' or '.join(kinds)} workers"
    add("most_workers", "Most workers these hosts could hold", "fleet", most_workers, "workers",
        f"{which} (the mix serving the most QPS, ignoring the split): {sum(host_units)} units", ("hosts",))
    add("most_capacity_qps", "Most capacity these hosts could give, ignoring the split", "fleet", most_cap, "QPS",
        f"{most_workers} workers x their throughput, {which}", (*inputs, "hosts"))
    goal = fa.goals["qps"]
    peak = fa.offered_peak_qps if fa.peak_given else None
    if goal and most_cap:
        add("gap_most_peak" if peak is not None else "gap_most_avg",
            "Gap against the most these hosts could give", "fleet", goal / most_cap, "x",
            f"{show(goal, 'QPS')} / {show(most_cap, 'QPS')} with {which}: what no placement of these hosts "
            "closes (the split ignored)", (*inputs, "hosts"))
    if peak is not None and fa.offered_avg_qps and most_cap:
        add("gap_most_avg", "Gap at average traffic against the most these hosts could give", "fleet",
            fa.offered_avg_qps / most_cap, "x", f"{show(fa.offered_avg_qps, 'QPS')} / {show(most_cap, 'QPS')}",
            (*inputs, "hosts"))
        add("queue_growth_most_avg", "Queue growth at average traffic, most workers", "fleet",
            max(Fraction(0), fa.offered_avg_qps - most_cap), "requests/s",
            f"{show(fa.offered_avg_qps, 'QPS')} arriving - {show(most_cap, 'QPS')} served even with the most "
            "workers these hosts could hold", (*inputs, "hosts"))
    _best_mix_figures(add, scenario, fa, names, sizes, per_worker, host_units, inputs)


def _best_mix_figures(add: Adder, scenario: Scenario, fa: FleetAnalysis, names: list[str], sizes: dict[str, int],
                      wqs: dict[str, Fraction], host_units: list[int], inputs: tuple[str, ...]) -> None:
    # The solver assumes identical hosts and one pool a model; others are described per model.
    if len(set(host_units)) != 1 or any(w == 0 for w in wqs.values()) or any(m.split for m in fa.models.values()):
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
            add(key, label, "fleet", None, "QPS", f"not computed: {exc}", inputs)
        return
    label = best.label(names)
    add("best_mix_qps", "Most total traffic at this split, best mix", "fleet", best.worst_ratio, "QPS",
        f"\"{label}\": the mix whose first saturating model saturates last (capacity / share, no failure)",
        (*inputs, "hosts"))
    add("best_mix_one_host_lost_qps", "Most total traffic at this split surviving one host loss", "fleet",
        robust.worst_ratio, "QPS", f"\"{robust.label(names)}\": the best worst case over losing any one host "
        "(python -m emulator place)", (*inputs, "hosts"))
    goal = fa.goals["qps"]
    if goal and best.worst_ratio:
        add("gap_best_mix_peak", "Gap at the peak with the best mix", "fleet", goal / best.worst_ratio, "x",
            f"{show(goal, 'QPS')} / {show(best.worst_ratio, 'QPS')} with \"{label}\"", (*inputs, "hosts"))


#: The headline's slots: (name, figure keys that can fill it, first found wins, and the
#: figures shown beside it).
HEADLINE: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    ("gap at the peak", ("gap_peak",), ("capacity_at_split_qps", "gap_best_mix_peak", "best_mix_qps")),
    ("utilisation at average traffic", ("utilisation_avg",), ("offered_avg_qps",)),
    ("latency floor (a minimum)", ("latency_floor_s", "ttft_floor_s"), ("gap_ttft",)),
    ("time per output token floor (a minimum)", ("tpot_floor_s",), ("decode_step_floor_s", "gap_tpot")),
    ("after the worst host loss", ("capacity_one_host_lost_qps",), ()),
]


#: Headline figures where less is worse (capacity left); for the others more is worse.
LOWER_IS_WORSE = frozenset({"capacity_one_host_lost_qps"})


def _worst(candidates: list[Figure]) -> Figure:
    """The model's figure in the most trouble (ties by model name), whatever order the
    models come in."""
    if candidates[0].key in LOWER_IS_WORSE:
        return min(candidates, key=lambda f: (f.value, f.model))
    return min(candidates, key=lambda f: (-(f.value or 0), f.model))


def headline(report: NumbersReport, scenario: Scenario) -> list[dict[str, Any]]:
    """3 to 5 figures, one per slot the report can fill: the fleet's figure, else the
    worst model's (the highest floor), each with the figures shown beside it."""
    out = []
    for slot, keys, beside in HEADLINE:
        found = None
        for key in keys:
            if report.has(key):
                found = report.get(key)
            else:
                candidates = [f for f in report.figures if f.key == key and f.value is not None]
                if candidates:
                    found = _worst(candidates)
            if found is not None and found.value is not None:
                break
            found = None
        if found is None:
            continue
        extra = []
        for key in beside:
            model = "fleet" if report.has(key) else found.model
            if report.has(key, model) and report.value(key, model) is not None:
                extra.append(report.get(key, model).to_dict())
        out.append({**found.to_dict(), "slot": slot, "beside": extra})
    return out
