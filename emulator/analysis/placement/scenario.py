"""Placement questions taken from a scenario: its hosts, worker sizes, split and throughput.

``place --scenario FILE|PRESET`` ranks placements with the scenario's own
numbers (per-worker throughput from its batch size and batch time, demand from
its average traffic) and shows where the placement as configured stands.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from emulator.analysis.placement import (
    FleetPlacement,
    HostLayout,
    PlacementError,
    PlacementProblem,
    evaluate_fleet,
    exact,
    host_layouts,
)
from emulator.analysis.placement.search import (
    MAX_COMPOSITIONS,
    composition_count,
    compositions,
    integer_weights,
    score,
)
from emulator.scenario import Scenario

__all__ = ["current_fleet", "layout_config_name", "problem_args", "rank_of"]


def problem_args(scenario: Scenario) -> dict[str, Any]:
    """Keyword arguments for :func:`emulator.analysis.placement.solve` describing the scenario's fleet."""
    hosts = scenario.expanded_hosts()
    if not hosts:
        raise PlacementError("hosts: the scenario has no hosts; add a [[hosts]] group")
    sizes = {units for _, units, _ in hosts}
    if len(sizes) != 1:
        raise PlacementError(
            f"hosts: the scenario mixes hosts of {', '.join(str(u) for u in sorted(sizes))} units; "
            "place works on identical hosts, so give --hosts and --units instead"
        )
    batch_s = exact(scenario.worker.batch_s)
    qps = {}
    for name, spec in scenario.models.items():
        per_batch = scenario.dispatcher.max_batch_tokens // spec.tokens if spec.tokens > 0 else 0
        if per_batch == 0:
            raise PlacementError(f"models.{name}.tokens: a request does not fit in a batch, so a worker serves nothing")
        qps[name] = Fraction(per_batch) / batch_s
    return {
        "hosts": len(hosts),
        "units": sizes.pop(),
        "workers": {name: spec.worker_units for name, spec in scenario.models.items()},
        "split": {name: exact(spec.share) for name, spec in scenario.models.items()},
        "qps_per_worker": qps,
        "demand_qps": exact(scenario.traffic.qps) if scenario.traffic.qps > 0 else None,
    }


def current_fleet(problem: PlacementProblem, scenario: Scenario) -> FleetPlacement:
    """The scenario's placement as configured, with its failure-case tables (rank 0: unranked)."""
    sizes = dict(zip(problem.names, problem.sizes, strict=True))
    smallest = min(problem.sizes)
    groups: list[tuple[int, HostLayout]] = []
    for _, units, slots in scenario.expanded_hosts():
        ordered = sorted(slots, key=lambda w: w.first_unit)
        counts = tuple(sum(1 for w in slots if w.model == n) for n in problem.names)
        used = sum(sizes[w.model] for w in slots)
        layout = HostLayout(counts, tuple((w.model, w.first_unit) for w in ordered), units, used,
                            units - used < smallest, tuple(sizes[w.model] for w in ordered))
        if groups and groups[-1][1] == layout:
            groups[-1] = (groups[-1][0] + 1, layout)
        else:
            groups.append((1, layout))
    return evaluate_fleet(problem, groups, 0)


def rank_of(problem: PlacementProblem, fleet: FleetPlacement) -> tuple[int, int] | None:
    """(rank the fleet would take, number of distinct ranks) among fleets of maximal layouts.

    Ranks are dense, as in the ranking: 1 + the number of distinct better keys.
    None when there are too many fleets to score.
    """
    maximal = host_layouts(problem, maximal_only=True)
    if composition_count(problem.hosts, len(maximal)) > MAX_COMPOSITIONS:
        return None
    x = compositions(problem.hosts, len(maximal))
    worst, nominal, wasted = score(problem, maximal, x)
    keys = set(zip(worst.tolist(), nominal.tolist(), (-wasted).tolist(), strict=True))
    own = _integer_key(problem, fleet)
    better = sum(1 for key in keys if key > own)
    return better + 1, len(keys)


def _integer_key(problem: PlacementProblem, fleet: FleetPlacement) -> tuple[int, int, int]:
    live, w_int, q_int = integer_weights(problem)
    k = len(problem.names)
    counts = [sum(c * lay.counts[m] for c, lay in fleet.groups) for m in range(k)]
    lost = [max(lay.counts[m] for _, lay in fleet.groups) for m in range(k)]
    worst = min(w_int[i] * (counts[m] - lost[m]) for i, m in enumerate(live))
    nominal = sum(q_int[m] * counts[m] for m in range(k))
    return worst, nominal, -fleet.wasted_units


def layout_config_name(config_name: str, current_label: str, new_label: str) -> str:
    """The name of a config made by giving ``config_name``'s fleet the layout ``new_label``.

    A config made from a layout is named "<name> · <layout>"; made again from
    that one, the layout it has now is replaced rather than appended, so names
    do not grow a layout per step ("seed · 5 small / ... · 2 big / ...").
    """
    suffix = f" · {current_label}"
    base = config_name[: -len(suffix)] if current_label and config_name.endswith(suffix) else config_name
    return f"{base} · {new_label}"[:200]
