"""Exact top fleets without scoring every composition: breadth-first bound-and-prune.

The counts method scores all ``C(H + L - 1, L - 1)`` compositions of H hosts over
L maximal layouts. With more layouts (three worker types give 7 on a 10-unit
host) that is astronomically many, yet only the best few are wanted. Here the
compositions are grown one layout at a time, in numpy, and a partial fleet is
dropped as soon as an upper bound on its key falls strictly below a key that at
least ``top`` real fleets already reach (so nothing that could be shown, ties
included, is ever dropped):

- worst ratio: for weights ``mu >= 0`` over the models, ``min_m g_m <=
  sum_m mu_m g_m / sum(mu)``; a linear function of the hosts still to assign is
  largest when they all carry the single best remaining layout, and a host loss
  removes at least the workers the layouts chosen so far already put on one
  host. Every ``mu`` on a small grid gives a valid bound; the smallest is used.
- nominal capacity and waste: every remaining host at its best layout.

The starting key comes from fleets of at most two layouts, scored exactly.
"""

from __future__ import annotations

import itertools

import numpy as np

from emulator.analysis.placement import HostLayout, PlacementError, PlacementProblem
from emulator.analysis.placement.search import best_rows, integer_weights, score

__all__ = ["top_rows"]

# Partial fleets expanded per numpy step; bounds memory to a few hundred MB at most.
CHUNK = 400_000
# Partial fleets grown in all (over every attempt) before giving up: a flat objective
# (many near-best fleets, e.g. with a 1-unit worker type) would otherwise take minutes.
BUDGET = 3_000_000


def _mu_grid(live: int) -> np.ndarray:
    steps = {1: 1, 2: 24, 3: 12, 4: 6}.get(live, 4)
    rows = [c for c in itertools.product(range(steps + 1), repeat=live) if sum(c) == steps]
    return np.array(rows, dtype=np.int64)


def _seed_keys(problem: PlacementProblem, layouts: list[HostLayout], top: int) -> tuple[int, int, int] | None:
    """The ``top``-th best key among fleets using at most two layouts (a valid lower bound)."""
    hosts, count = problem.hosts, len(layouts)
    rows = set()
    for first, second in itertools.combinations_with_replacement(range(count), 2):
        for k in range(hosts + 1):
            vector = [0] * count
            vector[first] += k
            vector[second] += hosts - k
            rows.add(tuple(vector))
    if len(rows) < top:
        return None
    x = np.array(sorted(rows), dtype=np.int64)
    worst, nominal, wasted = score(problem, layouts, x)
    i = best_rows(x, worst, nominal, wasted, top)[-1]
    return int(worst[i]), int(nominal[i]), -int(wasted[i])


