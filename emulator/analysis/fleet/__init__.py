"""The one analysis of a fleet config (``analyse``): capacity per model and pool, the
floors, the KV concurrency check, headroom under each host's loss and the autoscaler's
range, which the numbers pass, placement, the suggested findings and the exports read.
"""

from emulator.analysis.fleet.analysis import (
    FleetAnalysis,
    HostLoss,
    ModelAnalysis,
    PoolAnalysis,
    analyse,
)
from emulator.analysis.fleet.capacity import WorkerCapacity

__all__ = ["FleetAnalysis", "HostLoss", "ModelAnalysis", "PoolAnalysis", "WorkerCapacity", "analyse"]
