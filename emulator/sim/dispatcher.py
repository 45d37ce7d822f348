"""One model's dispatcher: the requests it has seen, its open batch, its plan for closing
it, the closed batches it holds, and handing batches out through its dispatch policy.

Requests reach the dispatcher lazily: the store holds arrivals a chunk ahead, and
``ingest(t)`` admits those up to ``t`` (shedding beyond ``queue_limit``). Between two
events that lower the queue's depth, the depth only grows, so admitting in bulk is
exact. A batch is a contiguous range of store rows; rows shed by the queue limit
inside that range are skipped by their outcome code. The outcomes themselves are the
books' (``sim.books``).

A dead active dispatcher pauses dispatching for ``failover_s``; a cold standby starts
empty (``fail``).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

import numpy as np

from emulator.scenario import ModelSpec, Scenario
from emulator.sim.arrivals import Arrivals, ArrivalSource
from emulator.sim.batch import Batch, ClosePlan
from emulator.sim.events import BATCH_CLOSE, FAILOVER_END, EventQueue
from emulator.sim.intake import Intake
from emulator.sim.requests import SHED

_new_batch = object.__new__

#: A candidate plan while planning: (time_s, full, take_to, cut).
_Plan = tuple[float, bool, int, int]

if TYPE_CHECKING:
    pass


class Dispatcher(Intake):
    """The active dispatcher of one model under static batching; its intake and books
    (``Intake``, ``ModelBooks``) take in and count everything about that model's
    requests."""

    def __init__(
        self,
        index: int,
        spec: ModelSpec,
        scenario: Scenario,
        source: ArrivalSource,
        queue: EventQueue,
        workers: list[int],
    ) -> None:
        super().__init__(index, spec, scenario, source, queue, workers)
        disp = scenario.dispatcher
        self.max_tokens = disp.max_batch_tokens
        self.tokens = spec.tokens
        self.varied = spec.tokens_cv > 0
        self.batch_n = max(1, disp.max_batch_tokens // spec.tokens)
        self.close_after = disp.close_after_s

        #: Fixed tokens, no queue limit, no retries: batches close by simple counting.
        self.simple = not (self.varied or self.queue_limit or self.retries)
        self.open_start = 0
        self.open_count = 0
        self.open_tokens = 0
        self.open_first_s = 0.0
        self.closed: deque[Batch] = deque()  # closed batches held by the dispatcher
        self.closed_reqs = 0
        self.plan_version = 0
        self._plan = ClosePlan()  # rewritten in place by every planning
        self.plan: ClosePlan | None = None  # None: no close planned
        #: Schedules this dispatcher's closes: bound once, as it runs once per batch.
        self._schedule_close = queue.scheduler(BATCH_CLOSE)

    # -- arrivals ------------------------------------------------------------------
    def depth(self) -> int:
        """Requests at the dispatcher: its open batch and the closed batches it holds."""
        return self.open_count + self.closed_reqs

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
                self.frame.shed_queue_full += n - admit
                if self.retries:
                    att = st.attempt[lo:hi]
                    again = att < self.retries
                    self.source.add_retries(
                        st.arrival[lo:hi][again] + self.backoff,
                        self.index,
                        st.tokens[lo:hi][again],
                        st.key[lo:hi][again],
                        att[again] + 1,
                        st.output[lo:hi][again],
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
            simple: _Plan | None = None
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
            return self._set_plan(simple)
        avail = st.end - self.ingested
        cap = avail
        if self.queue_limit:
            cap = min(cap, max(0, self.queue_limit - self.depth()))
        plan: _Plan | None = None
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
        return self._set_plan(plan)

    def _set_plan(self, plan: _Plan | None) -> ClosePlan | None:
        """Make ``plan`` (time_s, full, take_to, cut) the open batch's plan, written into
        the dispatcher's one ``ClosePlan``."""
        self.plan = None if plan is None else self._plan.set(*plan)
        return self.plan


    def cut(self, end: int) -> Batch:
        """Close the open batch at row ``end`` (the rest stays open) and return it."""
        st, b = self.store, self.store.base
        count, tokens = self.open_count, self.open_tokens
        rest_count = rest_tokens = 0
        if end < self.ingested:  # exactly one admitted row stays: the one that did not fit
            rest_count = 1
            rest_tokens = int(st.tokens[end - b])
            self.open_first_s = float(st.arrival[end - b])
        batch = Batch(
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

    # -- closing and handing out -----------------------------------------------------
    def replan(self) -> None:
        """Work out the open batch's close again and schedule it (an older plan's event
        is then ignored by its version)."""
        plan = self.make_plan()
        if plan is not None:
            now = self.queue.now_s
            self._schedule_close(plan.time_s if plan.time_s > now else now, self, self.plan_version)

    def close_due(self, version: int) -> None:
        """The ``BATCH_CLOSE`` handler: close the open batch as planned, hand it out, and
        go on closing while this model's next close comes before any other event."""
        if version != self.plan_version or self.plan is None:
            return
        queue = self.queue
        offer = self.policy.offer
        plan: ClosePlan | None = self.plan
        while plan is not None:
            now = queue.now_s
            if plan.full and self.simple and self.gw_shed is None:
                # The common case at peak load (fixed tokens, no queue limit, no retries,
                # no gateway shedding), once per batch, so written out here rather than
                # as three calls: admit the rows up to the plan's end and close them all
                # as a full batch (built without its __init__ call), hand it out
                # (``dispatch``), and plan the next close (``make_plan`` for an empty
                # batch, writing the one plan's fields in place).
                upto = plan.take_to
                n = upto - self.ingested
                count = self.open_count + n
                batch = _new_batch(Batch)
                batch.first, batch.end, batch.requests = self.open_start, upto, count
                batch.tokens, batch.epoch, batch.model = count * self.tokens, self.epoch, self.index
                self.open_start = self.ingested = upto
                self.open_count = self.open_tokens = 0
                frame = self.frame
                frame.offered += n
                frame.batches += 1
                frame.fill_sum += count * self.tokens / self.max_tokens
                if self.paused or not offer(batch):
                    self.closed.append(batch)
                    self.closed_reqs += count
                self.plan_version += 1
                st = self.store
                full_row = upto + self.batch_n - 1
                if full_row < st.end:
                    plan.time_s = st.arrival.item(full_row - st.base)
                    plan.full = True
                    plan.take_to = plan.cut = full_row + 1
                    if self.close_after is not None:
                        due = st.arrival.item(upto - st.base) + self.close_after
                        if due < plan.time_s:
                            plan.time_s, plan.full = due, False
                elif self.close_after is not None and upto < st.end:
                    plan.time_s = st.arrival.item(upto - st.base) + self.close_after
                    plan.full = False
                else:
                    self.plan = None
                    return
            else:
                if plan.full:
                    # The rows up to the cut are known to have arrived by now.
                    if self.gw_shed is not None:
                        self.ingest_gateway(now)
                    self.take(plan.take_to)
                    end = plan.cut
                else:
                    self.ingest(now)
                    end = self.ingested
                if self.open_count > (1 if end < self.ingested else 0):
                    self.dispatch(self.cut(end))
                plan = self.make_plan()
            if plan is None:
                return
            t = plan.time_s if plan.time_s > now else now
            # queue.can_take_inline(t), inlined: this runs once per batch.
            heap, lane = queue.heap, queue.lane
            if (
                t <= queue.target_s
                and (not heap or t < heap[0][0])
                and (not lane or t < lane[0][0])
            ):
                # Same order as through the heap, with fewer heap operations.
                queue.take_inline(t)
                continue
            self._schedule_close(t, self, self.plan_version)
            return

    def dispatch(self, batch: Batch) -> None:
        """Hand a closed batch out through the policy, or hold it (failing over, or the
        policy cannot take it now)."""
        if self.paused or not self.policy.offer(batch):
            self.closed.append(batch)
            self.closed_reqs += batch.requests

    def take_held(self) -> Batch:
        """Take the oldest held batch (only while serving and holding one)."""
        batch = self.closed.popleft()
        self.closed_reqs -= batch.requests
        return batch

    def drain(self) -> None:
        """Hand out the held batches the policy can take now."""
        if self.paused or not self.closed:
            return
        before = self.closed_reqs
        closed, offer = self.closed, self.policy.offer
        while closed:
            batch = closed[0]
            if not offer(batch):
                break
            closed.popleft()
            self.closed_reqs -= batch.requests
        if self.queue_limit and self.closed_reqs < before:
            self.replan()  # the queue is shorter: more arrivals may be admitted

    # -- failover --------------------------------------------------------------------
    def fail(self) -> None:
        """The active dispatcher dies: dispatching pauses for ``failover_s``; a cold
        standby starts empty (the open and held batches are lost, and batches at workers
        will come back orphaned)."""
        now = self.queue.now_s
        self.ingest(now)
        if self.cold:
            self.lose(self.open_start, self.ingested, now)
            self.open_start, self.open_count, self.open_tokens = self.ingested, 0, 0
            for batch in self.closed:
                self.lose(batch.first, batch.end, now)
            self.closed.clear()
            self.closed_reqs = 0
            self.epoch += 1
        self.paused = True
        self.paused_until = now + self.failover_s
        self.queue.schedule(self.paused_until, FAILOVER_END, self, self.paused_until)
        self.replan()

    def failover_due(self, until: float) -> None:
        """The ``FAILOVER_END`` handler: the standby serves, unless a later failure (or a
        restore) superseded this pause."""
        if self.paused and until == self.paused_until:
            self.end_failover()

    def end_failover(self) -> None:
        """The standby serves from now: hand out what it held."""
        if self.paused:
            self.paused = False
            self.drain()

    # -- a chunk of arrivals ---------------------------------------------------------
    def receive(self, arrivals: Arrivals, compact_rows: int) -> None:
        """Take this model's part of a new arrival chunk, compact the store when it holds
        more than ``compact_rows`` rows, and plan the open batch's close if no fullness
        plan stands."""
        self.add_arrivals(arrivals)
        self.compact(compact_rows)
        if self.plan is None or not self.plan.full:
            self.replan()

    def _oldest_row(self) -> int:
        """First store row still needed: in a batch somewhere, or not yet past its deadline."""
        low = min(self.open_start, self.first_needed_row())
        if self.closed:  # held in order of closing: the first is the oldest
            low = min(low, self.closed[0].first)
        at_workers = self.worker_model.oldest_row(self.index)
        return low if at_workers is None else min(low, at_workers)

    # -- a change of rate ------------------------------------------------------------
    def redraw(self, fresh: Arrivals, kept: tuple[np.ndarray, ...]) -> None:
        """Merge the arrivals drawn again at the new rate (all models' ``fresh``) with the
        retries ``withdraw_fresh`` kept, and plan the open batch's close again."""
        self.merge_redrawn(fresh, kept)
        self.replan()
