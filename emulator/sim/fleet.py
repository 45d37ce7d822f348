"""The worker fleet as arrays (for cheap frames) plus the per-worker queues, and the
service-time model."""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from emulator.scenario import Scenario
from emulator.sim.results import IDLE


class Fleet:
    """Hosts and workers in layout order (hosts expanded in file order)."""

    def __init__(self, scenario: Scenario) -> None:
        names = list(scenario.models)
        model: list[int] = []
        host: list[int] = []
        first: list[int] = []
        units: list[int] = []
        self.host_units: list[int] = []
        self.host_workers: list[list[int]] = []
        for h, n_units, slots in scenario.expanded_hosts():
            self.host_units.append(n_units)
            ids = []
            for slot in slots:
                ids.append(len(model))
                model.append(names.index(slot.model))
                host.append(h)
                first.append(slot.first_unit)
                units.append(scenario.models[slot.model].worker_units)
            self.host_workers.append(ids)
        self.model = np.array(model, dtype=np.int64)
        self.host = np.array(host, dtype=np.int64)
        self.first_unit = np.array(first, dtype=np.int64)
        self.units = np.array(units, dtype=np.int64)
        n = len(model)
        self.state = np.full(n, IDLE, dtype=np.int8)
        self.backlog = np.zeros(n, dtype=np.int32)
        self.host_alive = np.ones(len(self.host_units), dtype=np.int8)
        self.queue: list[deque[tuple[int, int, int, int, int, int]]] = [deque() for _ in range(n)]
        self.batch: list[tuple[int, int, int, int, int, int] | None] = [None] * n
        self.version = [0] * n  # bumped on death: a stale completion event is ignored
        self.model_list = model  # Python ints, faster than numpy scalars in the hot path

    def __len__(self) -> int:
        return len(self.model_list)

    def layout(self, names: list[str]) -> dict[str, object]:
        """The static layout, JSON-safe."""
        return {
            "models": list(names),
            "hosts": [{"index": i, "units": u} for i, u in enumerate(self.host_units)],
            "workers": {
                "model": self.model.tolist(),
                "host": self.host.tolist(),
                "first_unit": self.first_unit.tolist(),
                "units": self.units.tolist(),
            },
        }


class ServiceTime:
    """Draws batch service times: constant, linear in the batch's tokens, or lognormal
    with mean ``batch_s`` and coefficient of variation ``service_cv``."""

    _BLOCK = 4096

    def __init__(self, scenario: Scenario, rng: np.random.Generator) -> None:
        w = scenario.worker
        self.kind = w.service
        self.batch_s = w.batch_s
        self.per_token_s = w.batch_s / scenario.dispatcher.max_batch_tokens
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
            self._block = self.rng.lognormal(self.mu, self.sigma, self._BLOCK).tolist()
            self._pos = 0
        self._pos += 1
        return self._block[self._pos - 1]
