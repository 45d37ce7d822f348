"""The scenario format: typed specs (``specs``), their validation (``checks``),
``KEY=VALUE`` overrides (``overrides``), the shipped presets (``presets``) and the
catalog of accelerators and model shapes (``hardware``).

Everything a caller needs is importable from here: ``from emulator.scenario import
Scenario, ScenarioError, load_scenario``.
"""

from emulator.scenario.errors import ScenarioError
from emulator.scenario.hardware import GPUS, MODEL_SHAPES, Accelerator, ModelShape, Roofline
from emulator.scenario.specs import (
    AUTO_KV,
    AUTOSCALE_METRICS,
    FAULT_ACTIONS,
    PLANNER_METRIC,
    SERVICES,
    SHAPES,
    STANDBYS,
    STEP_MODELS,
    ArchSpec,
    AutoscalerSpec,
    ClientSpec,
    DisaggSpec,
    DispatcherSpec,
    Fault,
    GatewaySpec,
    HardwareSpec,
    HostGroup,
    ModelSpec,
    PoolSpec,
    PrefixSpec,
    Scenario,
    SpeculativeSpec,
    Traffic,
    WorkerSlot,
    WorkerSpec,
    load_scenario,
)

__all__ = [
    "AUTO_KV",
    "AUTOSCALE_METRICS",
    "PLANNER_METRIC",
    "FAULT_ACTIONS",
    "GPUS",
    "MODEL_SHAPES",
    "STEP_MODELS",
    "Accelerator",
    "ArchSpec",
    "AutoscalerSpec",
    "PoolSpec",
    "HardwareSpec",
    "ModelShape",
    "Roofline",
    "SERVICES",
    "SHAPES",
    "STANDBYS",
    "ClientSpec",
    "DisaggSpec",
    "DispatcherSpec",
    "Fault",
    "GatewaySpec",
    "HostGroup",
    "ModelSpec",
    "PrefixSpec",
    "Scenario",
    "ScenarioError",
    "SpeculativeSpec",
    "Traffic",
    "WorkerSlot",
    "WorkerSpec",
    "load_scenario",
]
