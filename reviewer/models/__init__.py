"""The app's models, one module per area; re-exported here for Django."""

from reviewer.models.review import (
    DesignDoc,
    DocRevision,
    Finding,
    FindingReply,
    FindingStatus,
    FleetConfig,
    FleetConfigVersion,
    ReanchorStatus,
    ReviewPass,
    ReviewSession,
    SessionStatus,
    Severity,
    TraceHop,
)
from reviewer.models.runs import (
    CommandKind,
    EmulatorRun,
    RunCommand,
    RunFrame,
    RunStatus,
    Sweep,
)

__all__ = [
    "CommandKind",
    "EmulatorRun",
    "RunCommand",
    "RunFrame",
    "RunStatus",
    "Sweep",
    "DesignDoc",
    "DocRevision",
    "ReanchorStatus",
    "Finding",
    "FindingReply",
    "FindingStatus",
    "FleetConfig",
    "FleetConfigVersion",
    "ReviewPass",
    "ReviewSession",
    "SessionStatus",
    "Severity",
    "TraceHop",
]
