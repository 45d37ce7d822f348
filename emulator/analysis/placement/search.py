"""Exact fleet ranking: a method over counts of host layouts, and a brute-force reference.

Counts method. Hosts are identical, so a fleet is a vector ``x`` of how many
hosts carry each *maximal* layout (``sum(x) == hosts``). Non-maximal layouts
never reach the top: adding the worker that still fits never lowers any
capacity, raises nominal capacity and lowers waste. For a fleet ``x``, with
``a[l][m]`` workers of model ``m`` in layout ``l``:

- workers of model m: ``C[m] = sum_l x[l] * a[l][m]``;
- losing any host of layout l removes ``a[l]``, so the single-host losses are
  one per layout *present*, and the worst one for model m removes
  ``M[m] = max(a[l][m] for l with x[l] > 0)``;
- worst ratio = ``min_m w[m] * (C[m] - M[m])`` (``w = qps / (share x demand)``;
  the no-failure case is never lower).

Every key is an integer after scaling the weights by a common denominator, so
all compositions are scored at once in numpy with no rounding, and ranked
lexicographically by (worst ratio, nominal capacity, -wasted units).

Brute force. Every ordered assignment of maximal layouts to hosts, every host
actually removed in turn, keys computed with Fractions, fleets deduplicated by
multiset. Exponential; it exists to check the counts method.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from fractions import Fraction

import numpy as np

from emulator.analysis.placement import (
    FleetPlacement,
    HostLayout,
    PlacementError,
    PlacementProblem,
    PlacementResult,
    evaluate_fleet,
    host_layouts,
)

# The counts method scores every composition in memory; beyond this many it
# would need gigabytes, so the caller is told to shrink the question instead.
MAX_COMPOSITIONS = 6_000_000
# Up to this many compositions, scoring them all is quicker than bounding.
ENUMERATE_ALL = 300_000
MAX_BRUTE_FORCE = 2_000_000
# Ties beyond this many are counted, not listed (a JSON page of 10^5 fleets helps nobody).
MAX_SHOWN = 200


def composition_count(total: int, parts: int) -> int:
    """How many ways to write ``total`` as an ordered sum of ``parts`` non-negative integers."""
    return math.comb(total + parts - 1, parts - 1)


def compositions(total: int, parts: int) -> np.ndarray:
    """All compositions of ``total`` into ``parts`` non-negative parts, one per row."""
    rows = np.zeros((1, 0), dtype=np.int64)
    sums = np.zeros(1, dtype=np.int64)
    # Extend every partial row by each value that still fits; the last part takes the rest.
    for _ in range(parts - 1):
        fan_out = total - sums + 1
        starts = np.repeat(np.cumsum(fan_out) - fan_out, fan_out)
        values = np.arange(int(fan_out.sum()), dtype=np.int64) - starts
        rows = np.hstack([np.repeat(rows, fan_out, axis=0), values[:, None]])
        sums = np.repeat(sums, fan_out) + values
    return np.hstack([rows, (total - sums)[:, None]])


def _lcm_denominators(values: list[Fraction]) -> int:
    out = 1
    for v in values:
        out = math.lcm(out, v.denominator)
    return out


def integer_weights(problem: PlacementProblem) -> tuple[list[int], list[int], list[int]]:
    """Models with a share, their ratio weights and every model's throughput, as integers.

    Both are scaled by a common denominator, which changes no comparison, so keys
    can be compared exactly as integers.
    """
    weights = problem.weights
    live = [m for m, w in enumerate(weights) if w is not None]
    live_weights = [w for w in weights if w is not None]
    w_scale = _lcm_denominators(live_weights)
    q_scale = _lcm_denominators(list(problem.qps))
    return live, [int(w * w_scale) for w in live_weights], [int(q * q_scale) for q in problem.qps]


def score(
    problem: PlacementProblem, layouts: list[HostLayout], x: np.ndarray, *, failures: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Integer keys (worst, nominal, wasted) for fleets ``x``, exact after scaling.

    With ``failures`` False the worst case is over no failure only.
    """
    a = np.array([lay.counts for lay in layouts], dtype=np.int64)  # (L, K)
    live, w_int, q_int = integer_weights(problem)
    biggest = max(w_int + q_int) * problem.hosts * problem.units * len(problem.names)
    dtype: type = np.int64 if biggest < 2**62 else object
    x = x.astype(dtype)
    counts = x @ a.astype(dtype)  # (n, K) workers per model
    lost = np.zeros_like(counts)
    for lay_index in range(len(layouts) if failures else 0):
        present: np.ndarray = (x[:, lay_index] > 0).astype(dtype)[:, None]
        lost = np.maximum(lost, present * a[lay_index].astype(dtype)[None, :])
    after = counts - lost
    worst = np.min(np.stack([after[:, m] * w_int[i] for i, m in enumerate(live)], axis=1), axis=1)
    nominal = counts @ np.array(q_int, dtype=dtype)
    wasted = x @ np.array([lay.wasted for lay in layouts], dtype=dtype)
    return worst, nominal, wasted


