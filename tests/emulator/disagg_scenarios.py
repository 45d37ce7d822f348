"""Disaggregated scenarios for the tests, and the same requests for the step-by-step
reference (``disagg_reference.py``): the requests are replayed from a JSONL trace."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from disagg_reference import DisaggResult, simulate_disagg
from prefix_reference import PrefixRequest
from token_reference import TokenRequest, WorkerParams
from token_scenarios import WORKER, completion_times, write_trace

from emulator import Engine
from emulator.scenario import Scenario

#: Llama-2-70B's KV: 2 x 80 layers x 8 KV heads x 128 x 2 bytes.
KV_BYTES = 327_680


def pd_data(
    *,
    prefill: int,
    decode: int,
    duration_s: float,
    trace: Path | None = None,
    qps: float = 0.0,
    prompt: int = 1000,
    output: int = 200,
    policy: str = "round_robin",
    params: WorkerParams = WORKER,
    gb_s: float = 50.0,
    threshold: int = 0,
    timeout_s: float | None = None,
    units: int = 1,
    arch: dict[str, Any] | None = None,
    hardware: dict[str, Any] | None = None,
    pools: dict[str, dict[str, Any]] | None = None,
    queue_limit: int = 0,
) -> dict[str, Any]:
    """The dict form: model ``m`` split into pools ``p`` (``prefill`` hosts) and ``d``
    (``decode`` hosts), one worker a host, KV of ``KV_BYTES`` a token (or, with
    ``arch``, the arch's; with ``params.roofline``, ``arch`` and ``hardware`` are the
    same figures, so steps follow the roofline)."""
    worker = {k: v for k, v in asdict(params).items() if k not in ("roofline", "table", "speculative")}
    if params.roofline is not None:
        worker.update(step_model="roofline", mbu=params.roofline.mbu, mfu=params.roofline.mfu)
    split: dict[str, Any] = {
        "prefill_workers": "p", "decode_workers": "d", "kv_transfer_gb_s": gb_s,
        "decider_threshold_tokens": threshold,
    }
    if arch is None:
        split["kv_bytes_per_token"] = KV_BYTES
    traffic: dict[str, Any] = {"qps": qps}
    if trace is not None:
        traffic["trace"] = str(trace)
    data: dict[str, Any] = {
        "name": "pd",
        "duration_s": duration_s,
        "seed": 1,
        "sample_s": 1.0,
        "traffic": traffic,
        "models": {
            "m": {
                "share": 1.0, "worker_units": units, "tokens": prompt, "output_tokens": output,
                "disaggregated": split,
            }
        },
        "dispatcher": {"policy": policy, "queue_limit": queue_limit},
        "client": {"timeout_s": "none" if timeout_s is None else timeout_s},
        "worker": {"batching": "continuous", **worker},
        "hosts": [
            {"count": prefill, "units": units, "workers": ["m@0"], "pool": "p"},
            {"count": decode, "units": units, "workers": ["m@0"], "pool": "d"},
        ],
    }
    if pools:  # by role: the prefill pool is "p", the decode pool "d"
        data["pools"] = {{"prefill": "p", "decode": "d"}[role]: dict(t) for role, t in pools.items()}
    if arch is not None:
        data["models"]["m"]["arch"] = arch
    if hardware is not None:
        data["hardware"] = hardware
    return data


def run_both(
    requests: list[TokenRequest],
    tmp_path: Path,
    *,
    prefill: int,
    decode: int,
    duration_s: float,
    policy: str = "round_robin",
    params: WorkerParams = WORKER,
    gb_s: float = 50.0,
    threshold: int = 0,
    cache: bool = False,
    block_tokens: int = 16,
    decider: str = "prompt",
    max_prefill_queue: int = 0,
    scorers: dict[str, float] | None = None,
    pools: dict[str, dict[str, Any]] | None = None,
    queue_limit: int = 0,
    **scenario_keys: Any,
) -> tuple[Engine, dict[int, tuple[float, float]], DisaggResult]:
    """Run the engine (replaying ``requests``) and the reference on the same requests;
    also give each completed row's (first token, done) as the engine recorded it. With
    ``cache`` every worker keeps a prefix cache (the requests' groups go in the trace
    as ``prefix_id``), and the decider's keys are set as given. ``pools`` gives a pool
    (by role, "prefill" or "decode") its own ``policy`` or ``queue_limit``, as
    ``[pools.NAME]`` does."""
    trace = _trace(requests, tmp_path / "requests.jsonl")
    data = pd_data(prefill=prefill, decode=decode, duration_s=duration_s, trace=trace,
                   policy=policy, params=params, gb_s=gb_s, threshold=threshold,
                   pools=pools, queue_limit=queue_limit, **scenario_keys)
    if cache:
        data["worker"].update(prefix_cache=True, block_tokens=block_tokens)
    if scorers is not None:
        data["dispatcher"]["scorers"] = scorers
    split = data["models"]["m"]["disaggregated"]
    if decider != "prompt":
        split["decider"] = decider
    if max_prefill_queue:
        split["decider_max_prefill_queue"] = max_prefill_queue
    engine = Engine(Scenario.from_dict(data, max_requests=None))
    done = completion_times(engine)
    reference = simulate_disagg(
        requests, prefill_workers=prefill, decode_workers=decode, params=params,
        transfer_s_per_token=KV_BYTES / (gb_s * 1e9), threshold_tokens=threshold,
        policy={role: (pools or {}).get(role, {}).get("policy", policy) for role in ("prefill", "decode")},
        queue_limit={
            role: (pools or {}).get(role, {}).get("queue_limit", queue_limit)
            for role in ("prefill", "decode")
        },
        duration_s=duration_s, cache=cache, block_tokens=block_tokens,
        decider=decider, max_prefill_queue=max_prefill_queue,
        timeout_s=scenario_keys.get("timeout_s"), weights=scorers,
    )
    return engine, done, reference


def _trace(requests: list[TokenRequest], path: Path) -> Path:
    """The requests as a JSONL trace, with ``prefix_id`` and ``prefix_tokens`` for those
    of a prefix group."""
    if not any(getattr(r, "group", -1) >= 0 for r in requests):
        return write_trace(requests, path)
    with path.open("w", encoding="utf-8") as f:
        for r in requests:
            row: dict[str, Any] = {"arrival_s": r.arrival_s, "prompt_tokens": r.prompt_tokens,
                                   "output_tokens": r.output_tokens}
            group = getattr(r, "group", -1)
            if group >= 0:
                row.update(prefix_id=f"g{group}", prefix_tokens=r.prefix_tokens)  # type: ignore[attr-defined]
            f.write(json.dumps(row) + "\n")
    return path


def prefix_requests(
    *, qps: float, duration_s: float, prompt: int, output: int, groups: int, prefix: int,
    zipf_s: float = 1.1, prompt_cv: float = 0.0, seed: int = 1,
) -> list[PrefixRequest]:
    """Poisson arrivals of requests whose prefix group is drawn by a Zipf law over
    ``groups`` (every request has one), prompts lognormal of mean ``prompt`` (a prefix
    is cut to its prompt)."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / qps, int(qps * duration_s * 1.3) + 10)
    times = np.concatenate([[0.0], np.cumsum(gaps)])
    times = times[times < duration_s]
    n = times.size
    if prompt_cv:
        sigma = np.sqrt(np.log1p(prompt_cv**2))
        prompts = np.maximum(2, np.rint(np.exp(
            np.log(prompt) - sigma**2 / 2 + sigma * rng.standard_normal(n)))).astype(int)
    else:
        prompts = np.full(n, prompt)
    weights = np.arange(1, groups + 1, dtype=float) ** -zipf_s
    group = rng.choice(groups, size=n, p=weights / weights.sum())
    return [PrefixRequest(float(t), int(p), output, int(g), min(prefix, int(p)))
            for t, p, g in zip(times, prompts, group, strict=True)]
