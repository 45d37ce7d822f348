"""The scenario format: typed specs (``specs``), their validation (``checks``),
``KEY=VALUE`` overrides (``overrides``) and the shipped presets (``presets``).

Everything a caller needs is importable from here: ``from emulator.scenario import
Scenario, ScenarioError, load_scenario``.
"""

from emulator.scenario.errors import ScenarioError
from emulator.scenario.specs import (
    FAULT_ACTIONS,
    SERVICES,
    SHAPES,
    STANDBYS,
    ClientSpec,
    DispatcherSpec,
    Fault,
    GatewaySpec,
    HostGroup,
    ModelSpec,
    Scenario,
    Traffic,
    WorkerSlot,
    WorkerSpec,
    load_scenario,
)

__all__ = [
    "FAULT_ACTIONS",
    "SERVICES",
    "SHAPES",
    "STANDBYS",
    "ClientSpec",
    "DispatcherSpec",
    "Fault",
    "GatewaySpec",
    "HostGroup",
    "ModelSpec",
    "Scenario",
    "ScenarioError",
    "Traffic",
    "WorkerSlot",
    "WorkerSpec",
    "load_scenario",
]
