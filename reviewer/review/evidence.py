"""What a finding's emulator evidence shows: the run, its window and the figures
measured in it, read from the run's stored frames and summary.

The exports use this so that a finding's evidence reads as a result ("queue
depth peaked at 4,210 between 100 s and 160 s; 3,900 requests lost") rather
than as a run id. All findings of an export are served by three queries,
whatever their number. Nothing here writes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.db.models import Q

from emulator.sim.results import COUNT_KEYS
from reviewer.models.review import Finding
from reviewer.models.runs import EmulatorRun, RunCommand, RunFrame

# Frames read per export at most (a window of a long run at a fine sample).
MAX_FRAMES = 20_000
# The whole-run figures quoted with every piece of evidence, in this order.
SUMMARY_KEYS = COUNT_KEYS


def _fmt(value: float) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"
    return f"{int(value):,}"


#: How each per-frame metric reads with its unit (a value in seconds, a share, a count).
_WORKER_KEYS = ("busy_workers", "alive_workers")
_SHARE_KEYS = ("batch_fill", "goodput")


def _with_unit(key: str, value: float) -> str:
    """``value`` of ``key`` as the run page shows it: TPOT in ms, other times in s, shares in %."""
    if key.startswith("tpot_") or key.startswith("tbt_"):
        return f"{_fmt(value * 1000)} ms"
    if key.endswith("_s"):
        return f"{_fmt(value)} s"
    if key in _SHARE_KEYS:
        return f"{value:.0%}"
    if key in _WORKER_KEYS:
        return f"{_fmt(value)} worker{'' if value == 1 else 's'}"
    return f"{_fmt(value)} request{'' if value == 1 else 's'}"


def run_label(run: EmulatorRun) -> str:
    """A run as people name it: its scenario, seed and the overrides it ran with."""
    name = (run.scenario or {}).get("name") or "scenario"
    parts = [f"run {run.pk}", f"{name}, seed {run.seed}"]
    if run.overrides:
        parts.append("with " + ", ".join(str(o) for o in run.overrides))
    return f"{parts[0]} ({'; '.join(parts[1:])})"


def _window_figures(metric: str, frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The metric measured over the frames: per model, a total for counts, peak and mean for the rest."""
    if not frames:
        return []
    keys = [metric] if metric else ["queue_depth", "p99_s"]
    figures: list[dict[str, Any]] = []
    for key in keys:
        per_model: dict[str, list[float]] = defaultdict(list)
        for frame in frames:
            values = frame.get("m", {}).get(key)
            if values is None:
                continue
            for model, value in zip(frame.get("models", []), values, strict=False):
                if value is not None:
                    per_model[model].append(float(value))
        for model, values in per_model.items():
            if not values:
                continue
            if key in COUNT_KEYS:
                figures.append({"metric": key, "model": model, "total": sum(values),
                                "text": f"{key} {_with_unit(key, sum(values))} in the window ({model})"})
            else:
                peak, mean = max(values), sum(values) / len(values)
                figures.append({"metric": key, "model": model, "peak": peak, "mean": mean,
                                "text": f"{key} peaked at {_with_unit(key, peak)}, "
                                        f"mean {_with_unit(key, mean)} ({model})"})
    return figures


def _summary_text(summary: dict[str, Any] | None) -> str | None:
    if not summary:
        return None
    parts = [f"{_fmt(summary[k])} {k.replace('_', ' ')}" for k in SUMMARY_KEYS if summary.get(k)]
    if summary.get("in_system_end"):  # so the outcomes add up to what was offered
        parts.append(f"{_fmt(summary['in_system_end'])} in the system at the end")
    p99 = (summary.get("latency_s") or {}).get("p99")
    if p99 is not None:
        parts.append(f"p99 latency {_fmt(float(p99))} s")
    return ", ".join(parts) if parts else None


