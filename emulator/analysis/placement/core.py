"""Placement of GPU workers on identical hosts: per-host layouts and fleet ranking.

A host is a strip of ``units`` adjacent units; a worker of a type occupies a
contiguous block of that type's size. Any multiset of workers whose sizes add
up to at most ``units`` fits on one host (pack them side by side), so a host
layout is fully described by its worker counts; we keep one canonical strip per
layout, with the largest workers first at the lowest offsets so that small
workers end up packed away from the slots a future large worker would need.

Hosts are identical, so a fleet is a multiset of host layouts. Fleets are
ranked by (1) the worst case, over no failure and the loss of each single host,
of capacity / demand per model, (2) nominal capacity, (3) fewer wasted units.
All arithmetic is exact (``fractions.Fraction``); floats appear only in
``to_dict``.

The search itself lives in :mod:`emulator.analysis.placement.search` (an exact method over
counts of layout types, and the brute-force reference it is tested against).

Kept as one module: the layouts, the fleet ranking and the exact arithmetic they share
are one model of the problem; the search over it is in its own module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

__all__ = [
    "FleetCase",
    "FleetPlacement",
    "HostLayout",
    "PlacementError",
    "PlacementProblem",
    "PlacementResult",
    "exact",
    "host_layouts",
    "make_problem",
    "placement_to_hosts",
    "solve",
]

Number = int | float | str | Fraction


class PlacementError(ValueError):
    """A placement input a user can get wrong; ``str(e)`` is one line naming the field."""


def exact(value: Number, *, field_name: str = "value") -> Fraction:
    """Convert a user number to a Fraction, reading floats by their decimal spelling.

    ``0.1`` becomes 1/10 rather than the nearest binary fraction, so shares such
    as 0.3 + 0.7 add up to exactly 1.
    """
    if isinstance(value, Fraction):
        return value
    if isinstance(value, bool):
        raise PlacementError(f"{field_name}: expected a number, got {value!r}")
    try:
        if isinstance(value, float):
            return Fraction(repr(value))
        return Fraction(value)
    except (ValueError, ZeroDivisionError, TypeError):
        raise PlacementError(f"{field_name}: {value!r} is not a number") from None


@dataclass(frozen=True)
class PlacementProblem:
    """Validated inputs: ``hosts`` identical hosts of ``units`` units each.

    ``names`` keeps the caller's order of worker types; ``sizes``, ``shares`` and
    ``qps`` follow it. ``demand_qps`` scales demand (``share x demand_qps``);
    when it is None the ratio reads as the total offered QPS, at this split, that
    the fleet serves before the model saturates.
    """

    hosts: int
    units: int
    names: tuple[str, ...]
    sizes: tuple[int, ...]
    shares: tuple[Fraction, ...]
    qps: tuple[Fraction, ...]
    demand_qps: Fraction | None = None
    qps_given: bool = True
    #: The model each worker type serves (a split model's pools are types of their own:
    #: ``chat/prefill`` and ``chat/decode``); empty when every type is its own model.
    model_of: tuple[str, ...] = ()
    #: Sets of type indexes that no host may carry together (a host group names one
    #: pool, so a host carries one pool of a split model).
    exclusive: tuple[tuple[int, ...], ...] = ()

    def allowed_with(self, counts: Sequence[int]) -> list[int]:
        """The types a host carrying ``counts`` may still take."""
        out = []
        for i in range(len(self.names)):
            clash = any(i in group and any(counts[j] for j in group if j != i) for group in self.exclusive)
            if not clash:
                out.append(i)
        return out

    def models(self) -> tuple[str, ...]:
        """Each type's model (the type itself unless pools were given)."""
        return self.model_of or self.names

    @property
    def weights(self) -> tuple[Fraction | None, ...]:
        """Per model, the factor turning a worker count into capacity / demand."""
        scale = self.demand_qps if self.demand_qps is not None else Fraction(1)
        return tuple(
            None if share == 0 else q / (share * scale)
            for q, share in zip(self.qps, self.shares, strict=True)
        )

    @property
    def capacity_unit(self) -> str:
        """What capacity figures count: QPS when per-worker QPS was given, else workers."""
        return "QPS" if self.qps_given else "workers"

    @property
    def ratio_basis(self) -> str:
        """One line saying how to read a ratio figure."""
        if self.demand_qps is not None:
            return f"capacity / (share x {float(self.demand_qps):g} QPS demand)"
        return (
            f"capacity / share: the total offered load (in {self.capacity_unit}) "
            "the fleet serves at this split before the model saturates"
        )