def top_rows(problem: PlacementProblem, layouts: list[HostLayout], top: int, keep: int) -> tuple[np.ndarray, int]:
    """Every composition whose key could reach the ``top``-th best; the best ``keep`` of them.

    Returns the rows (counts per layout) best first, and how many complete
    fleets were scored. Raises PlacementError when the search would grow more
    than BUDGET partial fleets, OverflowError when keys outgrow 64-bit integers.
    """
    hosts, count = problem.hosts, len(layouts)
    original_layouts = layouts
    live, w_int, q_int = integer_weights(problem)
    mu = _mu_grid(len(live))
    mu_sum = int(mu[0].sum())
    if max(w_int + q_int) * hosts * problem.units * len(problem.names) * mu_sum * 4 >= 2**62:
        raise OverflowError("keys too large for 64-bit pruning")
    w_live = np.array(w_int, dtype=np.int64)
    original = np.array([lay.counts for lay in layouts], dtype=np.int64)  # (L, K)
    # Grow the least useful layouts first (judged at the weights that bound the whole
    # problem best): the bound then keeps their counts small and the frontier narrow.
    root_value = (mu * w_live[None, :]) @ original[:, live].T
    tightest = int(np.argmin(root_value.max(axis=1)))
    perm = sorted(range(count), key=lambda i: (int(root_value[tightest, i]), i))
    layouts = [layouts[i] for i in perm]
    a = original[perm]
    value = root_value[:, perm]  # (G, L): mu-weighted ratio per host of layout l
    nominal = a @ np.array(q_int, dtype=np.int64)
    waste = np.array([lay.wasted for lay in layouts], dtype=np.int64)
    best_value = [value[:, j:].max(axis=1) for j in range(count)]
    best_nominal = [int(nominal[j:].max()) for j in range(count)]
    least_waste = [int(waste[j:].min()) for j in range(count)]
    theta: tuple[int, int, int] | None = None

    def survives(j: int, r: np.ndarray, c: np.ndarray, m: np.ndarray, nom: np.ndarray, wst: np.ndarray) -> np.ndarray:
        if theta is None:
            return np.ones(len(r), dtype=bool)
        gaps = (c - m)[:, live] * w_live[None, :]  # (n, live)
        lagrange = (gaps @ mu.T + r[:, None] * best_value[j][None, :]).min(axis=1) // mu_sum
        ub_nom = nom + r * best_nominal[j]
        ub_neg_waste = -(wst + r * least_waste[j])
        t_worst, t_nom, t_neg = theta
        return (lagrange > t_worst) | ((lagrange == t_worst) & (
            (ub_nom > t_nom) | ((ub_nom == t_nom) & (ub_neg_waste >= t_neg))))

    def k_range(j: int, r: np.ndarray, c: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per partial fleet, the counts k >= 1 of layout j whose worst-ratio bound reaches theta.

        The bound is a minimum of functions linear in k, so the counts that pass
        form one interval; each mu gives one end of it.
        """
        lo, hi = np.ones_like(r), r.copy()
        if theta is None:
            return lo, hi
        with_j = np.maximum(m, a[j][None, :])
        base = ((c - with_j)[:, live] * w_live[None, :]) @ mu.T  # (n, G)
        rest = best_value[j + 1][None, :]
        intercept = base + r[:, None] * rest
        slope = np.broadcast_to(value[:, j][None, :] - rest, intercept.shape)
        need = theta[0] * mu_sum - intercept  # k * slope must reach this
        up, down, flat = slope > 0, slope < 0, slope == 0
        safe = np.where(slope == 0, 1, slope)
        lo = np.maximum(lo, np.where(up, -((-need) // safe), 1).max(axis=1))
        hi = np.minimum(hi, np.where(down, (-need) // (-safe), r[:, None]).min(axis=1))
        blocked = (flat & (need > 0)).any(axis=1)
        return lo, np.where(blocked, lo - 1, hi)

    grown = 0  # partial fleets grown so far, over every attempt

    def grow() -> tuple[np.ndarray, int]:
        """All complete fleets whose bound reaches theta, in the caller's layout order."""
        nonlocal grown
        found: list[np.ndarray] = []
        scored = 0
        k_dims = a.shape[1]
        # A frontier of partial fleets: counts so far, hosts left, workers, largest single-host loss.
        frontier: list[tuple[np.ndarray, ...]] = [(np.zeros((1, 0), dtype=np.int64), np.array([hosts]), np.zeros((1, k_dims), dtype=np.int64),
                     np.zeros((1, k_dims), dtype=np.int64), np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64))]
        for j in range(count):
            last = j == count - 1
            next_frontier: list[tuple[np.ndarray, ...]] = []
            for prefix, r, c, m, nom, wst in _chunks(frontier):
                if last:  # the last layout takes the hosts that are left
                    fan = np.ones_like(r)
                    parent = np.arange(len(r))
                    k = r.copy()
                else:  # 0 hosts of layout j, or any count in the range the bound allows
                    lo, hi = k_range(j, r, c, m)
                    fan = 1 + np.maximum(0, hi - lo + 1)
                    parent = np.repeat(np.arange(len(r)), fan)
                    offset = np.arange(len(parent)) - np.repeat(np.cumsum(fan) - fan, fan)
                    k = np.where(offset == 0, 0, lo[parent] + offset - 1)
                c2 = c[parent] + k[:, None] * a[j][None, :]
                m2 = np.where((k > 0)[:, None], np.maximum(m[parent], a[j][None, :]), m[parent])
                nom2 = nom[parent] + k * nominal[j]
                wst2 = wst[parent] + k * waste[j]
                r2 = r[parent] - k
                grown += len(parent)
                if grown > BUDGET:
                    raise PlacementError(
                        f"hosts: too many near-best fleets to rank exactly ({hosts} hosts over {count} maximal "
                        "layouts); use fewer hosts or fewer worker types"
                    )
                rows = np.hstack([prefix[parent], k[:, None]])
                if last:
                    scored += len(rows)
                    found.append(rows)
                    continue
                keep_mask = survives(j + 1, r2, c2, m2, nom2, wst2)
                next_frontier.append((rows[keep_mask], r2[keep_mask], c2[keep_mask], m2[keep_mask],
                                      nom2[keep_mask], wst2[keep_mask]))
            frontier = next_frontier
        complete = np.vstack(found) if found else np.zeros((0, count), dtype=np.int64)
        x = np.zeros_like(complete)
        x[:, perm] = complete  # back to the caller's layout order, which decides tie order
        return x, scored

    # Bisect on a guess g for the top-th best worst ratio: growing every fleet whose
    # bound reaches g is exact as soon as at least `top` fleets reach g, since every
    # fleet that can be shown then reaches it too. Fewer means the answer lies below
    # g; the fleets found still give a valid floor, as do fleets of two layouts.
    lowest = -(2**62)
    floor = _seed_keys(problem, original_layouts, top)
    low = floor[0] if floor is not None else 0
    high = int(value.max(axis=1).min()) * hosts // mu_sum + 1  # the root bound, plus one
    total_scored = 0
    for _ in range(16):
        if high - low <= 1:
            break
        guess = (low + high + 1) // 2
        theta = (guess, lowest, lowest)
        try:
            x, scored = grow()
        except PlacementError:
            low = guess  # too many fleets reach this guess: aim higher
            continue
        total_scored += scored
        worst, nominal_rows, wasted = score(problem, original_layouts, x)
        if int((worst >= guess).sum()) >= top:
            return _best(problem, original_layouts, x, keep), total_scored
        high = guess
        if len(x) >= top:
            i = best_rows(x, worst, nominal_rows, wasted, top)[-1]
            found = (int(worst[i]), int(nominal_rows[i]), -int(wasted[i]))
            floor = found if floor is None else max(floor, found)
            low = max(low, floor[0])
    theta = floor
    x, scored = grow()
    return _best(problem, original_layouts, x, keep), total_scored + scored


def _best(problem: PlacementProblem, layouts: list[HostLayout], x: np.ndarray, keep: int) -> np.ndarray:
    worst, nominal, wasted = score(problem, layouts, x)
    return x[best_rows(x, worst, nominal, wasted, keep)]


def _chunks(frontier: list[tuple[np.ndarray, ...]]) -> list[tuple[np.ndarray, ...]]:
    """Split frontier blocks so that no block expands into more than CHUNK children."""
    out = []
    for block in frontier:
        r = block[1]
        if not len(r):
            continue
        fan = np.cumsum(r + 1)
        start = 0
        while start < len(r):
            base = fan[start - 1] if start else 0
            stop = max(start + 1, int(np.searchsorted(fan, base + CHUNK, side="right")))
            out.append(tuple(arr[start:stop] for arr in block))
            start = stop
    return out
