"""Plain-text rendering of ``place`` results (the JSON form is the interface; this is for people)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from emulator.analysis.numbers import show
from emulator.cli.numbers import headline_lines

__all__ = ["analysis_lines", "render_check", "render_ranking", "strip_text", "symbols"]


def symbols(names: list[str]) -> dict[str, str]:
    """One letter per worker type: its first letter not already taken, else a digit."""
    out: dict[str, str] = {}
    for name in names:
        letter = next(
            (c.lower() for c in name if c.isalpha() and c.lower() not in out.values()), None
        )
        out[name] = letter or str(len(out) % 10)
    return out


def strip_text(workers: list[str], units: int, marks: dict[str, str], sizes: dict[str, int]) -> str:
    """``|BbbbbSsSs.|``-style strip: a capital starts each worker's block, '.' is a free unit."""
    cells = ["."] * units
    for slot in workers:
        name, _, first = slot.partition("@")
        start = int(first)
        for unit in range(start, min(units, start + sizes[name])):
            cells[unit] = marks[name].upper() if unit == start else marks[name]
    return "|" + "".join(cells) + "|"


def _fmt(value: float | None, unit: str) -> str:
    return "n/a" if value is None else show(Fraction(value).limit_denominator(10**6), unit)


def analysis_lines(report: dict[str, Any]) -> list[str]:
    """The page's figures for a scenario: the numbers pass's headline, then each
    model's capacity (its binding pool) and what its worst host loss leaves, and the
    fleet's capacity at its split with and without its worst host, all read from the
    one analysis the numbers pass shows."""

    analysis = report.get("analysis") or {}
    lines = [f"Numbers for {report['scenario']}", *headline_lines(report), "", "Capacity (the analysis's figures)"]
    for name, m in (analysis.get("models") or {}).items():
        binding = f", {m['binding_pool']} pool binds" if m.get("binding_pool") and m.get("split") else ""
        line = f"  {name}: {_fmt(m['capacity_qps'], 'QPS')}{binding}"
        worst = m.get("worst_loss")
        if worst is not None:
            line += f"; host:{worst['host']} lost leaves {_fmt(worst['capacity_qps'], 'QPS')}"
            line += " (down)" if worst["down"] else ""
        lines.append(line)
    if analysis:
        line = f"  fleet at its split: {_fmt(analysis['capacity_qps'], 'QPS')}"
        worst = analysis.get("worst_loss")
        if worst is not None:
            down = f", {', '.join(worst['down'])} down" if worst["down"] else ""
            line += f"; host:{worst['host']} lost leaves {_fmt(worst['fleet_qps'], 'QPS')}{down}"
        lines.append(line)
    return lines


def render_ranking(data: dict[str, Any]) -> str:
    """Host layouts, then the ranked fleets with one table row per failure case."""
    names = list(data["workers"])
    marks = symbols(names)
    unit = "QPS" if data["capacity_unit"] == "QPS" else "workers"
    ratio_unit = "x" if data["demand_qps"] is not None else ("QPS" if unit == "QPS" else "")
    units = data["units"]
    lines = [
        f"Placement: {data['hosts']} hosts x {units} units; workers "
        + ", ".join(f"{n}={s} ({marks[n].upper()})" for n, s in data["workers"].items()),
        "Split: "
        + ", ".join(f"{n} {s:g}" for n, s in data["split"].items())
        + "; per-worker capacity: "
        + ", ".join(f"{n} {_fmt(q, unit)}" for n, q in data["qps_per_worker"].items()),
        f"Ratio = {data['ratio_basis']}",
        "",
        f"Host layouts ({len(data['host_layouts'])}, "
        f"{sum(1 for h in data['host_layouts'] if h['maximal'])} maximal, marked *):",
    ]
    for lay in data["host_layouts"]:
        mark = "*" if lay["maximal"] else " "
        lines.append(
            f"  {mark} {strip_text(lay['workers'], units, marks, data['workers'])}  {lay['label']:<24} "
            f"used {lay['used']:>3}  wasted {lay['wasted']}"
        )
    lines.append("")
    lines.append(
        f"Ranked fleets ({data['method']} method: {data['candidates']:,} possible fleets, "
        + (f"{data['scored']:,} scored, the rest ruled out by bounds"
           if data["scored"] < data["candidates"] else "all scored")
        + f"; {data['left_off']:,} not shown). "
        "Rank by worst ratio over no failure and each single-host loss, then nominal capacity, "
        "then wasted units; ties share a rank."
    )
    for entry in data["ranked"]:
        lines.append("")
        lines.append(f"#{entry['rank']}  {entry['label']}")
        lines.extend(_entry_lines(entry, data, unit, ratio_unit))
    if "current" in data:
        cur = data["current"]
        where = (f"would rank #{cur['rank']} of {cur['ranks']} distinct ranks" if cur["rank"]
                 else "not ranked (too many fleets to score)")
        lines.append("")
        lines.append(f"As configured in {data['scenario']}: {cur['label']} ({where})")
        lines.extend(_entry_lines(cur, data, unit, ratio_unit))
    for note in data.get("notes", []):
        lines.append("")
        lines.append(f"Note: {note}")
    return "\n".join(lines)


