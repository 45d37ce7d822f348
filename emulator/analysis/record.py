"""Everything the passes and the exports show about a fleet config, worked out once:
the record a fleet config version stores and every reader reads.

``fleet_record(scenario, doc_text)`` gives a JSON-safe dict: the numbers pass (its
figures, headline, findings and the analysis they come from), the placement answer
(the best layout and where the layout as configured stands, or why the puzzle does not
apply), the placement pass's ranked layouts as its page shows them and the figures the
doc states. Its ``version`` changes whenever its form does,
so a stored record of an older form is worked out again rather than misread.
"""

from __future__ import annotations

from typing import Any

from emulator.analysis import placement
from emulator.analysis.doc_figures import conflicts, find_figures
from emulator.analysis.fleet import analyse
from emulator.analysis.numbers import compute
from emulator.analysis.placement.scenario import current_fleet, problem_args, rank_of
from emulator.scenario import Scenario

__all__ = ["RECORD_VERSION", "fleet_record", "placement_answer", "placement_record"]

#: The form of a record; bump it when a field changes meaning.
RECORD_VERSION = 2


def fleet_record(scenario: Scenario, doc_text: str | None = None) -> dict[str, Any]:
    """The one record of ``scenario``: numbers, placement and the doc's figures."""

    analysis = analyse(scenario)
    report = compute(scenario, analysis)
    record: dict[str, Any] = {
        "version": RECORD_VERSION,
        "scenario": scenario.name,
        "numbers": report.to_dict(),
        "placement": placement_record(scenario, analysis),
        "placement_answer": placement_answer(scenario, analysis=analysis),
    }
    if doc_text is not None:
        figures = find_figures(doc_text, scenario)
        record["doc_figures"] = [f.to_dict() for f in figures]
        record["doc_conflicts"] = conflicts(figures)
    return record


def placement_record(scenario: Scenario, analysis: Any = None) -> dict[str, Any]:
    """The placement answer for the scenario's hosts: the best layout, the layout as
    configured, and their verdicts; or ``{"applies": False, "why": ...}``."""

    try:
        args = problem_args(scenario, analysis)
        result = placement.solve(**args, top=3)
    except placement.PlacementError as exc:
        return {"applies": False, "why": str(exc)}
    problem = placement.make_problem(**args)
    current = current_fleet(problem, scenario)
    data = current.to_dict(problem)
    ranked = rank_of(problem, current)
    data["rank"], data["ranks"] = ranked if ranked else (None, None)
    best = result.ranked[0].to_dict(problem) if result.ranked else None
    return {"applies": True, "hosts": result.problem.hosts, "units": result.problem.units,
            "candidates": result.candidates, "demand_qps": args["demand_qps"] and float(args["demand_qps"]),
            "qps_per_worker": {k: float(v) for k, v in args["qps_per_worker"].items()},
            "models": dict(zip(problem.names, problem.models(), strict=True)),
            "best": best, "current": data}


def placement_answer(scenario: Scenario, hosts: int | None = None, analysis: Any = None) -> dict[str, Any]:
    """The placement pass's answer: the solver's ranked layouts of the scenario's fleet
    (on ``hosts`` hosts of its size when given), the label of the layout as configured,
    and each ranked layout's scenario host groups; or ``{"error": why}``."""

    try:
        # The scenario's own figures (per-worker throughput, split, demand),
        # exactly as `python -m emulator place --scenario` takes them.
        args = problem_args(scenario, analysis)
        if hosts is not None:
            args["hosts"] = hosts
        solved = placement.solve(**args)
        answer = solved.to_dict()
        answer["current_label"] = current_fleet(solved.problem, scenario).label(solved.problem.names)
    except placement.PlacementError as exc:
        return {"error": str(exc)}
    for entry in answer["ranked"]:
        entry["host_groups"] = placement.placement_to_hosts(entry, args["units"])
    return answer
