"""Small scenario builders shared by the emulator tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from emulator.scenario import Scenario

REPO = Path(__file__).resolve().parents[2]
#: The scenario file shipped beside the repository (shared/ next to the clone),
#: which must keep loading unchanged; the doc-as-written preset is a verbatim
#: copy, used when the shared folder is not there.
SHARED_EXAMPLE = REPO.parent / "shared" / "examples" / "doc-as-written.toml"
EXAMPLE = SHARED_EXAMPLE if SHARED_EXAMPLE.exists() else REPO / "emulator" / "scenario" / "presets" / "doc-as-written.toml"


def single_model(
    *,
    qps: float,
    workers: int,
    batch_n: int = 20,
    batch_s: float = 1.5,
    close_after_s: float | str = "never",
    policy: str = "pull",
    duration_s: float = 120.0,
    sample_s: float = 1.0,
    service: str = "constant",
    service_cv: float = 0.0,
    timeout_s: float | str = "none",
    seed: int = 1,
    **sections: Any,
) -> Scenario:
    """One model "m" (500-token requests, ``batch_n`` to a batch) on hosts of 5 workers."""
    hosts = []
    left = workers
    while left > 0:
        n = min(5, left)
        hosts.append({"units": 10, "workers": [f"m@{2 * i}" for i in range(n)]})
        left -= n
    data: dict[str, Any] = {
        "name": "test",
        "duration_s": duration_s,
        "seed": seed,
        "sample_s": sample_s,
        "traffic": {"qps": qps},
        "models": {"m": {"share": 1.0, "worker_units": 2, "tokens": 500}},
        "dispatcher": {
            "max_batch_tokens": 500 * batch_n,
            "close_after_s": close_after_s,
            "policy": policy,
        },
        "worker": {"batch_s": batch_s, "service": service, "service_cv": service_cv},
        "client": {"timeout_s": timeout_s},
        "hosts": hosts,
    }
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return Scenario.from_dict(data)


def shortened(scenario: Scenario, duration_s: float, *overrides: str) -> Scenario:
    """``scenario`` cut to ``duration_s`` (dropping later faults), with overrides applied."""
    data = scenario.to_dict()
    data["duration_s"] = duration_s
    data["faults"] = [f for f in data["faults"] if f["at_s"] <= duration_s]
    return Scenario.from_dict(data).with_overrides(list(overrides))
