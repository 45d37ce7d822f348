"""Record the golden results of the seed's system: ``python tests/emulator/golden/record.py``.

The files here are the contract of the static worker model: every preset with seeds 1
and 2 (the ``--json`` summary less ``wall_s`` and ``events``), the frames of
``doc-as-written`` and ``round-robin-vs-pull`` (seed 1), and a set of variants that
reach the paths the presets do not (other policies, varied sizes, queue limits, rate
limits, retries, live commands). They were recorded once, before the engine was
reshaped; re-record them only for a deliberate, explained change of the model.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

#: Presets whose frames are recorded (seed 1).
FRAME_PRESETS = ("doc-as-written", "round-robin-vs-pull")
#: Variants: (name, preset, overrides, live commands as (t_s, "inject"|"set_qps", arg)).
VARIANTS: tuple[tuple[str, str, tuple[str, ...], tuple[tuple[float, str, Any], ...]], ...] = (
    ("doc-least-loaded", "doc-as-written", ("dispatcher.policy=least_loaded",), ()),
    ("doc-pull-replicated", "doc-as-written",
     ("dispatcher.policy=pull", "dispatcher.standby=replicated", "dispatcher.close_after_s=0.2"), ()),
    ("doc-varied-tokens", "doc-as-written",
     ("models.small.tokens_cv=0.8", "models.big.tokens_cv=0.5", "dispatcher.close_after_s=0.3",
      "duration_s=120", "faults[1].at_s=100", "faults[2].at_s=110"), ()),
    ("doc-queue-limit", "doc-as-written",
     ("dispatcher.queue_limit=400", "duration_s=150", "faults=[]"), ()),
    ("doc-linear-service", "doc-as-written",
     ("worker.service=linear", "models.small.tokens_cv=0.5", "dispatcher.policy=least_loaded",
      "duration_s=210", "faults[2].at_s=205"), ()),
    ("doc-rate-limit", "doc-as-written",
     ("gateway.rate_limit_qps=15", "gateway.shared_counter=false", "duration_s=100", "faults=[]"), ()),
    ("retry-queue-limit", "retry-storm",
     ("dispatcher.queue_limit=300", "models.small.tokens_cv=0.3"), ()),
    ("retry-rate-limit", "retry-storm",
     ("gateway.rate_limit_qps=4", "dispatcher.policy=least_loaded"), ()),
    ("failover-live", "dispatcher-failover", ("dispatcher.policy=round_robin",),
     ((30.25, "inject", "kill worker:big:1"), (45.5, "set_qps", 60.0),
      (70.0, "inject", "restore worker:big:1"), (90.0, "inject", "kill host:1"),
      (100.0, "set_qps", 140.0), (120.0, "inject", "restore host:1"))),
    ("host-loss-live-pull", "host-loss", ("models.small.tokens_cv=0.4",),
     ((20.0, "set_qps", 120.0), (40.0, "inject", "kill dispatcher:big"),
      (41.0, "inject", "restore dispatcher:big"))),
)


def summary_dict(summary: Any) -> dict[str, Any]:
    """The summary as ``--json`` prints it, less the fields that measure the machine."""
    out = summary.to_dict()
    out.pop("wall_s")
    out.pop("events")
    return out


def run_variant(preset: str, overrides: tuple[str, ...], commands: Any, seed: int) -> Any:
    """Run a preset with overrides and live commands; return (summary, frames)."""
    from emulator import Engine
    from emulator.scenario import load_scenario

    scenario = load_scenario(preset)
    if overrides:
        scenario = scenario.with_overrides(list(overrides))
    engine = Engine(scenario, seed=seed)
    frames = []
    for t_s, kind, arg in commands:
        frames += engine.advance_to(t_s)
        if kind == "inject":
            engine.inject(arg)
        else:
            engine.set_qps(arg)
    while not engine.done:
        frames += engine.advance_to(engine.now_s + 10.0)
    return engine.summary(), frames


def main() -> None:
    from emulator.scenario.presets import PRESETS

    for name in PRESETS:
        for seed in (1, 2):
            summary, frames = run_variant(name, (), (), seed)
            _write(f"summary-{name}-seed{seed}.json", summary_dict(summary))
            if seed == 1 and name in FRAME_PRESETS:
                _write(f"frames-{name}-seed1.json", [f.to_dict() for f in frames])
    for name, preset, overrides, commands in VARIANTS:
        summary, frames = run_variant(preset, overrides, commands, 1)
        _write(f"variant-{name}.json", {
            "summary": summary_dict(summary),
            "frames": [f.to_dict() for f in frames],
        })


def _write(name: str, data: Any) -> None:
    (HERE / name).write_text(json.dumps(data, indent=None, separators=(",", ":")) + "\n")
    print("recorded", name)


if __name__ == "__main__":
    main()
