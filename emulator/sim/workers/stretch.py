"""The closed-form decode stretch: a run of decode-only steps that is one event.

Within a stretch |D| = n is fixed and every context grows by one per step, so step j
lasts a + b (C + n (j - 1)) (a and b from the step cost's decode line, C = D's contexts
in the first step), and the end of step k is

    T(k) = t0 + k a + b (k C + n k (k - 1) / 2)

A stretch ends at the first completion, the first step that would need a preemption,
the first step start at or after a waiting or running request's deadline, or (under
the roofline) the last compute-bound step, whichever comes first; new work for the
worker cuts it at the end of the step in progress.
"""

from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING

from emulator.sim.workers.step_cost import decode_line

if TYPE_CHECKING:
    from emulator.sim.workers.entities import Worker


def first_step_ending_at_or_after(wk: Worker, t: float) -> int:
    """The smallest k >= 1 with T(k) >= t (closed form, then nudged for rounding)."""
    span = t - wk.t0
    if span <= 0:
        return 1
    if not wk.b:  # steps of one length (no per-context term): T(k) = t0 + k a
        k = max(math.ceil(span / wk.a), 1)
        while k > 1 and wk.t0 + (k - 1) * wk.a >= t:
            k -= 1
        while wk.t0 + k * wk.a < t:
            k += 1
        return k
    half = wk.b * wk.n / 2.0
    lin = wk.a + wk.b * wk.c - half
    if half > 0:
        k = math.ceil((-lin + math.sqrt(lin * lin + 4.0 * half * span)) / (2.0 * half))
    else:
        k = math.ceil(span / lin)
    k = max(k, 1)
    while k > 1 and wk.stretch_end(k - 1) >= t:
        k -= 1
    while wk.stretch_end(k) < t:
        k += 1
    return k


def next_completion(wk: Worker) -> int:
    """The decode clock at which ``wk``'s first decoding request completes (entries of
    requests that left since are dropped from the heap)."""
    finishing = wk.finishing
    while True:
        finish, _, s = finishing[0]
        if s.join >= 0 and s.join + s.output - s.generated == finish:
            return finish
        heapq.heappop(finishing)


def plan_stretch(wk: Worker, t: float) -> float:
    """Set ``wk`` up for a stretch of decode steps from ``t`` (its n, a, b, C and
    length); returns when the stretch ends."""
    n = wk.n_dec
    wk.n = n
    wk.c = float(wk.dec_base + n * (wk.clock + 1))  # the decoders' contexts in step 1
    wk.a, wk.b, switch = decode_line(wk, n)
    steps = next_completion(wk) - wk.clock
    # Step j needs the decoders' blocks at clock + j to fit.
    steps = min(steps, wk.dec_last_clock(wk.kv_total - wk.kv_prefill - wk.cached) - wk.clock)
    deadlines = wk.deadlines
    while deadlines and not deadlines[0][2].at:
        heapq.heappop(deadlines)
    if deadlines:
        steps = min(steps, first_step_ending_at_or_after(wk, deadlines[0][0]))
    if switch:
        steps = min(steps, switch)
    k = wk.steps = max(steps, 1)
    # wk.stretch_end(k), inlined: once per stretch.
    return t + k * wk.a + wk.b * (k * wk.c + n * k * (k - 1) / 2)
