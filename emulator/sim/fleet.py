"""The worker fleet's layout and per-worker state as arrays, for cheap frames."""

from __future__ import annotations

import numpy as np

from emulator.scenario import Scenario
from emulator.sim.results import IDLE, PARKED


class Fleet:
    """Hosts and workers in layout order (hosts expanded in file order).

    With an ``[autoscaler]``, the autoscaled model also gets its spare slots, up to
    ``max_workers``, after the hosts' workers: parked, on no host (``host`` -1) until
    the autoscaler places one on free units (``place``) and after it parks it again
    (``unplace``). Each ``[pools.NAME.autoscaler]`` adds its pool's spare slots the
    same way, after those (``pool`` says which pool each worker belongs to).
    """

    def __init__(self, scenario: Scenario) -> None:
        names = list(scenario.models)
        model: list[int] = []
        host: list[int] = []
        first: list[int] = []
        units: list[int] = []
        self.host_units: list[int] = []
        self.host_workers: list[list[int]] = []
        #: Each worker's pool (its host group's ``pool``; None: not in a named pool).
        self.pool: list[str | None] = []
        groups = [g for g in scenario.hosts for _ in range(g.count)]
        for h, n_units, slots in scenario.expanded_hosts():
            self.pool.extend(groups[h].pool for _ in slots)
            self.host_units.append(n_units)
            ids = []
            for slot in slots:
                ids.append(len(model))
                model.append(names.index(slot.model))
                host.append(h)
                first.append(slot.first_unit)
                units.append(scenario.models[slot.model].worker_units)
            self.host_workers.append(ids)
        spare = 0
        for pool, spec in scenario.autoscalers():
            scaled = spec.model
            have = sum(
                1 for w, m in enumerate(model) if names[m] == scaled and self.pool[w] == pool
            ) if pool is not None else scenario.worker_count(scaled)
            extra = spec.max_workers - have
            for _ in range(extra):
                model.append(names.index(scaled))
                host.append(-1)
                first.append(-1)
                units.append(scenario.models[scaled].worker_units)
                self.pool.append(pool)
            spare += extra
        self.model = np.array(model, dtype=np.int64)
        self.host = np.array(host, dtype=np.int64)
        self.first_unit = np.array(first, dtype=np.int64)
        self.units = np.array(units, dtype=np.int64)
        n = len(model)
        #: Each worker's state (IDLE, BUSY, DEAD), kept by the worker model.
        self.state = np.full(n, IDLE, dtype=np.int8)
        if spare:
            self.state[n - spare :] = PARKED
        #: Work waiting at each worker (the static model: batches in its private queue).
        self.backlog = np.zeros(n, dtype=np.int32)
        self.host_alive = np.ones(len(self.host_units), dtype=np.int8)
        self.model_list = model  # Python ints, faster than numpy scalars in the hot path

    def __len__(self) -> int:
        return len(self.model_list)

    def place(self, w: int, h: int, first_unit: int) -> None:
        """Put worker ``w`` (on no host) on host ``h`` from ``first_unit``."""
        self.host[w], self.first_unit[w] = h, first_unit
        self.host_workers[h].append(w)

    def unplace(self, w: int) -> None:
        """Take worker ``w`` off its host: its units are free again."""
        h = int(self.host[w])
        if h >= 0:
            self.host_workers[h].remove(w)
        self.host[w] = self.first_unit[w] = -1

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