def _parse_split(names: Sequence[str], split: Mapping[str, Number] | None,
                 model_of: Sequence[str] = ()) -> tuple[Fraction, ...]:
    if split is None:
        return tuple(Fraction(1, len(names)) for _ in names)
    for name in split:
        if name not in names:
            raise PlacementError(
                f"split: unknown model {name!r}; worker types are {', '.join(names)}"
            )
    shares = []
    for name in names:
        if name not in split:
            raise PlacementError(f"split: no share for model {name!r}; give every worker type a share")
        share = exact(split[name], field_name=f"split.{name}")
        if share < 0:
            raise PlacementError(f"split.{name}: share {float(share):g} is negative")
        shares.append(share)
    # A split model's pools each carry the model's share (each sees all its requests).
    per_model = dict(zip(model_of, shares, strict=True)) if model_of else dict(zip(names, shares, strict=True))
    total = sum(per_model.values(), Fraction(0))
    if total != 1:
        raise PlacementError(
            f"split: shares add up to {float(total):g}, not 1; adjust them so they sum to 1"
        )
    return tuple(shares)


def make_problem(
    hosts: int,
    units: int,
    workers: Mapping[str, int],
    split: Mapping[str, Number] | None = None,
    *,
    qps_per_worker: Mapping[str, Number] | None = None,
    demand_qps: Number | None = None,
    model_of: Mapping[str, str] | None = None,
) -> PlacementProblem:
    """Validate placement inputs; raise :class:`PlacementError` (one line) on bad ones.

    ``model_of`` maps worker types to the model they serve when a model's pools are
    types of their own: the pools of one model each carry its share, and no host
    carries two pools of one model."""
    if isinstance(hosts, bool) or not isinstance(hosts, int) or hosts < 1:
        raise PlacementError(f"hosts: {hosts!r} must be a whole number of at least 1")
    if isinstance(units, bool) or not isinstance(units, int) or units < 1:
        raise PlacementError(f"units: {units!r} must be a whole number of units per host, at least 1")
    if not workers:
        raise PlacementError("workers: give at least one worker type, e.g. small=2")
    names = tuple(workers)
    sizes = []
    for name in names:
        size = workers[name]
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise PlacementError(f"workers.{name}: size {size!r} must be a whole number of units, at least 1")
        if size > units:
            raise PlacementError(
                f"workers.{name}: a {size}-unit worker cannot fit on a {units}-unit host; "
                "use larger hosts or a smaller worker"
            )
        sizes.append(size)
    models = tuple((model_of or {}).get(n, n) for n in names) if model_of else ()
    shares = _parse_split(names, split, models)
    exclusive = tuple(
        group for group in (tuple(i for i, m in enumerate(models) if m == model) for model in dict.fromkeys(models))
        if len(group) > 1
    )
    if qps_per_worker is None:
        qps = tuple(Fraction(1) for _ in names)
        qps_given = False
    else:
        for name in qps_per_worker:
            if name not in names:
                raise PlacementError(
                    f"qps_per_worker: unknown model {name!r}; worker types are {', '.join(names)}"
                )
        missing = [n for n in names if n not in qps_per_worker]
        if missing:
            raise PlacementError(f"qps_per_worker: no figure for model {missing[0]!r}; give one per worker type")
        qps = tuple(exact(qps_per_worker[n], field_name=f"qps_per_worker.{n}") for n in names)
        for name, q in zip(names, qps, strict=True):
            if q <= 0:
                raise PlacementError(f"qps_per_worker.{name}: must be above 0")
        qps_given = True
    demand = None
    if demand_qps is not None:
        demand = exact(demand_qps, field_name="demand_qps")
        if demand <= 0:
            raise PlacementError("demand_qps: must be above 0")
    return PlacementProblem(hosts, units, names, tuple(sizes), shares, qps, demand, qps_given, models, exclusive)


