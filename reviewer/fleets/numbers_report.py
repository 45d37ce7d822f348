"""The numbers pass as the session page shows it: the emulator's figures and suggested
findings, opened by the headline of the fleet's one analysis, with where each input
comes from.

The headline is the record's (``emulator.analysis.numbers.headline``): the gap at the
peak against the doc's own goals with the best mix beside it, utilisation named as
utilisation, the floors as minima, the capacity left after the worst host's loss. The
page, the CLI and the exports show the same slots.

Every figure and every suggested finding says which of its inputs the doc states and
which are assumed (by the reviewer, or left at the emulator's default); a finding
cites the figures it stands on, each with its value and its sources.
"""

from __future__ import annotations

from typing import Any

from reviewer.fleets.provenance import (
    ASSUMED,
    DEFAULT,
    FROM_DOC,
    MEASURED,
    UNMARKED,
    assumed_note,
    input_sources,
    split,
)

__all__ = ["numbers_report", "sources_of"]


def sources_of(inputs: list[str], sources: dict[str, str]) -> dict[str, list[str]]:
    """A figure's inputs grouped by where they come from (empty groups left out)."""
    groups: dict[str, list[str]] = {}
    for path in inputs:
        groups.setdefault(sources[path], []).append(path)
    return {k: groups[k] for k in (FROM_DOC, MEASURED, ASSUMED, DEFAULT, UNMARKED) if k in groups}


def _source_word(groups: dict[str, list[str]]) -> str:
    """One word for a figure: from the doc, measured, assumed, or not marked."""
    if ASSUMED in groups or DEFAULT in groups:
        return "assumed"
    if UNMARKED in groups:
        return "unmarked"
    if MEASURED in groups:
        return "measured"
    return "doc" if FROM_DOC in groups else "unmarked"


def _finding_note(groups: dict[str, list[str]], values: dict[str, Any]) -> str:
    """The sentence a finding built on assumed inputs ends with, naming them."""
    parts = []
    if groups.get(ASSUMED):
        parts.append("figures assumed by the reviewer, not taken from the doc: "
                     + ", ".join(f"{p} = {_shown(values.get(p))}" for p in groups[ASSUMED]))
    if groups.get(DEFAULT):
        parts.append("the emulator's defaults, which the doc does not state: "
                     + ", ".join(f"{p} = {_shown(values.get(p))}" for p in groups[DEFAULT]))
    return f"Built on {'; and on '.join(parts)}." if parts else ""


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return "?" if value is None else str(value)


def numbers_report(report: dict[str, Any], provenance: dict[str, Any], scenario: dict[str, Any],
                   written: dict[str, Any] | None = None) -> dict[str, Any]:
    """The emulator's report with ``provenance`` (marked inputs by source), each
    figure's ``sources`` and ``source``, each finding's ``cites`` (the figures it
    stands on, with their values and sources) and an ``assumed`` flag with a note
    naming the assumed inputs it rests on; ``assumed_note`` for the whole config."""
    figures = report.get("figures", [])
    paths = [p for f in figures for p in f.get("inputs", [])]
    paths += [p for finding in report.get("findings", []) for p in finding.get("inputs", [])]
    sources = input_sources(provenance, scenario, paths, written)
    defaults = [p for p, s in sources.items() if s == DEFAULT]
    # Each input's value, the emulator's default where the config has none (one pass).
    values = {e["path"]: e["value"] for e in split(dict.fromkeys(sources, {"source": ASSUMED}), scenario)[ASSUMED]}
    by_ref: dict[str, dict[str, Any]] = {}
    shown_figures = []
    for figure in figures:
        groups = sources_of(list(figure.get("inputs", [])), sources)
        figure = {**figure, "sources": groups, "source": _source_word(groups)}
        by_ref[f"{figure['model']}.{figure['key']}"] = figure
        shown_figures.append(figure)
    findings = []
    for finding in report.get("findings", []):
        finding = dict(finding)
        groups = sources_of(list(finding.get("inputs", [])), sources)
        cites = []
        for ref in finding.get("figures", []):
            fig = by_ref.get(ref)
            if fig is not None:
                cites.append({"ref": ref, "label": fig["label"], "model": fig["model"], "display": fig["display"],
                              "source": fig["source"], "sources": fig["sources"]})
        note = _finding_note(groups, values)
        finding.update(cites=cites, sources=groups, assumed=bool(note))
        if note:
            finding["body"] = f"{finding['body']}\n\n{note}"
        findings.append(finding)
    note = assumed_note(provenance, scenario)
    if defaults:
        listed = ", ".join(f"{p} = {_shown(values[p])}" for p in defaults)
        note = f"{note} " if note else ""
        note += f"Left at the emulator's defaults, which the doc does not state: {listed}."
    return {**report, "figures": shown_figures, "findings": findings, "headline": _headline(report, by_ref),
            "provenance": split(provenance, scenario), "input_sources": sources, "assumed_note": note}


def _headline(report: dict[str, Any], by_ref: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The record's headline, each figure (and those beside it) with its sources."""
    out = []
    for slot in report.get("headline", []):
        ref = by_ref.get(f"{slot['model']}.{slot['key']}", {})
        beside = [{**b, **{k: v for k, v in by_ref.get(f"{b['model']}.{b['key']}", {}).items()
                           if k in ("source", "sources")}} for b in slot.get("beside", [])]
        out.append({**slot, "source": ref.get("source"), "sources": ref.get("sources", {}), "beside": beside})
    return out