def best_rows(x: np.ndarray, worst: np.ndarray, nominal: np.ndarray, wasted: np.ndarray, count: int) -> list[int]:
    """Indexes of the ``count`` best rows, best first: (worst, nominal) high, wasted low.

    Ties are broken by the composition itself (first layouts' counts high), so
    every method lists tied fleets in the same order.
    """
    rows = np.arange(len(worst))
    if len(rows) > count:
        # Only rows whose worst ratio reaches the count-th largest can be among the best.
        cutoff = np.partition(worst, len(worst) - count)[len(worst) - count]
        rows = rows[worst >= cutoff]
    tie_keys = tuple(-x[rows, c] for c in range(x.shape[1] - 1, -1, -1))
    # lexsort: the last key is the primary one.
    order = np.lexsort((*tie_keys, wasted[rows], -nominal[rows], -worst[rows]))
    return [int(i) for i in rows[order[:count]]]


def _select(order: list[int], keys: list[tuple[object, ...]], top: int) -> list[int]:
    """The first ``top`` of ``order`` plus every later one tied with the last taken."""
    chosen = order[:top]
    if not chosen:
        return chosen
    last = keys[chosen[-1]]
    for i in order[top:]:
        if keys[i] != last or len(chosen) >= MAX_SHOWN:
            break
        chosen.append(i)
    return chosen


def _dense_ranks(keys: list[tuple[object, ...]]) -> list[int]:
    ranks: list[int] = []
    for i, key in enumerate(keys):
        ranks.append(1 if i == 0 else ranks[-1] + (key != keys[i - 1]))
    return ranks


def solve_counts(problem: PlacementProblem, *, top: int = 10, prune: bool | None = None) -> PlacementResult:
    """Exact ranking over compositions of the hosts over maximal layouts.

    Up to ENUMERATE_ALL compositions every one is scored; beyond, the search of
    :mod:`emulator.analysis.placement.prune` scores only those whose bound could reach the
    ranking (``prune`` forces one way or the other). Both give the same ranking.
    """
    # cycle: prune imports this module's scoring at load time
    from emulator.analysis.placement.prune import top_rows

    maximal = host_layouts(problem, maximal_only=True)
    every = host_layouts(problem)
    n = composition_count(problem.hosts, len(maximal))
    too_many = PlacementError(
        f"hosts: {problem.hosts} hosts over {len(maximal)} maximal layouts is {n:,} fleets to "
        f"score (limit {MAX_COMPOSITIONS:,}); use fewer hosts or fewer worker types"
    )
    x: np.ndarray | None = None
    if (n > ENUMERATE_ALL) if prune is None else prune:
        try:
            x, scored = top_rows(problem, maximal, top, top + MAX_SHOWN)
            how = f"{scored:,} fleets scored, the other {n - scored:,} shown by bounds to rank lower"
        except OverflowError:
            if n > MAX_COMPOSITIONS:
                raise too_many from None
        except PlacementError:
            if n > MAX_COMPOSITIONS:
                raise
    if x is None:
        if n > MAX_COMPOSITIONS:
            raise too_many
        x, scored = compositions(problem.hosts, len(maximal)), n
        how = f"all {n:,} fleets scored"
    worst, nominal, wasted = score(problem, maximal, x)
    head = best_rows(x, worst, nominal, wasted, top + MAX_SHOWN)
    keys = {int(i): (worst[i], nominal[i], wasted[i]) for i in head}
    chosen = _select(head, keys, top)  # type: ignore[arg-type]
    ranks = _dense_ranks([keys[i] for i in chosen])
    ranked = []
    for rank, i in zip(ranks, chosen, strict=True):
        groups = [(int(c), lay) for c, lay in zip(x[i], maximal, strict=True)]
        ranked.append(evaluate_fleet(problem, groups, rank))
    notes = [f"{len(maximal)} maximal host layouts; {how}, exactly"]
    return PlacementResult(problem, every, ranked, n, n - len(ranked), "counts", notes, scored=scored)


