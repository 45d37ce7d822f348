"""The placement puzzle: which workers go on which hosts, scored by the capacity each
model keeps under the loss of any one host.

``core`` holds the problem, host layouts and the solver's entry point; ``search`` the
exact search over layout counts, ``prune`` its bound-and-prune variant for large
questions, ``fragment`` incremental placement and fragmentation, ``scenario`` the
bridge from a scenario's hosts to a placement question.
"""

from emulator.analysis.placement.core import (
    FleetCase,
    FleetPlacement,
    HostLayout,
    PlacementError,
    PlacementProblem,
    PlacementResult,
    evaluate_fleet,
    exact,
    host_layouts,
    layout_for,
    make_problem,
    placement_to_hosts,
    solve,
)

__all__ = [
    "FleetCase",
    "FleetPlacement",
    "HostLayout",
    "PlacementError",
    "PlacementProblem",
    "PlacementResult",
    "evaluate_fleet",
    "exact",
    "host_layouts",
    "layout_for",
    "make_problem",
    "placement_to_hosts",
    "solve",
]
