"""One model's dispatcher under continuous batching: each request is routed on its own,
at its arrival, through the dispatch policy (``round_robin`` and ``least_loaded`` push
it to a worker's waiting queue; ``pull`` gives it to an idle worker or holds it in the
dispatcher's FIFO queue, which busy workers admit from at their step starts).

A request whose prompt and output cannot fit in one worker's KV cache is shed at once
(``shed_oversized``). Admission control: with ``dispatcher.queue_limit`` an arrival
is shed (``shed_queue_full``) when the waiting requests of the pool it would go to
are at the bound: the requests held by the dispatcher under ``pull``, the requests
waiting at the pool's workers under a pushing policy (a disaggregated model's pools
each have their own, the decider choosing the pool). With ``admission =
"predicted_ttft"`` an arrival whose predicted TTFT misses the goal is shed first
(``shed_slo_miss``, ``emulator.sim.admission``). A dead active dispatcher pauses routing for ``failover_s`` (arrivals are held
meanwhile); a cold standby starts empty: the held requests are lost, and responses of
requests already at workers come back orphaned.

Arrivals are events one request each (``REQUEST_ARRIVAL``), taken inline while the
next arrival comes before every other event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emulator.scenario import ModelSpec, Scenario
from emulator.sim.arrivals import Arrivals, ArrivalSource
from emulator.sim.events import FAILOVER_END, REQUEST_ARRIVAL, EventQueue
from emulator.sim.intake import Intake
from emulator.sim.requests import SHED

if TYPE_CHECKING:
    from emulator.sim.admission import Admission


class Router(Intake):
    """See the module docstring."""

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
        #: Largest prompt + output one worker's KV cache holds.
        self.kv_limit = scenario.worker_for(spec.name).kv_request_limit
        self.shed_oversized = 0
        #: Arrivals refused at the waiting bound (``queue_limit``).
        self.shed_queue_full = 0
        #: SLO-aware admission (``admission = "predicted_ttft"``; set by the engine,
        #: None: not used) and the arrivals it refused.
        self.admission: Admission | None = None
        self.shed_slo_miss = 0
        #: Every arrival routed so far, retries included (the SLO planner's load).
        self.arrived = 0
        self._next_arrival_s: float | None = None  # the arrival event pending, if any
        self._arrival_version = 0  # an arrival event of another version is stale
        #: The bound of the held queue (``queue_limit``; a split model's: its prefill
        #: pool's, set by its routing).
        self.hold_limit = self.queue_limit

    def depth(self) -> int:
        """Requests held by the dispatcher."""
        return len(self.closed)

    # -- arrivals --------------------------------------------------------------------
    def receive(self, arrivals: Arrivals, compact_rows: int) -> None:
        """Take this model's part of a new arrival chunk; route each at its time."""
        self.add_arrivals(arrivals)
        self.compact(compact_rows)
        self._schedule_next()

    def ingest(self, t: float) -> None:
        """Count the attempts the gateway shed up to ``t`` (requests that reach the
        dispatcher are routed by their own events)."""
        if self.gw_shed is not None:
            self.ingest_gateway(t)

    def _schedule_next(self) -> None:
        st = self.store
        if self.ingested >= st.end:
            return
        t = float(st.arrival[self.ingested - st.base])
        if self._next_arrival_s is None or t < self._next_arrival_s:
            self._next_arrival_s = t
            self._arrival_version += 1
            self.queue.schedule(t, REQUEST_ARRIVAL, self, self._arrival_version)

    def arrival_due(self, version: int) -> None:
        """The ``REQUEST_ARRIVAL`` handler: route every request that has arrived by now,
        then the next ones while they come before any other event."""
        if version != self._arrival_version:
            return  # superseded by an earlier arrival (a redraw at a new rate)
        self._next_arrival_s = None
        queue, st = self.queue, self.store
        while True:
            now = queue.now_s
            if self.gw_shed is not None:
                self.ingest_gateway(now)
            arrival = st.arrival
            while self.ingested < st.end and arrival.item(self.ingested - st.base) <= now:
                self._route(self.ingested)
                self.ingested += 1
            if self.ingested >= st.end:
                return
            t = arrival.item(self.ingested - st.base)
            if queue.can_take_inline(t):
                queue.take_inline(t)
                continue
            self._next_arrival_s = t
            self._arrival_version += 1
            queue.schedule(t, REQUEST_ARRIVAL, self, self._arrival_version)
            return

    def _route(self, row: int) -> None:
        st, i = self.store, row - self.store.base
        frame = self.frame
        frame.offered += 1
        self.arrived += 1
        if st.attempt.item(i):
            frame.retried += 1
        if st.tokens.item(i) + st.output.item(i) > self.kv_limit:
            # No worker could ever hold it: refused at once, and a re-send would be too.
            st.outcome[i] = SHED
            frame.shed += 1
            frame.shed_oversized += 1
            self.shed_oversized += 1
            return
        if self.admission is not None and not self.paused and not self.admission.admits(row):
            # Its predicted TTFT misses the goal: refused at once (``admission.py``).
            self.shed_slo_miss += 1
            frame.shed_slo_miss += 1
            self.shed_rows(row, row + 1)
            return
        if self.bounded and not self.paused:
            limit, pool = self.policy.bound_for(row)
            if limit and self.worker_model.waiting_in(pool) >= limit:
                self.shed_queue_full += 1
                frame.shed_queue_full += 1
                self.shed_rows(row, row + 1)
                return
        if self.paused or not self.policy.offer(row):
            self.hold(row)

    def hold(self, row: int) -> None:
        """Keep ``row`` in the dispatcher's queue (shed beyond ``hold_limit``)."""
        if self.hold_limit and len(self.closed) >= self.hold_limit:
            self.shed_queue_full += 1
            self.frame.shed_queue_full += 1
            self.shed_rows(row, row + 1)
            return
        self.closed.append(row)
        self.closed_reqs = len(self.closed)
        if not self.paused:
            self.worker_model.work_held(self.index)

    def shed_rows(self, lo: int, hi: int) -> None:
        """Refuse rows ``[lo, hi)`` at admission; their clients may re-send."""
        st, b = self.store, self.store.base
        st.outcome[lo - b : hi - b] = SHED
        self.frame.shed += hi - lo
        if self.retries:
            att = st.attempt[lo - b : hi - b]
            again = att < self.retries
            self.source.add_retries(
                st.arrival[lo - b : hi - b][again] + self.backoff,
                self.index,
                st.tokens[lo - b : hi - b][again],
                st.key[lo - b : hi - b][again],
                att[again] + 1,
                st.output[lo - b : hi - b][again],
                st.group[lo - b : hi - b][again],
                st.prefix[lo - b : hi - b][again],
            )

    # -- the held queue --------------------------------------------------------------
    def take_held(self) -> int:
        """Take the oldest held request (only while serving and holding one)."""
        row: int = self.closed.popleft()
        self.closed_reqs = len(self.closed)
        return row

    def drop_expired(self, t: float) -> None:
        """Forget held requests whose client gave up by ``t`` (the books count them
        timed out); held in arrival order, so they are at the front."""
        if self.timeout is None:
            return
        st, b, closed = self.store, self.store.base, self.closed
        while closed and st.arrival[closed[0] - b] + self.timeout <= t:
            closed.popleft()
        self.closed_reqs = len(closed)

    def replan(self) -> None:
        """The held queue got shorter (nothing to plan: requests are routed one by one)."""

    def drain(self) -> None:
        """Route the held requests the policy can take now; busy workers are told about
        the rest."""
        if self.paused or not self.closed:
            return
        closed, offer = self.closed, self.policy.offer
        while closed:
            # Out of the queue before it is offered: the worker that takes it may admit
            # from this same queue at once.
            row = closed.popleft()
            self.closed_reqs = len(closed)
            if not offer(row):
                closed.appendleft(row)
                break
        self.closed_reqs = len(closed)
        if closed:
            self.worker_model.work_held(self.index)

    # -- failover --------------------------------------------------------------------
    def fail(self) -> None:
        """The active dispatcher dies: routing pauses for ``failover_s``; a cold standby
        starts empty (held requests are lost; responses at workers come back orphaned)."""
        now = self.queue.now_s
        self.ingest(now)
        if self.cold:
            for row in self.closed:
                self.lose(row, row + 1, now)
            self.closed.clear()
            self.closed_reqs = 0
            self.epoch += 1
        self.paused = True
        self.paused_until = now + self.failover_s
        self.queue.schedule(self.paused_until, FAILOVER_END, self, self.paused_until)

    def failover_due(self, until: float) -> None:
        """The ``FAILOVER_END`` handler (see ``Dispatcher.failover_due``)."""
        if self.paused and until == self.paused_until:
            self.end_failover()

    def end_failover(self) -> None:
        """The standby routes from now: hand out what it held."""
        if self.paused:
            self.paused = False
            self.drain()

    # -- store -----------------------------------------------------------------------
    def _oldest_row(self) -> int:
        low = min(self.ingested, self.first_needed_row())
        if self.closed:
            low = min(low, self.closed[0])
        at_workers = self.worker_model.oldest_row(self.index)
        return low if at_workers is None else min(low, at_workers)

    def redraw(self, fresh: Arrivals, kept: tuple[object, ...]) -> None:
        """After a change of rate: merge the redrawn arrivals, route them at their times."""
        self.merge_redrawn(fresh, kept)  # type: ignore[arg-type]
        self._next_arrival_s = None
        self._schedule_next()