def best_fleet(problem: PlacementProblem, *, failures: bool = True, limit: int = MAX_COMPOSITIONS) -> FleetPlacement:
    """The top-ranked fleet; with ``failures`` False, ranked on no failure alone.

    Ties go to the first in layout order, as in :func:`solve_counts`. Raises
    PlacementError when more than ``limit`` fleets would have to be scored.
    """
    maximal = host_layouts(problem, maximal_only=True)
    n = composition_count(problem.hosts, len(maximal))
    if n > limit:
        raise PlacementError(f"hosts: {problem.hosts} hosts give {n:,} fleets to score, over the limit of {limit:,}")
    x = compositions(problem.hosts, len(maximal))
    worst, nominal, wasted = score(problem, maximal, x, failures=failures)
    best = best_rows(x, worst, nominal, wasted, 1)[0]
    fleet = evaluate_fleet(problem, [(int(c), lay) for c, lay in zip(x[best], maximal, strict=True)], 1)
    if not failures:
        no_failure = fleet.cases[0].worst
        fleet = replace(fleet, worst_ratio=no_failure)
    return fleet


def brute_force_fleets(problem: PlacementProblem, layouts: list[HostLayout]) -> dict[tuple[int, ...], tuple[Fraction | None, Fraction, int]]:
    """Every fleet over ``layouts`` as a count vector -> (worst ratio, nominal, wasted), by brute force.

    Each ordered assignment of layouts to hosts is scored by removing every host
    in turn; no shortcut of the counts method is used.
    """
    total = len(layouts) ** problem.hosts
    if total > MAX_BRUTE_FORCE:
        raise PlacementError(
            f"hosts: brute force over {total:,} assignments is too slow; use method=counts"
        )
    k = len(problem.names)
    weights = problem.weights
    seen: dict[tuple[int, ...], tuple[Fraction | None, Fraction, int]] = {}
    for assignment in itertools.product(range(len(layouts)), repeat=problem.hosts):
        counts = [sum(layouts[h].counts[m] for h in assignment) for m in range(k)]
        cases = [counts]
        for lost_host in range(problem.hosts):
            cases.append([sum(layouts[h].counts[m] for j, h in enumerate(assignment) if j != lost_host)
                          for m in range(k)])
        ratios = [w * case[m] for case in cases for m, w in enumerate(weights) if w is not None]
        worst = min(ratios) if ratios else None
        nominal = sum((problem.qps[m] * counts[m] for m in range(k)), Fraction(0))
        wasted = sum(layouts[h].wasted for h in assignment)
        vector = tuple(assignment.count(lay) for lay in range(len(layouts)))
        previous = seen.setdefault(vector, (worst, nominal, wasted))
        if previous != (worst, nominal, wasted):  # the same multiset must score the same
            raise AssertionError(f"host order changed the score of {vector}")
    return seen


def solve_brute_force(problem: PlacementProblem, *, top: int = 10) -> PlacementResult:
    """Reference ranking for small fleets (see :func:`brute_force_fleets`)."""
    maximal = host_layouts(problem, maximal_only=True)
    scored = brute_force_fleets(problem, maximal)

    def sort_key(item: tuple[tuple[int, ...], tuple[Fraction | None, Fraction, int]]) -> tuple[object, ...]:
        vector, (worst, nominal, wasted) = item
        return (-(worst if worst is not None else Fraction(0)), -nominal, wasted, tuple(-c for c in vector))

    items = sorted(scored.items(), key=sort_key)
    keys = [v for _, v in items]
    chosen = _select(list(range(len(items))), keys, top)  # type: ignore[arg-type]
    ranks = _dense_ranks([keys[i] for i in chosen])
    ranked: list[FleetPlacement] = []
    for rank, i in zip(ranks, chosen, strict=True):
        vector, (worst, nominal, wasted) = items[i]
        fleet = evaluate_fleet(problem, list(zip(vector, maximal, strict=True)), rank)
        ranked.append(replace(fleet, worst_ratio=worst, nominal=nominal, wasted_units=wasted))
    total = len(maximal) ** problem.hosts
    notes = [f"{len(maximal)} maximal host layouts; {total:,} ordered assignments tried"]
    return PlacementResult(problem, host_layouts(problem), ranked, len(items), len(items) - len(ranked),
                           "brute_force", notes, scored=total)
