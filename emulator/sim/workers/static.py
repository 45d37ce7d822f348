"""The ``static`` worker model (the seed doc's): a worker runs one closed batch at a
time, whole, for its service time; batches pushed to a busy worker wait in its private
queue. The service time is ``worker.batch_s`` whatever the batch holds (``constant``),
proportional to the batch's tokens (``linear``), or lognormal with mean ``batch_s`` and
coefficient of variation ``service_cv``.
"""

from __future__ import annotations

import math
from collections import deque
from typing import TYPE_CHECKING, Any

import numpy as np

from emulator.scenario import WorkerSpec
from emulator.sim.batch import Batch
from emulator.sim.events import WORKER_DONE
from emulator.sim.requests import OK, ORPHANED
from emulator.sim.results import BUSY, DEAD, IDLE
from emulator.sim.workers.base import WorkerModel

if TYPE_CHECKING:
    from emulator.sim.engine import Engine


class ServiceTime:
    """Draws batch service times: constant, linear in the batch's tokens, or lognormal
    with mean ``batch_s`` and coefficient of variation ``service_cv``."""

    _BLOCK = 4096

    def __init__(self, w: WorkerSpec, max_batch_tokens: int, rng: np.random.Generator) -> None:
        self.kind = w.service
        self.batch_s = w.batch_s
        self.per_token_s = w.batch_s / max_batch_tokens
        self.rng = rng
        sigma2 = math.log1p(w.service_cv**2)
        self.mu = math.log(w.batch_s) - sigma2 / 2.0
        self.sigma = math.sqrt(sigma2)
        if self.kind == "lognormal" and self.sigma == 0:
            self.kind = "constant"
        #: The service time when it never varies (0.0 otherwise), for the hot path.
        self.constant_s = self.batch_s if self.kind == "constant" else 0.0
        self._block: list[float] = []
        self._pos = 0

    def draw(self, tokens: int) -> float:
        """Service time of a batch holding ``tokens`` tokens."""
        if self.kind == "constant":
            return self.batch_s
        if self.kind == "linear":
            return self.per_token_s * tokens
        if self._pos >= len(self._block):
            # Drawn in blocks: one numpy call per few thousand batches, same sequence.
            self._block = self.rng.lognormal(self.mu, self.sigma, self._BLOCK).tolist()
            self._pos = 0
        self._pos += 1
        return self._block[self._pos - 1]