def evidence_details(findings: Iterable[Finding]) -> dict[int, dict[str, Any]]:
    """``{finding id: evidence}`` for the findings that point at a run.

    Each evidence holds the run's id and label (or ``missing`` for a run since
    deleted), the window, the metric, the figures measured in the window, the
    faults applied during the run, the whole run's outcome, and ``text``: all
    of it in one line. Evidence comparing two runs also holds ``compared``, the
    same for the second run over the same window (its label names the keys it
    changed), and its ``text`` tells both.
    """
    with_runs = [f for f in findings if f.evidence_run_id is not None]
    if not with_runs:
        return {}
    # Each piece of evidence is one run's window: the evidence run, and for a
    # comparison the compared run over the same window.
    pieces: list[tuple[int, float | None, float | None]] = []
    for f in with_runs:
        for run_id in (f.evidence_run_id, f.evidence_compare_run_id):
            if run_id is not None:
                pieces.append((run_id, f.evidence_t_from_s, f.evidence_t_to_s))
    run_ids = {run_id for run_id, _start, _end in pieces}
    runs = {r.pk: r for r in EmulatorRun.objects.filter(pk__in=run_ids)}
    # One query for the frames of every window (a missing end means the run's end).
    windows = Q()
    for run_id, start, end in pieces:
        cond = Q(run_id=run_id)
        if start is not None:
            cond &= Q(t_s__gte=start)
        if end is not None:
            cond &= Q(t_s__lte=end)
        windows |= cond
    frames_by_run: dict[int, list[tuple[float, dict[str, Any]]]] = defaultdict(list)
    for run_id, t_s, data in RunFrame.objects.filter(windows).order_by("run_id", "i").values_list(
            "run_id", "t_s", "data")[:MAX_FRAMES]:
        frames_by_run[run_id].append((t_s, data))
    # Faults as the run page marks them: a scheduled one at its own time, an injected one
    # at the end of the frame it shows in (the frame after the one it was sent during).
    faults: dict[int, list[str]] = defaultdict(list)
    for run in runs.values():
        for fault in (run.scenario or {}).get("faults") or []:
            action = next((a for a in ("kill", "restore") if a in fault), None)
            if action is not None:
                faults[run.pk].append(f"{action} {fault[action]} at {float(fault.get('at_s', 0)):g} s (scheduled)")
    injected = list(RunCommand.objects.filter(run_id__in=list(runs), kind="fault", applied_at_s__isnull=False,
                                              error="").order_by("run_id", "id"))
    shown_at: dict[tuple[int, int], float] = {}
    if injected:
        frames_of = Q()
        for command in injected:
            frames_of |= Q(run_id=command.run_id, i=command.applied_after_frame or 0)
        shown_at = {(r, i): t for r, i, t in RunFrame.objects.filter(frames_of).values_list("run_id", "i", "t_s")}
    for command in injected:
        at = shown_at.get((command.run_id, command.applied_after_frame or 0), command.applied_at_s or 0.0)
        faults[command.run_id].append(f"{command.command} at {at:.0f} s (injected)")

    def describe(run_id: int, start: float | None, end: float | None, metric: str) -> dict[str, Any]:
        window = f"{'start' if start is None else f'{start:g} s'} to {'end' if end is None else f'{end:g} s'}"
        run = runs.get(run_id)
        if run is None:
            return {"run": run_id, "missing": True, "window": [start, end], "metric": metric,
                    "figures": [], "text": f"run {run_id} (since deleted), {window}"}
        frames = [d for t, d in frames_by_run.get(run.pk, [])
                  if (start is None or t >= start) and (end is None or t <= end)]
        figures = _window_figures(metric, frames)
        summary = _summary_text(run.summary)
        pieces = [run_label(run), window]
        if metric:
            pieces.append(f"metric `{metric}`")
        text = ", ".join(pieces)
        if figures:
            text += ": " + "; ".join(fig["text"] for fig in figures)
        elif run.frames_stored == 0:
            text += ": no frames stored"
        if faults.get(run.pk):
            text += ". Faults: " + ", ".join(faults[run.pk])
        if summary:
            text += f". Whole run ({run.status}): {summary}"
        return {
            "run": run.pk,
            "label": run_label(run),
            "status": run.status,
            "window": [start, end],
            "metric": metric,
            "frames": len(frames),
            "figures": figures,
            "faults": faults.get(run.pk, []),
            "summary": {k: run.summary.get(k) for k in SUMMARY_KEYS} if run.summary else None,
            "text": text + ".",
        }

    details: dict[int, dict[str, Any]] = {}
    for f in with_runs:
        start, end = f.evidence_t_from_s, f.evidence_t_to_s
        detail = describe(f.evidence_run_id or 0, start, end, f.evidence_metric)
        if f.evidence_compare_run_id is not None:
            # A comparison: the second run over the same window, named with its changed keys.
            compared = describe(f.evidence_compare_run_id, start, end, f.evidence_metric)
            detail = {**detail, "compared": compared,
                      "text": f"{detail['text']} Compared with {compared['text']}"}
        details[f.pk] = detail
    return details