def _entry_lines(entry: dict[str, Any], data: dict[str, Any], unit: str, ratio_unit: str) -> list[str]:
    """Key figures, host strips and the failure-case table of one fleet."""
    names = list(data["workers"])
    marks = symbols(names)
    lines = [
        f"    worst ratio {_fmt(entry['worst_ratio'], ratio_unit)} ({entry['worst_case']}), "
        f"nominal {_fmt(entry['nominal_qps'], unit)}, wasted units {entry['wasted_units']}"
    ]
    down = entry.get("models_down_with") or {}
    models = data.get("models") or {n: n for n in names}
    if set(models.values()) != set(models):
        served = entry["cases"][0].get("model_capacity") or {}
        lines.append("    serves " + ", ".join(f"{m} {_fmt(c, unit)}" for m, c in served.items())
                     + " with every host up (a split model: the least of its pools)")
    if down:
        lines.append("    down with one host's loss: " + "; ".join(
            f"{m} ({', '.join(f)})" for m, f in down.items()))
    elif not entry.get("unplaced"):
        lines.append("    survives the loss of any one host, every pool kept")
    host_index = 0
    for count, workers in _groups(entry):
        span = f"host {host_index}" if count == 1 else f"hosts {host_index}-{host_index + count - 1}"
        lines.append(f"    {span:<14} {strip_text(workers, data['units'], marks, data['workers'])}")
        host_index += count
    lines.append(f"    {'case':<22}" + "".join(f"{n + ' cap (ratio)':>24}" for n in names))
    for case in entry["cases"]:
        label = case["failure"] if case["alike"] <= 1 else f"{case['failure']} (or {case['alike'] - 1} alike)"
        if case["failure"] == "none":
            label = "no failure"
        cells = "".join(
            f"{_fmt(case['capacity'][n], unit) + ' (' + _fmt(case['ratio'][n], ratio_unit) + ')':>24}"
            for n in names
        )
        lines.append(f"    {label:<22}{cells}")
    return lines


def _groups(entry: dict[str, Any]) -> list[tuple[int, list[str]]]:
    out: list[tuple[int, list[str]]] = []
    for host in entry["hosts"]:
        if out and out[-1][1] == host["workers"]:
            out[-1] = (out[-1][0] + 1, out[-1][1])
        else:
            out.append((1, host["workers"]))
    return out


def render_check(data: dict[str, Any]) -> str:
    """Fragmentation per host and, with ``--add``, where the incremental placer put the new workers."""
    names = list(data["workers"])
    marks = symbols(names)
    units = data["units"]
    lines: list[str] = []

    def fragment(frag: dict[str, Any], host_workers: list[list[str]]) -> None:
        for i, (host, workers) in enumerate(zip(frag["hosts"], host_workers, strict=True)):
            fits = (
                ", ".join(f"{n} x{host['still_fit'][n]}" for n in names if host["still_fit"][n])
                or "nothing"
            )
            lines.append(
                f"  host {i:<3} {strip_text(workers, units, marks, data['workers'])}  free {host['free_units']}, "
                f"largest free block {host['largest_free_block']}; still fits: {fits}"
            )
        lost = frag["large_lost"]
        lines.append(
            f"  {frag['large']} workers the free units could take if contiguous: "
            f"{frag['large_fit_if_compact']}; as they lie: {frag['large_fit']}; lost to fragmentation: {lost}"
        )

    lines.append("Fragmentation:")
    fragment(data["fragmentation"], data["checked"])
    if "incremental" in data:
        inc = data["incremental"]
        lines.append("")
        lines.append(
            "Incremental placement (large first, small packed away from large-worker slots):"
        )
        for p in inc["placed"]:
            lines.append(f"  {p['model']:<8} -> host {p['host']} at unit {p['first_unit']}")
        if inc["unplaced"]:
            lines.append(
                "  did not fit: " + ", ".join(f"{n} x{k}" for n, k in inc["unplaced"].items())
            )
        lines.append("After:")
        fragment(data["fragmentation_after"], inc["hosts"])
    return "\n".join(lines)
