"""One model's dispatcher: the requests it has seen, its open batch, its queue of closed
batches, its books (outcome counts) and its plan for closing the open batch.

Requests reach the dispatcher lazily: the store holds arrivals a chunk ahead, and
``ingest(t)`` admits those up to ``t`` (shedding beyond ``queue_limit``). Between two
events that lower the queue's depth, the depth only grows, so admitting in bulk is
exact. A batch is a contiguous range of store rows; rows shed by the queue limit
inside that range are skipped by their outcome code.

Outcomes are decided by what happens first. A request's client gives up at
``arrival + timeout_s``; ``sweep(t)`` marks every still-pending request whose deadline
has passed as ``timed_out``. Completions, losses and orphans only claim requests
that are still pending and within their deadline, so no request is counted twice.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from emulator.scenario import ModelSpec, Scenario
from emulator.sim.arrivals import Arrivals, ArrivalSource
from emulator.sim.histogram import LatencyHistogram
from emulator.sim.requests import LOST, OK, ORPHANED, PENDING, SHED, TIMED_OUT, RequestStore

#: A batch: (first row, end row, requests, tokens, dispatcher epoch, model index).
Batch = tuple[int, int, int, int, int, int]


@dataclass
class Counts:
    """Outcome counts of one model over some interval."""

    offered: int = 0
    ok: int = 0
    shed: int = 0
    lost: int = 0
    timed_out: int = 0
    orphaned: int = 0
    retried: int = 0
    wasted_batches: int = 0
    batches: int = 0
    fill_sum: float = 0.0

    def add(self, other: Counts) -> None:
        """Add another interval's counts to these."""
        self.offered += other.offered
        self.ok += other.ok
        self.shed += other.shed
        self.lost += other.lost
        self.timed_out += other.timed_out
        self.orphaned += other.orphaned
        self.retried += other.retried
        self.wasted_batches += other.wasted_batches
        self.batches += other.batches
        self.fill_sum += other.fill_sum


#: When the open batch closes: (time_s, full, take_to, cut). ``full``: it closes by
#: fullness, after admitting rows up to ``take_to`` and cutting at ``cut``; otherwise
#: by its timer, taking whatever arrived. A plain tuple: one is built per batch.
ClosePlan = tuple[float, bool, int, int]


