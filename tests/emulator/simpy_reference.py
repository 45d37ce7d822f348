"""An independent, deliberately straightforward SimPy model of the pull case.

Per model: Poisson arrivals one request at a time; a dispatcher that appends each
request to an open batch and closes it when it holds ``batch_n`` requests or
``close_after_s`` after its first request; closed batches wait in a FIFO store; each
worker takes the oldest closed batch, holds it for its service time and then delivers
every request in it. No timeouts, no faults. It shares no code with the engine and
uses its own random numbers, so agreement is statistical, not bit-for-bit.

Used by the faithfulness tests and by ``benchmarks/bench_engine.py``.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy


@dataclass(frozen=True)
class ModelLoad:
    """One model of the reference system."""

    qps: float
    workers: int
    batch_n: int


@dataclass
class ReferenceResult:
    """What the reference measured over the run."""

    offered: int
    ok: int
    served_qps: float
    p50_s: float | None
    p99_s: float | None
    mean_s: float | None
    latencies: np.ndarray


def simulate(
    models: list[ModelLoad],
    *,
    duration_s: float,
    batch_s: float,
    close_after_s: float | None,
    service_cv: float = 0.0,
    seed: int = 12345,
) -> ReferenceResult:
    """Run the reference model for ``duration_s`` and report throughput and latency."""
    env = simpy.Environment()
    rng = np.random.default_rng(seed)
    done = array("d")
    offered = [0]
    sigma = math.sqrt(math.log1p(service_cv**2))
    mu = math.log(batch_s) - sigma * sigma / 2.0

    def service() -> float:
        if service_cv == 0:
            return batch_s
        return float(rng.lognormal(mu, sigma))

    for spec in models:
        closed: simpy.Store = simpy.Store(env)
        state: dict[str, Any] = {"open": [], "batch_id": 0}

        def close(state: dict[str, Any] = state, closed: simpy.Store = closed) -> None:
            closed.put(state["open"])
            state["open"] = []
            state["batch_id"] += 1

        def timer(batch_id: int, state: dict[str, Any] = state, close: Any = close) -> Generator:
            yield env.timeout(close_after_s)
            if state["batch_id"] == batch_id and state["open"]:
                close()

        def arrivals(
            spec: ModelLoad = spec,
            state: dict[str, Any] = state,
            close: Any = close,
            timer: Any = timer,
        ) -> Generator:
            while True:
                yield env.timeout(float(rng.exponential(1.0 / spec.qps)))
                offered[0] += 1
                state["open"].append(env.now)
                if len(state["open"]) == 1 and close_after_s is not None:
                    env.process(timer(state["batch_id"]))
                if len(state["open"]) >= spec.batch_n:
                    close()

        def worker(closed: simpy.Store = closed) -> Generator:
            while True:
                batch = yield closed.get()
                yield env.timeout(service())
                now = env.now
                for arrived in batch:
                    done.append(now - arrived)

        env.process(arrivals())
        for _ in range(spec.workers):
            env.process(worker())

    env.run(until=duration_s)
    lat = np.frombuffer(done, dtype=np.float64).copy()
    has = lat.size > 0
    return ReferenceResult(
        offered=offered[0],
        ok=int(lat.size),
        served_qps=lat.size / duration_s,
        p50_s=float(np.quantile(lat, 0.5)) if has else None,
        p99_s=float(np.quantile(lat, 0.99)) if has else None,
        mean_s=float(lat.mean()) if has else None,
        latencies=lat,
    )
