"""The numbers pass as the session page shows it: the emulator's figures and suggested
findings, opened by a few headline figures, with the provenance of the inputs.

Headline: the gap to the goal, the latency floors and the capacity left after one
host's loss, the figures a reader needs first; the full table follows on the page.
Suggested findings computed from a config with assumed figures say so in their body.
"""

from __future__ import annotations

from typing import Any

from reviewer.fleets.provenance import assumed_note, split

__all__ = ["HEADLINE", "headline_figures", "numbers_report"]

# In order: (the slot's name on the page, the figure keys that can fill it, first found wins).
HEADLINE: list[tuple[str, tuple[str, ...]]] = [
    ("gap to the goal", ("gap_peak", "gap_avg")),
    ("latency floor", ("latency_floor_s", "ttft_floor_s")),
    ("per-token floor", ("tpot_floor_s",)),
    ("after one host's loss", ("capacity_one_host_lost_qps", "best_mix_one_host_lost_qps")),
    ("offered at the peak", ("offered_peak_qps", "workers_needed_peak", "offered_avg_qps")),
]


# Figures where less is worse (capacity); for the others more is worse (gaps, floors, load).
LOWER_IS_WORSE = frozenset({"capacity_one_host_lost_qps", "best_mix_one_host_lost_qps"})


def _worse(figure: dict[str, Any], current: dict[str, Any]) -> bool:
    """Whether ``figure`` should head its slot rather than ``current``: a fleet-wide
    figure first, else the worst model's (ties by model name), so the headline names
    the model in the most trouble whatever order the scenario lists its models in."""
    if (figure["model"] == "fleet") != (current["model"] == "fleet"):
        return figure["model"] == "fleet"
    try:
        a, b = float(figure["value"]), float(current["value"])
    except (TypeError, ValueError):
        return False  # not a number: the first one listed stays
    if a != b:
        return a < b if figure["key"] in LOWER_IS_WORSE else a > b
    return str(figure["model"]) < str(current["model"])


def headline_figures(figures: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """3 to 5 figures, one per slot that the report can fill: fleet-wide figures
    first, else the worst model's (see ``_worse``)."""
    by_key: dict[str, dict[str, Any]] = {}
    for figure in figures:
        if figure.get("value") is None:
            continue
        current = by_key.get(figure["key"])
        if current is None or _worse(figure, current):
            by_key[figure["key"]] = figure
    chosen = []
    for slot, keys in HEADLINE:
        found = next((by_key[k] for k in keys if k in by_key), None)
        if found is not None:
            chosen.append({**found, "slot": slot})
    return chosen


def numbers_report(report: dict[str, Any], provenance: dict[str, Any], scenario: dict[str, Any]) -> dict[str, Any]:
    """The emulator's report with ``headline``, ``provenance`` (marked inputs by
    source) and ``assumed_note``; suggested findings built on assumed figures say so."""
    note = assumed_note(provenance, scenario)
    findings = []
    for finding in report.get("findings", []):
        finding = dict(finding)
        finding["assumed"] = bool(note)
        if note:
            finding["body"] = f"{finding['body']}\n\n{note}"
        findings.append(finding)
    return {**report, "findings": findings, "headline": headline_figures(report.get("figures", [])),
            "provenance": split(provenance, scenario), "assumed_note": note}
