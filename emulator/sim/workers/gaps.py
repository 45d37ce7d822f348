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
    book = wk.router.tbt
    fresh = wk.fresh
    veterans = n - len(fresh)
    if veterans:
        gap = t - wk.t_dec
        book.add(gap, veterans)
        if wk.track_gaps:
            _push(wk, wk.clock, gap)
    if fresh:
        for s in fresh:
            gap = t - s.last_s
            book.add(gap, 1)
            if gap > s.max_gap:
                s.max_gap = gap
            s.vet = wk.clock
        fresh.clear()
    wk.t_dec = t


def stretch(wk: Worker, t: float) -> None:
    """A stretch of ``wk.steps`` decode steps of ``wk.n`` decoders ended at ``t`` (the
    clock already moved): its first step as ``decode_step``, the rest in bulk."""
    k, n = wk.steps, wk.n
    first_end = wk.t0 + wk.a + wk.b * wk.c  # T(1)
    if k == 1:
        decode_step(wk, t, n)
        return
    clock = wk.clock
    wk.clock = clock - k + 1
    decode_step(wk, first_end, n)
    wk.clock = clock
    # Steps 2..k: a + b (C + n (j - 1)) each, every decoder's.
    first = wk.a + wk.b * (wk.c + n)
    rise = wk.b * n
    wk.router.tbt.add_run(first, rise, k - 1, n)
    if wk.track_gaps:
        _push(wk, clock, first + rise * (k - 2))
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
        wk.router.tbt.add(gap, 1)
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
