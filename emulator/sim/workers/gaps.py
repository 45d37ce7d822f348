"""Times between tokens (TBT) of the continuous worker model: every gap between two
consecutive output tokens of a request, booked without touching each decoder each
step.

Every decoder of a decode step gets its token at the step's end, so a step's gaps are
few values: the decoders that also ran the worker's previous decode step (the
*veterans*) all waited since its end (``Worker.t_dec``), and each decoder that joined
since (``Worker.fresh``) waited since its own first token. Within a stretch of k
decode steps the veterans' gaps after the first step are the step times a + b (C +
n (j - 1)), j = 2..k: booked as one arithmetic run of values, n tokens each. A
request that comes back from a preemption gets its next token when its recompute
ends: that gap (since its last token before) is booked then.

With ``slo.tbt_s`` each request's longest gap is kept for its goodput: the longest
veteran gap of the decode steps since a request became a veteran is read from a
stack of (decode clock, gap) with falling gaps (``Worker.gstack``): the first entry
past its clock holds the longest.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from emulator.sim.workers.entities import Seq, Worker


def _push(wk: Worker, clock: int, gap: float) -> None:
    stack = wk.gstack
    while stack and stack[-1][1] <= gap:
        stack.pop()
    stack.append((clock, gap))


def longest_since(wk: Worker, clock: int) -> float:
    """The longest veteran gap of ``wk``'s decode steps that moved its clock past
    ``clock`` (0 if none)."""
    stack = wk.gstack
    i = bisect_right(stack, (clock, float("inf")))
    return stack[i][1] if i < len(stack) else 0.0


def decode_step(wk: Worker, t: float, n: int) -> None:
    """One decode step of ``n`` decoders ended at ``t`` (the clock already moved)."""
    _first_step(wk, t, n, wk.clock)
    wk.t_dec = t


def _first_step(wk: Worker, t: float, n: int, clock: int) -> None:
    """Book a decode step ending at ``t`` that moved the clock to ``clock``: the
    veterans' gap, and each fresh decoder's own (it becomes a veteran)."""
    fresh = wk.fresh
    veterans = n - len(fresh)
    if veterans:
        gap = t - wk.t_dec
        wk.gap_out((gap, veterans))
        if wk.track_gaps:
            _push(wk, clock, gap)
    if fresh:
        for s in fresh:
            gap = t - s.last_s
            wk.gap_out((gap, 1))
            if gap > s.max_gap:
                s.max_gap = gap
            s.vet = clock
        fresh.clear()


def stretch(wk: Worker, t: float) -> None:
    """A stretch of ``wk.steps`` decode steps of ``wk.n`` decoders ended at ``t`` (the
    clock already moved): its first step as ``decode_step``, the rest in bulk."""
    k, n = wk.steps, wk.n
    a, b, c = wk.a, wk.b, wk.c
    if wk.fresh or wk.track_gaps:
        _first_step(wk, wk.t0 + a + b * c, n, wk.clock - k + 1)  # T(1)
    else:  # every decoder is a veteran
        wk.gap_out((wk.t0 + a + b * c - wk.t_dec, n))
    if k > 1:
        # Steps 2..k: a + b (C + n (j - 1)) each, every decoder's.
        first = a + b * (c + n)
        if b:
            wk.router.tbt.runs.append((first, b * n, k - 1, n))
        else:
            wk.gap_out((first, n * (k - 1)))
        if wk.track_gaps:
            _push(wk, wk.clock, first + b * n * (k - 2))
    wk.t_dec = t


def so_far(wk: Worker, now: float) -> tuple[list[tuple[float, int]], list[tuple[float, float, int, int]]]:
    """The gaps of the steps of ``wk``'s stretch in progress that ended by ``now``
    (not booked yet: a run's summary reads them), as (gap, count) and runs."""
    if not wk.n or wk.phase != 2:  # STRETCH
        return [], []
    done = wk.steps_by(now)
    if not done:
        return [], []
    n = wk.n
    first_end = wk.t0 + wk.a + wk.b * wk.c
    ones = [(first_end - s.last_s, 1) for s in wk.fresh]
    if n > len(wk.fresh):
        ones.append((first_end - wk.t_dec, n - len(wk.fresh)))
    runs = [(wk.a + wk.b * (wk.c + n), wk.b * n, done - 1, n)] if done > 1 else []
    return ones, runs


def first_after_pause(wk: Worker, s: Seq, t: float) -> None:
    """``s`` got a token at ``t`` from a prefill chunk: after a preemption's recompute
    (a gap since its last token) or its first one."""
    if s.generated:
        gap = t - s.last_s
        wk.gap_out((gap, 1))
        if gap > s.max_gap:
            s.max_gap = gap
    s.last_s = t


def left(wk: Worker, s: Seq) -> None:
    """``s`` stops decoding (completed, preempted or gone): settle its last token's
    time and its longest gap."""
    if s.vet < 0:  # no decode step since it joined
        wk.fresh.remove(s)
        return
    s.last_s = wk.t_dec
    if wk.track_gaps:
        gap = longest_since(wk, s.vet)
        if gap > s.max_gap:
            s.max_gap = gap
    s.vet = -1
