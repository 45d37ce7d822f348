"""Disaggregated scenarios for the tests, and the same requests for the step-by-step
reference (``disagg_reference.py``): the requests are replayed from a JSONL trace."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from disagg_reference import DisaggResult, simulate_disagg
from token_reference import TokenRequest, WorkerParams
from token_scenarios import WORKER, write_trace

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
    worker = {k: v for k, v in asdict(params).items() if k != "roofline"}
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
    pools: dict[str, dict[str, Any]] | None = None,
    queue_limit: int = 0,
    **scenario_keys: Any,
) -> tuple[Engine, dict[int, tuple[float, float]], DisaggResult]:
    """Run the engine (replaying ``requests``) and the reference on the same requests;
    also give each completed row's (first token, done) as the engine recorded it.
    ``pools`` gives a pool (by role, "prefill" or "decode") its own ``policy`` or
    ``queue_limit``, as ``[pools.NAME]`` does."""
    trace = write_trace(requests, tmp_path / "requests.jsonl")
    data = pd_data(prefill=prefill, decode=decode, duration_s=duration_s, trace=trace,
                   policy=policy, params=params, gb_s=gb_s, threshold=threshold,
                   pools=pools, queue_limit=queue_limit, **scenario_keys)
    engine = Engine(Scenario.from_dict(data, max_requests=None))
    router = engine.disp[0]
    done: dict[int, tuple[float, float]] = {}
    record = router.complete_request

    def spy(rec: tuple) -> None:
        done[rec[0]] = (rec[1], rec[2])
        record(rec)

    router.complete_request = spy  # type: ignore[method-assign]
    engine.run()
    reference = simulate_disagg(
        requests, prefill_workers=prefill, decode_workers=decode, params=params,
        transfer_s_per_token=KV_BYTES / (gb_s * 1e9), threshold_tokens=threshold,
        policy={role: (pools or {}).get(role, {}).get("policy", policy) for role in ("prefill", "decode")},
        queue_limit={
            role: (pools or {}).get(role, {}).get("queue_limit", queue_limit)
            for role in ("prefill", "decode")
        },
        duration_s=duration_s,
    )
    return engine, done, reference