@dataclass(frozen=True)
class HostLayout:
    """One way to fill a host: worker counts per type (problem order) and a canonical strip."""

    counts: tuple[int, ...]
    slots: tuple[tuple[str, int], ...]  # (worker type, first unit), largest workers first
    units: int
    used: int
    maximal: bool
    # Sizes of the blocks in ``slots`` order, for strips not packed from unit 0
    # (a host as configured); empty for canonical layouts, whose blocks touch.
    block_units: tuple[int, ...] = ()

    @property
    def wasted(self) -> int:
        """Units left free on this host."""
        return self.units - self.used

    def strip(self) -> list[str | None]:
        """The worker type occupying each unit (None: free), for the placement heatmap."""
        cells: list[str | None] = [None] * self.units
        for name, first, size in self._blocks():
            for unit in range(first, first + size):
                cells[unit] = name
        return cells

    def _blocks(self) -> list[tuple[str, int, int]]:
        if self.block_units:
            return [(n, first, size) for (n, first), size in zip(self.slots, self.block_units, strict=True)]
        blocks = []
        for i, (name, first) in enumerate(self.slots):
            end = self.slots[i + 1][1] if i + 1 < len(self.slots) else self.used
            blocks.append((name, first, end - first))
        return blocks

    def label(self, names: Sequence[str]) -> str:
        """Human name such as "1 big + 2 small" (largest workers first)."""
        order: list[str] = []
        for name, _, _ in sorted(self._blocks(), key=lambda b: -b[2]):
            if name not in order:
                order.append(name)
        parts = [f"{self.counts[names.index(n)]} {n}" for n in order]
        return " + ".join(parts) if parts else "empty"

    def to_dict(self, names: Sequence[str]) -> dict[str, Any]:
        """JSON-safe form, as in the placement interface."""
        return {
            "counts": {n: c for n, c in zip(names, self.counts, strict=True)},
            "label": self.label(names),
            "strip": self.strip(),
            "workers": [f"{name}@{first}" for name, first in self.slots],
            "used": self.used,
            "wasted": self.wasted,
            "maximal": self.maximal,
        }


def _canonical_slots(problem: PlacementProblem, counts: Sequence[int]) -> tuple[tuple[str, int], ...]:
    # Largest first, ties by caller order: big workers take the low offsets, the
    # small ones pack behind them, and any free units end up in one block at the end.
    order = sorted(range(len(problem.names)), key=lambda i: (-problem.sizes[i], i))
    slots = []
    offset = 0
    for i in order:
        for _ in range(counts[i]):
            slots.append((problem.names[i], offset))
            offset += problem.sizes[i]
    return tuple(slots)


def layout_for(problem: PlacementProblem, counts: Sequence[int]) -> HostLayout:
    """The canonical layout for given per-type counts (which must fit on one host)."""
    used = sum(c * s for c, s in zip(counts, problem.sizes, strict=True))
    if used > problem.units:
        raise PlacementError(f"layout {tuple(counts)} needs {used} units but a host has {problem.units}")
    # Maximal: no worker the host may still take fits in its free units.
    allowed = problem.allowed_with(counts)
    maximal = not allowed or problem.units - used < min(problem.sizes[i] for i in allowed)
    return HostLayout(tuple(counts), _canonical_slots(problem, counts), problem.units, used, maximal)


