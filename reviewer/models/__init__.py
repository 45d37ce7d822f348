"""The app's models, one module per area; re-exported here for Django."""

from reviewer.models.review import (
    DesignDoc,
    DocRevision,
    Finding,
    FindingReply,
    FindingStatus,
    FleetConfig,
    FleetConfigVersion,
    ReviewPass,
    ReviewSession,
    SessionStatus,
    Severity,
    TraceHop,
)

__all__ = [
    "DesignDoc",
    "DocRevision",
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