class Dispatcher:
    """The active dispatcher of one model and everything counted about that model."""

    def __init__(
        self, index: int, spec: ModelSpec, scenario: Scenario, source: ArrivalSource
    ) -> None:
        self.index = index
        self.name = spec.name
        self.source = source
        disp, client = scenario.dispatcher, scenario.client
        self.max_tokens = disp.max_batch_tokens
        self.tokens = spec.tokens
        self.varied = spec.tokens_cv > 0
        self.batch_n = max(1, disp.max_batch_tokens // spec.tokens)
        self.close_after = disp.close_after_s
        self.queue_limit = disp.queue_limit
        self.timeout = client.timeout_s
        self.retries = client.retries
        self.backoff = client.retry_backoff_s

        #: Fixed tokens, no queue limit, no retries: batches close by simple counting.
        self.simple = not (self.varied or self.queue_limit or self.retries)
        self.store = RequestStore()
        self.gw_shed: Arrivals | None = None  # shed by the rate limit, not yet offered
        self.gw_pos = 0
        self.ingested = 0  # rows before this have reached the dispatcher (or were shed)
        self.open_start = 0
        self.open_count = 0
        self.open_tokens = 0
        self.open_first_s = 0.0
        self.closed: deque[Batch] = deque()  # closed batches held by the dispatcher
        self.closed_reqs = 0
        self.epoch = 0  # bumped when a cold standby takes over: older batches are orphans
        self.paused = False  # failing over: no dispatching
        self.paused_until = 0.0
        self.plan_version = 0
        self.plan: ClosePlan | None = None
        self.swept = 0  # rows before this are past their client's deadline (if any)
        self.done: list[tuple[int, int, float, int]] = []  # completions not yet booked

        self.frame = Counts()
        self.total = Counts()
        self.latencies: list[np.ndarray] = []
        self.hist = LatencyHistogram()
        # Worker bookkeeping, maintained by the engine.
        self.workers: list[int] = []
        self.idle: deque[int] = deque()
        self.rotation: list[int] = []
        self.rr_next = 0
        self.ll_out = np.zeros(0)
        self.busy = 0
        self.alive = 0
        self.in_service = 0
        self.backlog_reqs = 0

    # -- arrivals ------------------------------------------------------------------
    def depth(self) -> int:
        """Requests at the dispatcher: its open batch and the closed batches it holds."""
        return self.open_count + self.closed_reqs

    def add_arrivals(self, arr: Arrivals) -> None:
        """Take this model's share of an arrival chunk (not yet offered)."""
        ok = arr.admitted
        if ok.all():
            self.store.append(arr.time, arr.tokens, arr.attempt, arr.key, arr.ctr)
        else:
            a = arr.select(ok)
            self.store.append(a.time, a.tokens, a.attempt, a.key, a.ctr)
            shed = arr.select(~ok)
            if self.gw_shed is not None and self.gw_pos < self.gw_shed.time.size:
                rest = self.gw_shed.select(np.arange(self.gw_pos, self.gw_shed.time.size))
                shed = Arrivals(
                    *(
                        np.concatenate([getattr(rest, f), getattr(shed, f)])
                        for f in ("time", "model", "tokens", "key", "attempt", "ctr", "admitted")
                    )
                )
                shed = shed.select(np.argsort(shed.time, kind="stable"))
            self.gw_shed, self.gw_pos = shed, 0

    def ingest(self, t: float) -> None:
        """Offer every arrival up to ``t``: count it, shed it or admit it."""
        if self.gw_shed is not None:
            self.ingest_gateway(t)
        st = self.store
        if self.ingested >= st.end or st.arrival[self.ingested - st.base] > t:
            return
        lo = self.ingested - st.base
        j = int(np.searchsorted(st.arrival[lo : st.end - st.base], t, side="right"))
        self.take(self.ingested + j)

    def ingest_gateway(self, t: float) -> None:
        """Offer the attempts the gateway's rate limit shed up to ``t``."""
        gs = self.gw_shed
        if gs is not None and self.gw_pos < gs.time.size and gs.time[self.gw_pos] <= t:
            j = int(np.searchsorted(gs.time, t, side="right"))
            lo, k = self.gw_pos, j - self.gw_pos
            self.frame.offered += k
            self.frame.shed += k
            self.gw_pos = j
            if self.retries:
                att = gs.attempt[lo:j]
                self.frame.retried += int(np.count_nonzero(att))
                again = att < self.retries
                self.source.add_retries(
                    gs.time[lo:j][again] + self.backoff,
                    self.index,
                    gs.tokens[lo:j][again],
                    gs.key[lo:j][again],
                    att[again] + 1,
                )

    def take(self, upto: int) -> None:
        """Offer store rows up to ``upto`` (all known to have arrived)."""
        start = self.ingested
        n = upto - start
        if n <= 0:
            return
        self.frame.offered += n
        if not (self.retries or self.queue_limit or self.varied):  # the common, fast case
            if self.open_count == 0:
                self.open_first_s = float(self.store.arrival[start - self.store.base])
            self.open_count += n
            self.open_tokens += n * self.tokens
            self.ingested = upto
            return
        st, b = self.store, self.store.base
        if self.retries:
            self.frame.retried += int(np.count_nonzero(st.attempt[start - b : upto - b]))
        admit = n
        if self.queue_limit:
            admit = min(n, max(0, self.queue_limit - self.depth()))
            if admit < n:
                lo, hi = start + admit - b, upto - b
                st.outcome[lo:hi] = SHED
                self.frame.shed += n - admit
                if self.retries:
                    att = st.attempt[lo:hi]
                    again = att < self.retries
                    self.source.add_retries(
                        st.arrival[lo:hi][again] + self.backoff,
                        self.index,
                        st.tokens[lo:hi][again],
                        st.key[lo:hi][again],
                        att[again] + 1,
                    )
        if admit:
            if self.open_count == 0:
                self.open_first_s = float(st.arrival[start - b])
            self.open_count += admit
            self.open_tokens += (
                st.tokens_between(start, start + admit) if self.varied else admit * self.tokens
            )
        self.ingested = upto

    # -- batching ------------------------------------------------------------------
    def make_plan(self) -> ClosePlan | None:
        """Work out when the open batch closes, from the arrivals already generated.

        Fullness counts only arrivals the queue limit will admit before the next drop
        in depth (the plan is redone after any such drop); without enough generated
        arrivals the plan waits for the next chunk, unless the timer decides first.
        """
        self.plan_version += 1
        st, b = self.store, self.store.base
        if not (self.varied or self.queue_limit):  # the common, fast case
            k = self.batch_n - self.open_count
            full_row = self.ingested + k - 1
            simple: ClosePlan | None = None
            if full_row < st.end:
                simple = (st.arrival.item(full_row - b), True, full_row + 1, full_row + 1)
            if self.close_after is not None:
                due: float | None = None
                if self.open_count:
                    due = self.open_first_s + self.close_after
                elif self.ingested < st.end:
                    due = st.arrival.item(self.ingested - b) + self.close_after
                if due is not None and (simple is None or due < simple[0]):
                    simple = (due, False, 0, 0)
            self.plan = simple
            return simple
        avail = st.end - self.ingested
        cap = avail
        if self.queue_limit:
            cap = min(cap, max(0, self.queue_limit - self.depth()))
        plan: ClosePlan | None = None
        if self.varied and self.open_count and self.open_tokens >= self.max_tokens:
            # The request that did not fit the last batch fills this one on its own.
            plan = (self.open_first_s, True, self.ingested, self.ingested)
        elif not self.varied:
            k = self.batch_n - self.open_count
            if 1 <= k <= cap:
                idx = self.ingested + k - 1
                plan = (float(st.arrival[idx - b]), True, idx + 1, idx + 1)
        elif cap >= 1:
            need = self.max_tokens - self.open_tokens
            lo = self.ingested - b
            before = st.cum_before(self.ingested)
            j = int(np.searchsorted(st.cum_tokens[lo : lo + cap], before + need, side="left"))
            if j < cap:
                idx = self.ingested + j
                exact = int(st.cum_tokens[lo + j]) - before == need
                if exact or (self.open_count == 0 and j == 0):
                    plan = (float(st.arrival[idx - b]), True, idx + 1, idx + 1)
                elif j + 1 <= cap:
                    # The request that does not fit closes the batch and opens the next.
                    plan = (float(st.arrival[idx - b]), True, idx + 1, idx)
        if self.close_after is not None:
            first = None
            if self.open_count:
                first = self.open_first_s
            elif cap >= 1:
                first = float(st.arrival[self.ingested - b])
            if first is not None and (plan is None or first + self.close_after < plan[0]):
                plan = (first + self.close_after, False, 0, 0)
        self.plan = plan
        return plan

    def close_full(self, upto: int) -> Batch:
        """The common case in one step (fixed tokens, no queue limit, no retries): admit
        the rows up to ``upto`` and close them all as a full batch."""
        n = upto - self.ingested
        self.frame.offered += n
        count = self.open_count + n
        batch = (self.open_start, upto, count, count * self.tokens, self.epoch, self.index)
        self.open_start = self.ingested = upto
        self.open_count = self.open_tokens = 0
        frame = self.frame
        frame.batches += 1
        frame.fill_sum += count * self.tokens / self.max_tokens
        return batch

    def plan_after_full(self) -> ClosePlan | None:
        """``make_plan`` for a simple dispatcher right after ``close_full`` (empty batch)."""
        self.plan_version += 1
        st, row = self.store, self.ingested
        full_row = row + self.batch_n - 1
        plan: ClosePlan | None = None
        if full_row < st.end:
            plan = (st.arrival.item(full_row - st.base), True, full_row + 1, full_row + 1)
        if self.close_after is not None and row < st.end:
            due = st.arrival.item(row - st.base) + self.close_after
            if plan is None or due < plan[0]:
                plan = (due, False, 0, 0)
        self.plan = plan
        return plan

    def cut(self, end: int) -> Batch:
        """Close the open batch at row ``end`` (the rest stays open) and return it."""
        st, b = self.store, self.store.base
        count, tokens = self.open_count, self.open_tokens
        rest_count = rest_tokens = 0
        if end < self.ingested:  # exactly one admitted row stays: the one that did not fit
            rest_count = 1
            rest_tokens = int(st.tokens[end - b])
            self.open_first_s = float(st.arrival[end - b])
        batch = (
            self.open_start,
            end,
            count - rest_count,
            tokens - rest_tokens,
            self.epoch,
            self.index,
        )
        self.open_start, self.open_count, self.open_tokens = end, rest_count, rest_tokens
        self.frame.batches += 1
        self.frame.fill_sum += (tokens - rest_tokens) / self.max_tokens
        return batch

    # -- outcomes ------------------------------------------------------------------
    def lose(self, start: int, end: int, now: float) -> None:
        """Rows ``[start, end)`` were dropped by a failure at ``now``."""
        b = self.store.base
        out = self.store.outcome[start - b : end - b]
        claim = out == PENDING
        if self.timeout is not None:
            claim &= self.store.arrival[start - b : end - b] + self.timeout >= now
        out[claim] = LOST
        self.frame.lost += int(np.count_nonzero(claim))

    def book_done(self) -> None:
        """Book the completions recorded since the last call, in bulk."""
        if not self.done:
            return
        recs = np.array(self.done, dtype=np.float64)
        self.done.clear()
        st, b = self.store, self.store.base
        starts = recs[:, 0].astype(np.int64)
        lengths = recs[:, 1].astype(np.int64) - starts
        offs = np.cumsum(lengths) - lengths
        rows = np.arange(int(lengths.sum())) + np.repeat(starts - b - offs, lengths)
        t_done = np.repeat(recs[:, 2], lengths)
        code = np.repeat(recs[:, 3].astype(np.int8), lengths)
        arrival = st.arrival[rows]
        claim = st.outcome[rows] == PENDING
        if self.timeout is not None:
            claim &= arrival + self.timeout >= t_done
        st.outcome[rows[claim]] = code[claim]
        delivered = claim & (code == OK)
        n_ok = int(np.count_nonzero(delivered))
        self.frame.ok += n_ok
        self.frame.orphaned += int(np.count_nonzero(claim)) - n_ok
        if n_ok:
            self.latencies.append((t_done - arrival)[delivered])
        per_batch = np.add.reduceat(delivered.astype(np.int64), offs)
        self.frame.wasted_batches += int(np.count_nonzero(per_batch == 0))

    def sweep(self, t: float) -> None:
        """Requests whose client's deadline passed by ``t`` and still pending time out;
        clients whose request timed out, was lost or orphaned may re-send it."""
        if self.timeout is None:
            return
        st, b = self.store, self.store.base
        lo = self.swept - b
        hi = (
            int(np.searchsorted(st.arrival[lo : self.ingested - b], t - self.timeout, side="right"))
            + lo
        )
        if hi <= lo:
            return
        out = st.outcome[lo:hi]
        late = out == PENDING
        out[late] = TIMED_OUT
        self.frame.timed_out += int(np.count_nonzero(late))
        if self.retries:
            att = st.attempt[lo:hi]
            again = (late | (out == LOST) | (out == ORPHANED)) & (att < self.retries)
            if again.any():
                self.source.add_retries(
                    st.arrival[lo:hi][again] + self.timeout + self.backoff,
                    self.index,
                    st.tokens[lo:hi][again],
                    st.key[lo:hi][again],
                    att[again] + 1,
                )
        self.swept = hi + b

    def first_needed_row(self) -> int:
        """First row the timeout sweep still has to visit: pending, or (with retries)
        lost or orphaned, whose client re-sends at its deadline."""
        st, b = self.store, self.store.base
        if self.timeout is None:
            return self.ingested
        out = st.outcome[self.swept - b : self.ingested - b]
        waiting = out == PENDING
        if self.retries:
            waiting |= (out == LOST) | (out == ORPHANED)
        hits = np.flatnonzero(waiting[: 1 << 20])
        return (
            self.swept + int(hits[0]) if hits.size else min(self.ingested, self.swept + (1 << 20))
        )

    def in_system(self) -> int:
        """Offered requests without an outcome yet."""
        st = self.store
        return int(np.count_nonzero(st.outcome[: self.ingested - st.base] == PENDING))

    def next_frame(self) -> tuple[Counts, np.ndarray]:
        """Close the frame's books: its counts and latencies, added to the totals."""
        counts = self.frame
        lat = np.concatenate(self.latencies) if self.latencies else np.zeros(0)
        self.total.add(counts)
        self.hist.add(lat)
        self.frame = Counts()
        self.latencies = []
        return counts, lat
