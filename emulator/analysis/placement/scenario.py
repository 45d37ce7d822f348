"""Placement questions taken from a scenario: its hosts, worker sizes, split and throughput.

``place --scenario FILE|PRESET`` ranks placements with the scenario's own numbers:
per-worker capacity from the fleet's analysis (``emulator.analysis.fleet``: the batch
formula for static workers, the step model at the concurrency the KV cache and limits
allow for continuous ones), demand from its average traffic, and shows where the
placement as configured stands. A split model's pools are worker types of their own
(``chat/prefill``, ``chat/decode``), each carrying the model's share: a layout that
loses every worker of one pool loses the model, and no host carries two pools of one
model (a host group names one pool).
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from emulator.analysis.fleet import analyse
from emulator.analysis.fleet.grown import grown_hosts
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

if TYPE_CHECKING:
    from emulator.analysis.fleet import FleetAnalysis

__all__ = ["current_fleet", "layout_config_name", "problem_args", "rank_of", "type_name"]


def type_name(model: str, pool: str | None, split: bool) -> str:
    """The worker type of a model's worker in ``pool``: the model, or ``model/pool``."""
    return f"{model}/{pool}" if split and pool is not None else model


def problem_args(scenario: Scenario, analysis: FleetAnalysis | None = None) -> dict[str, Any]:
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
    fa = analysis if analysis is not None else analyse(scenario)
    workers: dict[str, int] = {}
    split: dict[str, Fraction] = {}
    qps: dict[str, Fraction] = {}
    model_of: dict[str, str] = {}
    for name, spec in scenario.models.items():
        m = fa.models[name]
        for pool in m.pools:
            kind = type_name(name, pool.name, m.split)
            per = pool.worker.qps
            if per == 0 and m.batching == "static":
                raise PlacementError(f"models.{name}.tokens: a request does not fit in a batch, so a worker serves nothing")
            if per == 0:
                raise PlacementError(f"models.{name}: a worker serves nothing ({pool.worker.how}); fix the worker keys")
            if m.split:
                # In the model's requests a second: a prefill worker sees only the requests
                # sent to it, and a decode worker's link moves one transfer at a time.
                per = per / pool.traffic_share
                if pool.role == "decode" and m.transfer_s and m.decode_direct_share < 1:
                    per = min(per, 1 / (m.transfer_s * (1 - m.decode_direct_share)))
            workers[kind] = spec.worker_units
            split[kind] = exact(spec.share)
            qps[kind] = per
            model_of[kind] = name
    args: dict[str, Any] = {
        "hosts": len(hosts),
        "units": sizes.pop(),
        "workers": workers,
        "split": split,
        "qps_per_worker": qps,
        "demand_qps": exact(scenario.traffic.qps) if scenario.traffic.qps > 0 else None,
    }
    if any(k != v for k, v in model_of.items()):
        args["model_of"] = model_of
    return args


def current_fleet(problem: PlacementProblem, scenario: Scenario) -> FleetPlacement:
    """The scenario's placement as configured, with its failure-case tables (rank 0:
    unranked); a pool with its own autoscaler at its ``max_workers`` (``grown_hosts``),
    the layout the analysis reads its capacity from."""
    sizes = dict(zip(problem.names, problem.sizes, strict=True))
    smallest = min(problem.sizes)
    pools = [g.pool for g in scenario.hosts for _ in range(g.count)]
    grown, _ = grown_hosts(scenario, pools_only=True)
    groups: list[tuple[int, HostLayout]] = []
    for (_, units, _), pool, slots in zip(scenario.expanded_hosts(), pools, grown, strict=True):
        ordered = sorted(slots, key=lambda w: w[1])
        kinds = [type_name(m, pool, scenario.models[m].disaggregated is not None) for m, _ in ordered]
        counts = tuple(sum(1 for k in kinds if k == n) for n in problem.names)
        used = sum(sizes[k] for k in kinds)
        layout = HostLayout(counts, tuple((k, first) for k, (_, first) in zip(kinds, ordered, strict=True)),
                            units, used, units - used < smallest, tuple(sizes[k] for k in kinds))
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
    # A name that spells its layout out ("plan (Part 2 hosts: 2 big / 5 small)") follows
    # the new layout instead of keeping the old one beside it.
    if current_label and base == config_name:
        spelled = re.compile(r"(^|\(|: )" + re.escape(current_label) + r"(?=\)|$)")
        if spelled.search(config_name):
            return spelled.sub(lambda m: m.group(1) + new_label, config_name, count=1)[:200]
    return f"{base} · {new_label}"[:200]
