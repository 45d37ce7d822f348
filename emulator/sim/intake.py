"""What every kind of dispatcher does with arrivals before deciding anything: taking in
its model's part of each arrival chunk (the gateway's rate limit sheds some on the way),
withdrawing and redrawing arrivals when the rate changes, and compacting its request
store. Also its standing: the dispatcher's epoch (bumped by a cold failover) and whether
it is failing over.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from typing import TYPE_CHECKING, Any

import numpy as np

from emulator.scenario import ModelSpec, Scenario
from emulator.sim.arrivals import FIELDS, Arrivals, ArrivalSource
from emulator.sim.books import ModelBooks
from emulator.sim.events import EventQueue

if TYPE_CHECKING:
    from emulator.sim.policies import DispatchPolicy
    from emulator.sim.workers import WorkerModel


class Intake(ModelBooks, ABC):
    """A model's dispatcher, as far as arrivals and its standing go; see the module
    docstring. Subclasses decide what happens to the requests taken in."""

    def __init__(
        self,
        index: int,
        spec: ModelSpec,
        scenario: Scenario,
        source: ArrivalSource,
        queue: EventQueue,
        workers: list[int],
    ) -> None:
        super().__init__(index, spec.name, scenario.client, source)
        self.queue = queue
        #: This model's workers (fleet indexes), in layout order.
        self.workers = workers
        #: Set by the engine once the worker model exists.
        self.policy: DispatchPolicy
        self.worker_model: WorkerModel
        disp = scenario.dispatcher
        self.queue_limit = disp.queue_limit
        #: The scorer weights of ``[dispatcher.scorers]`` (a pool's own, in a pool's view).
        self.scorers = disp.scorers
        #: What the prefix scorer reads (``dispatcher.prefix_index``), and the
        #: estimated index's capacity and staleness (a pool's view shares them).
        self.prefix_index = disp.prefix_index
        self.prefix_index_capacity = disp.prefix_index_capacity
        self.prefix_index_ttl_s = disp.prefix_index_ttl_s
        #: Session affinity (``dispatcher.session_affinity``) and how long an idle
        #: session's worker is remembered (a pool's view has its pool's).
        self.session_affinity = disp.session_affinity
        self.session_ttl_s = disp.session_ttl_s
        #: Seconds a pushed request takes to reach its worker (``dispatcher.proxy_hop_s``).
        self.proxy_hop_s = disp.proxy_hop_s
        #: The workers that admit from the held queue at their step starts, under a
        #: policy that holds requests (a split model's prefill pool, under ``pull``).
        self.held_workers = workers
        #: Any waiting bound at all (a split model's pools may each have their own).
        self.bounded = bool(disp.queue_limit)
        self.gw_shed: Arrivals | None = None  # shed by the rate limit, not yet offered
        self.gw_pos = 0
        #: Work held by the dispatcher (closed batches, or requests), oldest first.
        self.closed: deque[Any] = deque()
        self.closed_reqs = 0
        self.epoch = 0  # bumped when a cold standby takes over: older work is orphaned
        self.paused = False  # failing over: no dispatching
        self.paused_until = 0.0
        self.failover_s = disp.failover_s
        self.cold = disp.standby == "cold"

    # -- what subclasses decide ------------------------------------------------------
    @abstractmethod
    def take_held(self) -> Any:
        """Take the oldest held unit of work (only while serving and holding one)."""

    @abstractmethod
    def replan(self) -> None:
        """React to the held queue getting shorter (a queue limit admits more)."""

    @abstractmethod
    def drain(self) -> None:
        """Hand out the held work the policy can take now."""

    # -- arrivals --------------------------------------------------------------------
    def add_arrivals(self, arr: Arrivals) -> None:
        """Take this model's share of an arrival chunk (not yet offered)."""
        ok = arr.admitted
        if ok.all():
            self.store.append(
                arr.time, arr.tokens, arr.attempt, arr.key, arr.ctr, arr.output, arr.group, arr.prefix
            )
        else:
            a = arr.select(ok)
            self.store.append(a.time, a.tokens, a.attempt, a.key, a.ctr, a.output, a.group, a.prefix)
            shed = arr.select(~ok)
            if self.gw_shed is not None and self.gw_pos < self.gw_shed.time.size:
                rest = self.gw_shed.select(np.arange(self.gw_pos, self.gw_shed.time.size))
                shed = Arrivals(
                    *(np.concatenate([getattr(rest, f), getattr(shed, f)]) for f in FIELDS)
                )
                shed = shed.select(np.argsort(shed.time, kind="stable"))
            self.gw_shed, self.gw_pos = shed, 0

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
                    gs.output[lo:j][again],
                    gs.group[lo:j][again],
                    gs.prefix[lo:j][again],
                )

    def compact(self, compact_rows: int) -> None:
        """Drop the store's rows no longer needed once it holds more than
        ``compact_rows``."""
        if len(self.store) > compact_rows:
            low = self._oldest_row()
            if self.timeout is not None and low > self.swept:
                self.swept = low  # the rows skipped are final and need no visit
            self.store.compact(low)

    @abstractmethod
    def _oldest_row(self) -> int:
        """First store row still needed (subclasses know what they hold)."""

    # -- a change of rate ------------------------------------------------------------
    def withdraw_fresh(self) -> tuple[np.ndarray, ...]:
        """Withdraw the arrivals generated beyond the rows already offered (their
        rate-limit slots given back), keeping the retries among them, which do not depend
        on the rate. Returns the kept retries' fields (arrival, tokens, attempt, key,
        ctr); see ``redraw``."""
        st, b = self.store, self.store.base
        lo, hi = self.ingested - b, st.end - b
        retry = st.attempt[lo:hi] > 0
        self.source.release(st.ctr[lo:hi][~retry])
        kept = tuple(
            getattr(st, f)[lo:hi][retry].copy()
            for f in ("arrival", "tokens", "attempt", "key", "ctr", "output", "group", "prefix")
        )
        st.truncate(self.ingested)
        gs = self.gw_shed
        if gs is not None:
            # Entries before gw_pos were offered already; later fresh ones are withdrawn.
            self.gw_shed = gs.select((np.arange(gs.time.size) < self.gw_pos) | (gs.attempt > 0))
        return kept

    def merge_redrawn(self, fresh: Arrivals, kept: tuple[np.ndarray, ...]) -> None:
        """Merge the arrivals drawn again at the new rate (all models' ``fresh``) with the
        retries ``withdraw_fresh`` kept."""
        arrival, tokens, attempt, key, ctr, output, group, prefix = kept
        mine = fresh.select(fresh.model == self.index)
        adm = mine.select(mine.admitted)
        t_all = np.concatenate([arrival, adm.time])
        order = np.argsort(t_all, kind="stable")
        self.store.append(
            t_all[order],
            np.concatenate([tokens, adm.tokens])[order],
            np.concatenate([attempt, adm.attempt])[order],
            np.concatenate([key, adm.key])[order],
            np.concatenate([ctr, adm.ctr])[order],
            np.concatenate([output, adm.output])[order],
            np.concatenate([group, adm.group])[order],
            np.concatenate([prefix, adm.prefix])[order],
        )
        shed = mine.select(~mine.admitted)
        if shed.time.size:
            self.add_arrivals(shed)