class StaticWorkers(WorkerModel):
    """One batch at a time per worker; see the module docstring."""

    name = "static"
    frame_keys = ("backlog", "in_service", "busy_workers", "alive_workers")

    def __init__(self, sim: Engine, models: list[int]) -> None:
        super().__init__(sim, models)
        n = len(self.fleet)
        scenario = sim.scenario
        shared = ServiceTime(scenario.worker, scenario.dispatcher.max_batch_tokens, sim.service_rng)
        #: Each model's service times: one shared draw sequence unless a model sets its
        #: own [models.NAME.worker] service keys.
        self.services = [
            ServiceTime(
                scenario.worker_for(name), scenario.dispatcher.max_batch_tokens, sim.service_rng
            )
            if scenario.worker_for(name) != scenario.worker
            else shared
            for name in scenario.models
        ]
        self.queue = sim.queue
        self.disp = sim.disp
        # With one constant service time B for every model served, a completion is due at
        # now + B, and now never decreases: completions are scheduled in order of time,
        # so they can wait in the queue's FIFO lane rather than the heap. (A completion
        # made stale by a kill stays there and is ignored by its version, as before.)
        constant = {self.services[m].constant_s for m in models}
        in_order = len(constant) == 1 and 0.0 not in constant
        queue = sim.queue
        self._schedule_done = (queue.fifo_scheduler if in_order else queue.scheduler)(WORKER_DONE)
        #: The batch each worker is running (None when idle or dead).
        self.batch: list[Batch | None] = [None] * n
        #: Batches pushed to each worker while it was busy, oldest first.
        self.backlog: list[deque[Batch]] = [deque() for _ in range(n)]
        #: Bumped when a worker dies: a completion scheduled before is ignored.
        self.version = [0] * n
        n_models = len(sim.scenario.models)
        self.busy = [0] * n_models
        self.alive = [0] * n_models
        self.in_service = [0] * n_models  # requests in running batches
        self.backlog_reqs = [0] * n_models  # requests in private queues
        for m in self.fleet.model_list:
            if m in models:
                self.alive[m] += 1
        self.queue.on(WORKER_DONE, self._on_done)

    def is_alive(self, w: int) -> bool:
        return bool(self.fleet.state[w] != DEAD)

    def assign(self, w: int, work: Batch) -> None:
        fleet = self.fleet
        state = fleet.state[w]
        if state == DEAD:
            self.sim.disp[work.model].lose(work.first, work.end, self.queue.now_s)
        elif state == BUSY:
            self.backlog[w].append(work)
            fleet.backlog[w] += 1
            self.backlog_reqs[work.model] += work.requests
        else:
            self.start(w, work)

    def start(self, w: int, work: Batch) -> None:
        if self.batch[w] is None:
            self.busy[work.model] += 1
            self.fleet.state[w] = BUSY
        self.batch[w] = work
        self.in_service[work.model] += work.requests
        service = self.services[work.model]
        service_s = service.constant_s or service.draw(work.tokens)
        self._schedule_done(self.queue.now_s + service_s, w, self.version[w])

    def start_first(self, idle: deque[int], work: Batch) -> bool:
        """``start`` on the first idle worker, inlined (see ``WorkerModel.start_first``)."""
        if not idle:
            return False
        w = idle.popleft()
        m = work.model
        if self.batch[w] is None:
            self.busy[m] += 1
            self.fleet.state[w] = BUSY
        self.batch[w] = work
        self.in_service[m] += work.requests
        service = self.services[m]
        service_s = service.constant_s or service.draw(work.tokens)
        self._schedule_done(self.queue.now_s + service_s, w, self.version[w])
        return True

    def _on_done(self, w: int, version: int) -> None:
        if version != self.version[w]:
            return  # the worker died after this completion was scheduled
        batch = self.batch[w]
        assert batch is not None
        m = batch.model
        d = self.disp[m]
        d.complete((batch.first, batch.end, self.queue.now_s, OK if batch.epoch == d.epoch else ORPHANED))
        self.in_service[m] -= batch.requests
        policy = d.policy
        if policy.counts_done:
            policy.work_done(w)
        backlog = self.backlog[w]
        if backlog:
            nxt = backlog.popleft()
            self.fleet.backlog[w] -= 1
            self.backlog_reqs[m] -= nxt.requests
            self.start(w, nxt)
            return
        # The policy acts while the worker still counts as busy: under pull a held
        # batch starts at once with no change of state, as most do at high load.
        sink = policy.idle_sink
        if sink is not None and not d.closed:
            sink(w)  # nothing held: all worker_idle would do, and nothing starts
        else:
            policy.worker_idle(w)
            if self.batch[w] is not batch:
                return  # it started on held work at once
        self.batch[w] = None
        self.fleet.state[w] = IDLE
        self.busy[m] -= 1

    def kill(self, w: int) -> bool:
        fleet = self.fleet
        if fleet.state[w] == DEAD:
            return False
        m = fleet.model_list[w]
        d = self.sim.disp[m]
        now = self.queue.now_s
        batch = self.batch[w]
        if batch is not None:
            d.lose(batch.first, batch.end, now)
            self.in_service[m] -= batch.requests
            self.busy[m] -= 1
            self.batch[w] = None
        for queued in self.backlog[w]:
            d.lose(queued.first, queued.end, now)
            self.backlog_reqs[m] -= queued.requests
        self.backlog[w].clear()
        fleet.backlog[w] = 0
        self.version[w] += 1
        fleet.state[w] = DEAD
        self.alive[m] -= 1
        return True

    def restore(self, w: int) -> bool:
        fleet = self.fleet
        if fleet.state[w] != DEAD:
            return False
        fleet.state[w] = IDLE
        self.version[w] += 1
        self.alive[fleet.model_list[w]] += 1
        return True

    def oldest_row(self, model: int) -> int | None:
        low: int | None = None
        for w in self.sim.disp[model].workers:
            batch = self.batch[w]
            if batch is not None and (low is None or batch.first < low):
                low = batch.first
            backlog = self.backlog[w]
            if backlog and (low is None or backlog[0].first < low):  # in order of pushing
                low = backlog[0].first
        return low

    def frame_figures(self, model: int) -> dict[str, Any]:
        return {
            "backlog": self.backlog_reqs[model],
            "in_service": self.in_service[model],
            "busy_workers": self.busy[model],
            "alive_workers": self.alive[model],
        }