def host_layouts(problem: PlacementProblem, *, maximal_only: bool = False) -> list[HostLayout]:
    """Every distinct way to fill one host (by counts), maximal ones first.

    A layout is maximal when no further worker of any type fits in its free units.
    """
    found: list[tuple[int, ...]] = []

    def extend(prefix: list[int], free: int) -> None:
        i = len(prefix)
        if i == len(problem.sizes):
            found.append(tuple(prefix))
            return
        for count in range(free // problem.sizes[i] + 1):
            extend(prefix + [count], free - count * problem.sizes[i])

    extend([], problem.units)
    if problem.exclusive:
        found = [c for c in found if len(problem.allowed_with(c)) == len(problem.names)
                 or all(sum(1 for j in group if c[j]) <= 1 for group in problem.exclusive)]
    layouts = [layout_for(problem, c) for c in found]
    if maximal_only:
        layouts = [lay for lay in layouts if lay.maximal]
    by_size = sorted(range(len(problem.names)), key=lambda i: (-problem.sizes[i], i))
    layouts.sort(key=lambda lay: (not lay.maximal, -lay.used, tuple(-lay.counts[i] for i in by_size)))
    return layouts


@dataclass(frozen=True)
class FleetCase:
    """Capacity and ratio per model with no failure or with one host lost."""

    failure: str  # "none" or "host:i"
    alike: int  # hosts whose loss gives this same table (0 for "none")
    capacity: tuple[Fraction, ...]
    ratio: tuple[Fraction | None, ...]

    @property
    def worst(self) -> Fraction | None:
        """Lowest ratio over models with a share of the traffic."""
        vals = [r for r in self.ratio if r is not None]
        return min(vals) if vals else None


@dataclass(frozen=True)
class FleetPlacement:
    """A ranked fleet: how many hosts carry each layout, and its failure-case tables."""

    rank: int
    groups: tuple[tuple[int, HostLayout], ...]  # (host count, layout), in layout order
    cases: tuple[FleetCase, ...]
    worst_ratio: Fraction | None
    nominal: Fraction
    wasted_units: int

    def hosts(self) -> list[HostLayout]:
        """One layout per host, hosts numbered in group order."""
        return [lay for count, lay in self.groups for _ in range(count)]

    def label(self, names: Sequence[str]) -> str:
        """"2 big / 2 big / 5 small" for small fleets, "100 x 2 big / ..." for large ones."""
        if sum(c for c, _ in self.groups) <= 6:
            return " / ".join(lay.label(names) for lay in self.hosts())
        return " / ".join(f"{c} x ({lay.label(names)})" for c, lay in self.groups)

    def verdict(self, names: Sequence[str]) -> dict[str, Any]:
        """Which models the fleet does not serve: ``unplaced`` (no worker at all),
        ``lost_with`` (model -> the single-host losses that leave it no capacity),
        and ``survives_any_host_loss``, true only when every model has a worker
        and keeps one whichever host is lost."""
        none_case = self.cases[0]
        unplaced = [n for n, cap in zip(names, none_case.capacity, strict=True) if cap == 0]
        lost_with: dict[str, list[str]] = {}
        for c in self.cases[1:]:
            for n, before, after in zip(names, none_case.capacity, c.capacity, strict=True):
                if before > 0 and after == 0:
                    lost_with.setdefault(n, []).append(c.failure)
        return {"unplaced": unplaced, "lost_with": lost_with,
                "survives_any_host_loss": not unplaced and not lost_with}

    def models_down(self, problem: PlacementProblem) -> dict[str, list[str]]:
        """Model -> the single-host losses that take it down (one of its pools, or its
        only type, left with no worker)."""
        verdict = self.verdict(problem.names)
        down: dict[str, list[str]] = {}
        for name, failures in verdict["lost_with"].items():
            model = problem.models()[problem.names.index(name)]
            for failure in failures:
                if failure not in down.setdefault(model, []):
                    down[model].append(failure)
        return down

    def to_dict(self, problem: PlacementProblem) -> dict[str, Any]:
        """JSON-safe form, as in the placement interface."""
        names = problem.names

        def per_model(values: Sequence[Fraction | None]) -> dict[str, float | None]:
            return {n: (None if v is None else float(v)) for n, v in zip(names, values, strict=True)}

        worst_case = next((c.failure for c in self.cases if c.worst == self.worst_ratio), "none")
        verdict = self.verdict(names)
        return {
            "rank": self.rank,
            "label": self.label(names),
            "groups": [{"count": c, "layout": lay.label(names)} for c, lay in self.groups],
            "hosts": [
                {"counts": {n: k for n, k in zip(names, lay.counts, strict=True)},
                 "strip": lay.strip(),
                 "workers": [f"{n}@{u}" for n, u in lay.slots]}
                for lay in self.hosts()
            ],
            "worst_ratio": None if self.worst_ratio is None else float(self.worst_ratio),
            "worst_case": worst_case,
            "nominal_qps": float(self.nominal),
            "wasted_units": self.wasted_units,
            "unplaced": verdict["unplaced"],
            "lost_with": verdict["lost_with"],
            "models_down_with": self.models_down(problem),
            "survives_any_host_loss": verdict["survives_any_host_loss"],
            "cases": [
                {"failure": c.failure, "alike": c.alike,
                 "capacity": per_model(c.capacity), "ratio": per_model(c.ratio),
                 "model_capacity": _model_capacity(problem, c.capacity)}
                for c in self.cases
            ],
        }


def _model_capacity(problem: PlacementProblem, capacity: Sequence[Fraction]) -> dict[str, float]:
    """Each model's capacity in a case: the least of its pools' (its one type's otherwise)."""
    out: dict[str, Fraction] = {}
    for model, cap in zip(problem.models(), capacity, strict=True):
        out[model] = min(out[model], cap) if model in out else cap
    return {m: float(c) for m, c in out.items()}


def _times(weight: Fraction | None, count: int) -> Fraction | None:
    return None if weight is None else weight * count


def evaluate_fleet(
    problem: PlacementProblem, groups: Sequence[tuple[int, HostLayout]], rank: int = 0
) -> FleetPlacement:
    """Exact failure-case tables for a fleet given as (host count, layout) groups.

    Losing any host of one layout removes the same workers, so one case per
    distinct layout covers every single-host loss.
    """
    groups = tuple((c, lay) for c, lay in groups if c > 0)
    k = len(problem.names)
    totals = [sum(c * lay.counts[m] for c, lay in groups) for m in range(k)]
    weights = problem.weights

    def case(failure: str, alike: int, counts: Sequence[int]) -> FleetCase:
        capacity = tuple(problem.qps[m] * counts[m] for m in range(k))
        ratio = tuple(_times(weights[m], counts[m]) for m in range(k))
        return FleetCase(failure, alike, capacity, ratio)

    cases = [case("none", 0, totals)]
    first_host = 0
    for count, lay in groups:
        lost = [totals[m] - lay.counts[m] for m in range(k)]
        cases.append(case(f"host:{first_host}", count, lost))
        first_host += count
    worsts = [c.worst for c in cases if c.worst is not None]
    worst = min(worsts) if worsts else None
    wasted = sum(c * lay.wasted for c, lay in groups)
    return FleetPlacement(rank, groups, tuple(cases), worst, sum(cases[0].capacity, Fraction(0)), wasted)


@dataclass
class PlacementResult:
    """Layouts of one host and the ranked fleets, with how many candidates were weighed."""

    problem: PlacementProblem
    layouts: list[HostLayout]
    ranked: list[FleetPlacement]
    candidates: int
    left_off: int
    method: str
    notes: list[str] = field(default_factory=list)
    scored: int = 0  # fleets actually scored (the rest were ruled out by bounds)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form, as in the placement interface."""
        p = self.problem
        return {
            "hosts": p.hosts,
            "units": p.units,
            "workers": dict(zip(p.names, p.sizes, strict=True)),
            "split": {n: float(s) for n, s in zip(p.names, p.shares, strict=True)},
            "qps_per_worker": {n: float(q) for n, q in zip(p.names, p.qps, strict=True)},
            "demand_qps": None if p.demand_qps is None else float(p.demand_qps),
            "models": dict(zip(p.names, p.models(), strict=True)),
            "capacity_unit": p.capacity_unit,
            "ratio_basis": p.ratio_basis,
            "method": self.method,
            "candidates": self.candidates,
            "scored": self.scored,
            "left_off": self.left_off,
            "host_layouts": [lay.to_dict(p.names) for lay in self.layouts],
            "ranked": [f.to_dict(p) for f in self.ranked],
            "notes": list(self.notes),
        }


def solve(
    hosts: int,
    units: int,
    workers: Mapping[str, int],
    split: Mapping[str, Number] | None = None,
    *,
    qps_per_worker: Mapping[str, Number] | None = None,
    demand_qps: Number | None = None,
    top: int = 10,
    method: str = "counts",
    model_of: Mapping[str, str] | None = None,
) -> PlacementResult:
    """Rank fleet placements of ``workers`` on ``hosts`` identical hosts.

    Shows the ``top`` best fleets plus every fleet tied with the last one shown.
    ``method`` is "counts" (exact over counts of host layouts: every composition
    scored, or for large questions only those a bound cannot rule out) or
    "brute_force" (the reference, small fleets only).
    """
    # cycle: search imports the placement package, which loads this module
    from emulator.analysis.placement import search as placement_exact

    problem = make_problem(hosts, units, workers, split, qps_per_worker=qps_per_worker,
                           demand_qps=demand_qps, model_of=model_of)
    if top < 1:
        raise PlacementError(f"top: {top} must be at least 1")
    if method == "counts":
        return placement_exact.solve_counts(problem, top=top)
    if method == "brute_force":
        return placement_exact.solve_brute_force(problem, top=top)
    raise PlacementError(f"method: {method!r} is not one of counts, brute_force")


def placement_to_hosts(entry: FleetPlacement | Mapping[str, Any], units: int | None = None) -> list[dict[str, Any]]:
    """Scenario host groups (``{"count", "units", "workers": ["big@0", ...]}``) for a ranked fleet.

    Accepts a :class:`FleetPlacement` or its ``to_dict()`` form; consecutive
    identical hosts share one group. A split model's pool types (``chat/decode``)
    become its workers on a group with that ``pool``.
    """
    if isinstance(entry, FleetPlacement):
        per_host = [(lay.units, [f"{n}@{u}" for n, u in lay.slots]) for lay in entry.hosts()]
    else:
        size = units
        per_host = []
        for host in entry["hosts"]:
            host_units = size if size is not None else len(host["strip"])
            per_host.append((host_units, list(host["workers"])))
    groups: list[dict[str, Any]] = []
    for host_units, slots in per_host:
        pool = None
        workers = []
        for slot in slots:
            name, _, first = slot.partition("@")
            model, sep, named = name.partition("/")
            if sep:
                pool = named
            workers.append(f"{model}@{first}")
        group: dict[str, Any] = {"count": 1, "units": host_units, "workers": workers}
        if pool is not None:
            group["pool"] = pool
        last = groups[-1] if groups else None
        if last is not None and {k: v for k, v in last.items() if k != "count"} == {
                k: v for k, v in group.items() if k != "count"}:
            last["count"] += 1
        else:
            groups.append(group)
    return groups
