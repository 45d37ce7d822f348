"""Where each input figure of a fleet config comes from: the design doc (with the
sentence it was read from), a measurement (with what measured it), or the
reviewer's own assumption.

Stored per key path on each fleet config version (``FleetConfigVersion.provenance``):
``{"traffic.qps": {"source": "doc", "quote": "..."}, "worker.mbu": {"source":
"assumed"}, "worker.decode_seq_s": {"source": "measured", "note": "calibration
fit, llama2-70b on 4 x H100"}}``. A figure not listed is unmarked. Numbers computed from a config say
which of their inputs are assumed, and so do the exports.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from emulator.scenario import Scenario, ScenarioError, SpeculativeSpec

FROM_DOC = "doc"
ASSUMED = "assumed"
MEASURED = "measured"
SOURCES = (FROM_DOC, MEASURED, ASSUMED)
#: An input nobody marked: the config sets it, or leaves it at the emulator's default
#: (an assumption too, made by the emulator rather than the reviewer).
UNMARKED = "unmarked"
DEFAULT = "default"
SOURCE_LABELS = {FROM_DOC: "from the doc", MEASURED: "measured", ASSUMED: "assumed by the reviewer", UNMARKED: "not marked",
                 DEFAULT: "the emulator's default (assumed)"}
QUOTE_MAX = 1000

__all__ = ["ASSUMED", "DEFAULT", "FROM_DOC", "MEASURED", "SOURCES", "SOURCE_LABELS", "UNMARKED", "ProvenanceError", "assumed_note",
           "clean_provenance", "input_figures", "input_sources", "markable_keys", "split"]


class ProvenanceError(ValueError):
    """A provenance mark that cannot be kept; ``path`` is ``provenance.<key path>``."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def input_figures(scenario: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Every leaf value of a scenario's JSON form by key path (``hosts[0].count``)."""
    out: dict[str, Any] = {}
    if isinstance(scenario, dict):
        for key, value in scenario.items():
            out.update(input_figures(value, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(scenario, list) and not all(isinstance(v, str) for v in scenario):
        for i, value in enumerate(scenario):
            out.update(input_figures(value, f"{prefix}[{i}]"))
    else:
        out[prefix] = scenario
    return out


def clean_provenance(data: Any, scenario: dict[str, Any], doc_text: str | None,
                     written: dict[str, Any] | None = None) -> dict[str, dict[str, str]]:
    """Check a provenance map against the scenario (and the doc's text for quotes).

    Raises :class:`ProvenanceError` naming ``provenance.<key path>`` and the fix.
    A marked figure the scenario no longer has is an error: re-mark after renaming.
    """
    if not isinstance(data, dict):
        raise ProvenanceError("provenance", 'provenance: give an object of key path -> {"source": "doc"|"assumed"}')
    # The scenario's JSON form leaves out keys set to their default; the TOML as written
    # has them, and every key the emulator reads (a default included) can be marked.
    figures = {**input_figures(written or {}), **input_figures(scenario), **dict.fromkeys(markable_keys(scenario))}
    # A list of names (a host's workers) is one figure, as are tables below a key.
    known = set(figures) | {p.rsplit("[", 1)[0] for p in figures}
    cleaned: dict[str, dict[str, str]] = {}
    for path, mark in data.items():
        where = f"provenance.{path}"
        if path not in known and not any(p.startswith(f"{path}.") or p.startswith(f"{path}[") for p in figures):
            raise ProvenanceError(where, f"{where}: the scenario has no key {path}; mark a key the emulator reads "
                                         "(hardware, models, slo, worker, dispatcher, traffic, hosts, autoscaler)")
        if not isinstance(mark, dict) or mark.get("source") not in SOURCES:
            raise ProvenanceError(where, f'{where}: give {{"source": "doc"}} with a quote, {{"source": "measured"}} '
                                         'with a note, or {"source": "assumed"}')
        if mark["source"] == ASSUMED:
            cleaned[path] = {"source": ASSUMED}
            continue
        if mark["source"] == MEASURED:
            note = " ".join(str(mark.get("note") or "").split())
            if not note:
                raise ProvenanceError(where, f"{where}: a measured figure needs what measured it (a calibration "
                                             "fit, a benchmark run); write it in the note beside the figure")
            if len(note) > QUOTE_MAX:
                raise ProvenanceError(where, f"{where}: the note is over {QUOTE_MAX} characters; name the measurement only")
            cleaned[path] = {"source": MEASURED, "note": note}
            continue
        quote = " ".join(str(mark.get("quote") or "").split())
        if not quote:
            raise ProvenanceError(where, f"{where}: a figure from the doc needs the doc's words it came from; select them")
        if len(quote) > QUOTE_MAX:
            raise ProvenanceError(where, f"{where}: the quote is over {QUOTE_MAX} characters; select the sentence only")
        if doc_text is not None and quote not in " ".join(doc_text.split()):
            raise ProvenanceError(where, f"{where}: the quote is not in the doc's latest revision; select it in the doc")
        cleaned[path] = {"source": FROM_DOC, "quote": quote}
    return cleaned


def split(provenance: dict[str, dict[str, str]], scenario: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The marked figures grouped by source, each with its key path, value and quote."""
    figures = input_figures(scenario)
    groups: dict[str, list[dict[str, Any]]] = {FROM_DOC: [], MEASURED: [], ASSUMED: []}
    spec: Any = None
    for path, mark in sorted(provenance.items()):
        value = figures.get(path, _subtree(scenario, path))
        if value is None:
            # A key left at its default: the emulator's value for it.
            if spec is None:
                spec = _spec(scenario)
            value = _subtree(spec, path)
        entry = {"path": path, "value": value}
        if mark.get("quote"):
            entry["quote"] = mark["quote"]
        if mark.get("note"):
            entry["note"] = mark["note"]
        groups[mark["source"]].append(entry)
    return groups


def _spec(scenario: dict[str, Any]) -> Any:
    try:
        return Scenario.from_dict(scenario)
    except ScenarioError:
        return {}


def _subtree(scenario: Any, path: str) -> Any:
    """The value at a key path of a scenario's JSON form, or of its spec objects."""

    node: Any = scenario
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        if part.startswith("["):
            index = int(part[1:-1])
            node = node[index] if isinstance(node, list | tuple) and index < len(node) else None
        elif isinstance(node, dict):
            node = node.get(part)
        else:
            node = getattr(node, part, None)
            if part == "model" and node is not None and not isinstance(node, str | int | float):
                node = getattr(node, "name", node)
    if node is not None and not isinstance(node, str | int | float | bool | list | dict):
        node = str(node)
    return node


def assumed_note(provenance: dict[str, dict[str, str]], scenario: dict[str, Any]) -> str:
    """One sentence naming the assumed figures, or "" when none is assumed."""
    assumed = split(provenance, scenario)[ASSUMED]
    if not assumed:
        return ""
    listed = ", ".join(f"{a['path']} = {a['value']}" for a in assumed)
    return f"Built on figures assumed by the reviewer, not taken from the doc: {listed}."


def markable_keys(scenario: dict[str, Any]) -> list[str]:
    """Every key path the emulator reads for this scenario, those left at their default
    included: the hardware, each model's shape, arch, prefixes, pools and worker
    overrides, the SLOs, the worker's efficiencies and step coefficients, the
    dispatcher, traffic, client, gateway and autoscaler. A figure stands on these, so
    each can be marked as from the doc or assumed."""


    spec = _spec(scenario)
    if not isinstance(spec, Scenario):
        return []

    def fields_of(prefix: str, obj: Any, skip: tuple[str, ...] = ()) -> list[str]:
        if obj is None or not dataclasses.is_dataclass(obj):
            return []
        return [f"{prefix}.{f.name}" for f in dataclasses.fields(obj) if f.name not in skip]

    keys = ["duration_s", "seed", "sample_s", "hosts"]
    for section in ("traffic", "dispatcher", "worker", "client", "gateway", "slo", "hardware", "autoscaler"):
        keys += fields_of(section, getattr(spec, section), ("speculative",) if section == "worker" else ())
    # The speculative table's keys, set or not (the editor shows them all).
    keys += [f"worker.speculative.{f.name}" for f in dataclasses.fields(SpeculativeSpec)]
    worker_keys = [f.name for f in dataclasses.fields(spec.worker)]
    for name, model in spec.models.items():
        base = f"models.{name}"
        keys += fields_of(base, model, ("name", "worker_overrides", "arch", "prefixes", "disaggregated"))
        keys += fields_of(f"{base}.arch", model.arch)
        keys += fields_of(f"{base}.prefixes", model.prefixes)
        keys += fields_of(f"{base}.disaggregated", model.disaggregated)
        keys += [f"{base}.worker.{k}" for k in worker_keys]
    for i, group in enumerate(spec.hosts):
        keys += [f"hosts[{i}].{k}" for k in ("count", "units", "workers", "pool") if k != "pool" or group.pool]
    return keys


def input_sources(provenance: dict[str, dict[str, str]], scenario: dict[str, Any], paths: Any,
                  written: dict[str, Any] | None = None) -> dict[str, str]:
    """Where each input key path comes from: ``doc``, ``measured`` or ``assumed`` as
    marked (a mark on the key, on a table above it, or on keys below it: assumed if
    any is, else measured if any is), ``unmarked``
    when the config sets it unmarked, ``default`` when the emulator's default stands."""
    present = {**input_figures(written or {}), **input_figures(scenario)}
    out: dict[str, str] = {}
    for path in dict.fromkeys(paths):
        marks = [m["source"] for p, m in provenance.items()
                 if p == path or path.startswith((f"{p}.", f"{p}[")) or p.startswith((f"{path}.", f"{path}["))]
        if marks:
            out[path] = ASSUMED if ASSUMED in marks else MEASURED if MEASURED in marks else FROM_DOC
        elif path in present or any(p.startswith((f"{path}.", f"{path}[")) for p in present):
            out[path] = UNMARKED
        else:
            out[path] = DEFAULT
    return out
