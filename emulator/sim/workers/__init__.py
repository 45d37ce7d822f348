"""Worker models, chosen by name (``worker.batching``): ``static`` (the seed doc's: a
closed batch runs whole for its service time) and ``continuous`` (iteration-level
batching with a KV cache). A new model is a ``WorkerModel`` subclass registered with
``register_worker_model`` (see ARCHITECTURE.md, "How to add a worker model")."""

from __future__ import annotations

from emulator.scenario import catalog
from emulator.sim.workers.base import WorkerModel
from emulator.sim.workers.continuous import ContinuousWorkers
from emulator.sim.workers.static import StaticWorkers

#: Registered worker models by name.
WORKER_MODELS: dict[str, type[WorkerModel]] = {}


def register_worker_model(cls: type[WorkerModel]) -> type[WorkerModel]:
    """Register a worker model class under its ``name`` (usable as a class decorator)."""
    WORKER_MODELS[cls.name] = cls
    catalog.register_worker_model(catalog.WorkerModelEntry(cls.name, token_level=cls.token_level))
    return cls


register_worker_model(StaticWorkers)
register_worker_model(ContinuousWorkers)

__all__ = [
    "WORKER_MODELS",
    "ContinuousWorkers",
    "StaticWorkers",
    "WorkerModel",
    "register_worker_model",
]
