"""Continuous-batching scenarios for the tests, and the same requests for the
step-by-step reference: a request list is written as a JSONL trace that the engine
replays, so both models see identical arrivals and sizes."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from token_reference import ReferenceResult, TokenRequest, WorkerParams, simulate

from emulator import Engine, Summary
from emulator.scenario import Scenario

#: The worker of the tests unless a test says otherwise (a spec's example numbers).
WORKER = WorkerParams(
    max_num_seqs=256,
    max_batched_tokens=8192,
    kv_cache_tokens=200_000,
    step_base_s=0.005,
    prefill_token_s=2e-5,
    prefill_attn_s=0.0,
    decode_seq_s=1e-4,
    kv_token_s=0.0,
)


def poisson_requests(
    *,
    qps: float,
    duration_s: float,
    prompt: int,
    output: int,
    prompt_cv: float = 0.0,
    output_cv: float = 0.0,
    seed: int = 1,
) -> list[TokenRequest]:
    """Poisson arrivals from 0 with constant or lognormal sizes."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / qps, int(qps * duration_s * 1.3) + 10)
    times = np.concatenate([[0.0], np.cumsum(gaps)])
    times = times[times < duration_s]

    def sizes(mean: int, cv: float) -> np.ndarray:
        if cv == 0:
            return np.full(times.size, mean)
        sigma = np.sqrt(np.log1p(cv * cv))
        draw = np.exp(np.log(mean) - sigma * sigma / 2 + sigma * rng.standard_normal(times.size))
        return np.maximum(1, np.rint(draw)).astype(int)

    prompts, outputs = sizes(prompt, prompt_cv), sizes(output, output_cv)
    return [
        TokenRequest(float(t), int(p), int(o))
        for t, p, o in zip(times, prompts, outputs, strict=True)
    ]


def write_trace(requests: list[TokenRequest], path: Path) -> Path:
    """The requests as a JSONL trace."""
    with path.open("w", encoding="utf-8") as f:
        for r in requests:
            row = {"arrival_s": r.arrival_s, "prompt_tokens": r.prompt_tokens}
            f.write(json.dumps({**row, "output_tokens": r.output_tokens}) + "\n")
    return path


def scenario(
    *,
    workers: int,
    duration_s: float,
    trace: Path | None = None,
    qps: float = 0.0,
    prompt: int = 1000,
    output: int = 200,
    policy: str = "round_robin",
    timeout_s: float | None = None,
    params: WorkerParams = WORKER,
    seed: int = 1,
    units: int = 1,
    arch: dict[str, Any] | None = None,
    **sections: Any,
) -> Scenario:
    """One model ``m`` on ``workers`` hosts of ``units`` units (one worker each),
    batching continuously; ``arch`` is its ``[models.m.arch]`` table."""
    worker = {k: v for k, v in asdict(params).items() if k not in ("roofline", "table", "speculative")}
    if params.speculative is not None:
        worker["speculative"] = asdict(params.speculative)
    if params.roofline is not None:
        worker.update(step_model="roofline", mbu=params.roofline.mbu, mfu=params.roofline.mfu)
        if params.roofline.step_overhead_s:
            worker["step_overhead_s"] = params.roofline.step_overhead_s
    model: dict[str, Any] = {
        "share": 1.0, "worker_units": units, "tokens": prompt, "output_tokens": output
    }
    if arch is not None:
        model["arch"] = arch
    traffic: dict[str, Any] = {"qps": qps}
    if trace is not None:
        traffic["trace"] = str(trace)
    data: dict[str, Any] = {
        "name": "continuous",
        "duration_s": duration_s,
        "seed": seed,
        "sample_s": 1.0,
        "traffic": traffic,
        "models": {"m": model},
        "dispatcher": {"policy": policy},
        "client": {"timeout_s": "none" if timeout_s is None else timeout_s},
        "worker": {"batching": "continuous", **worker},
        "hosts": [{"count": workers, "units": units, "workers": ["m@0"]}],
    }
    for key, value in sections.items():
        data.setdefault(key, {}).update(value)
    return Scenario.from_dict(data, max_requests=None)


def both(
    requests: list[TokenRequest],
    tmp_path: Path,
    *,
    workers: int,
    duration_s: float,
    policy: str = "round_robin",
    timeout_s: float | None = None,
    params: WorkerParams = WORKER,
    **scenario_keys: Any,
) -> tuple[Summary, ReferenceResult]:
    """Run the engine (replaying the requests) and the reference on the same requests
    (``scenario_keys`` go to :func:`scenario`: units, arch, hardware for a roofline)."""
    trace = write_trace(requests, tmp_path / "requests.jsonl")
    sc = scenario(
        workers=workers,
        duration_s=duration_s,
        trace=trace,
        policy=policy,
        timeout_s=timeout_s,
        params=params,
        **scenario_keys,
    )
    summary = Engine(sc).run()
    reference = simulate(
        requests,
        workers=workers,
        params=params,
        policy=policy,
        timeout_s=timeout_s,
        duration_s=duration_s,
    )
    return summary, reference


def reference_percentiles(reference: ReferenceResult, field: str) -> dict[str, float]:
    """p50, p95, p99 of a per-request figure over the reference's ``ok`` requests."""
    values = np.array(
        [getattr(r, field) for r in reference.records if r.outcome == "ok" and getattr(r, field) is not None]
    )
    return {f"p{q}": float(np.percentile(values, q)) for q in (50, 95, 99)}


def completion_times(engine: Engine) -> dict[int, tuple[float, float]]:
    """Run ``engine`` to its end; each request it completed (by row), with its first
    token's time and its completion time, as its first model's router records them."""
    router = engine.disp[0]
    done: dict[int, tuple[float, float]] = {}
    record = router.complete_request

    def spy(rec: tuple) -> None:
        done[rec[0]] = (rec[1], rec[2])
        record(rec)

    router.complete_request = spy  # type: ignore[method-assign]
    engine.run()
    return done
