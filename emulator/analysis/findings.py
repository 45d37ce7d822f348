"""Suggested findings of the numbers pass, drawn from the computed figures.

Each finding is a plain dict ``{"pass": "numbers", "severity", "title", "body",
"figures"}`` (``figures``: the keys, as ``model.key``, it rests on), ready to be
offered as a one-click finding. Severities: ``fix_now`` (the design cannot meet
its goal as written), ``clarify`` (a question the doc must answer),
``mention`` (worth a note).
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any

from emulator.analysis.numbers import show

if TYPE_CHECKING:
    from emulator.analysis.numbers import NumbersReport
    from emulator.analysis.placement import exact
from emulator.analysis.placement import exact
from emulator.scenario import Scenario

__all__ = ["suggest"]


def _finding(severity: str, title: str, body: str, figures: list[str]) -> dict[str, Any]:
    return {"pass": "numbers", "severity": severity, "title": title, "body": body, "figures": figures}


def suggest(scenario: Scenario, report: NumbersReport) -> list[dict[str, Any]]:
    """Findings the figures support, most severe first."""
    out: list[dict[str, Any]] = []
    v = report.value
    names = list(scenario.models)
    has_peak = any(f.key == "gap_peak" for f in report.figures)

    most_cap = v("most_capacity_qps")
    if has_peak and (gap := v("gap_peak")) is not None and gap > 1:
        out.append(_finding(
            "fix_now",
            f"Capacity is about {show(gap, '')}x short of the peak goal",
            f"Peak {show(v('offered_peak_qps'), 'QPS')} needs {show(v('workers_needed_peak'), '')} workers; "
            f"these hosts hold at most {show(v('most_workers'), '')} ({show(most_cap, 'QPS')}), and the placed "
            f"workers give {show(v('capacity_qps'), 'QPS')}. Is the hardware fixed or the target?",
            ["fleet.gap_peak", "fleet.workers_needed_peak", "fleet.most_capacity_qps"],
        ))

    overloaded = [n for n in names if (u := v("utilisation_avg", n)) is None or u >= 1]
    if overloaded:
        growth = v("queue_growth_avg")
        limit = scenario.dispatcher.queue_limit
        tail = ("nothing sheds load (dispatcher.queue_limit = 0), so the queue grows until memory runs out"
                if limit == 0 else f"beyond {limit} queued requests the excess is shed, i.e. refused")
        out.append(_finding(
            "fix_now",
            f"At average traffic the queue grows by {show(growth, '')} requests a second",
            f"Utilisation at {show(v('offered_avg_qps'), 'QPS')} is at or above 1 for {', '.join(overloaded)} "
            f"(placed capacity {show(v('capacity_qps'), 'QPS')}); {_most_clause(v)}; {tail}.",
            ["fleet.queue_growth_avg", "fleet.queue_growth_most_avg"] + [f"{n}.utilisation_avg" for n in overloaded],
        ))

    if has_peak and not out:
        short = [n for n in names if (u := v("utilisation_peak", n)) is None or u >= 1]
        if short:
            out.append(_finding(
                "fix_now", "The placed workers cannot serve the peak",
                "These hosts could hold enough workers, but as placed "
                + "; ".join(f"{n} has {show(v('workers_placed', n), '')} workers and needs "
                            f"{show(v('whole_workers_peak', n), '')} at {show(v('offered_peak_qps', n), 'QPS')}"
                            for n in short) + ".",
                [f"{n}.utilisation_peak" for n in short]))

    if not overloaded:
        busy = max(names, key=lambda n: v("utilisation_avg", n) or Fraction(0))
        fragile = [n for n in names if _num(v("offered_avg_qps", n)) > 0 and _num(v("workers_placed", n)) > 0
                   and 0 < _num(v("capacity_one_host_lost_qps", n)) <= _num(v("offered_avg_qps", n))]
        for name in fragile:
            out.append(_finding(
                "clarify", f"One host loss overloads {name} at average traffic",
                f"Losing the host with the most {name} workers leaves "
                f"{show(v('capacity_one_host_lost_qps', name), 'QPS')} for {show(v('offered_avg_qps', name), 'QPS')} "
                "offered: the queue then grows until the host is back. Is N+1 capacity a goal?",
                [f"{name}.capacity_one_host_lost_qps", f"{name}.offered_avg_qps"]))
        util = v("utilisation_avg", busy)
        if util is not None and util >= Fraction(4, 5) and busy not in fragile:
            out.append(_finding(
                "mention", f"{busy} runs {show(util * 100, '')}% busy at average traffic",
                "Little headroom: waiting time grows steeply as utilisation nears 1, and a burst or a lost "
                "worker tips it over.", [f"{busy}.utilisation_avg"]))

    for name in names:
        if scenario.models[name].share > 0 and v("workers_placed", name) == 0:
            out.append(_finding(
                "fix_now", f"No {name} workers are placed",
                f"{name} takes {scenario.models[name].share:g} of the traffic but no host carries a {name} worker: "
                "every one of its requests waits forever.", [f"{name}.workers_placed"]))
        elif scenario.batching_of(name) == "static" and v("requests_per_batch", name) == 0:
            out.append(_finding(
                "fix_now", f"A {name} request does not fit in a batch",
                f"{scenario.models[name].tokens} tokens per request is more than max_batch_tokens "
                f"{scenario.dispatcher.max_batch_tokens}.", [f"{name}.requests_per_batch"]))

    out.extend(_host_loss_findings(scenario))

    static = [n for n in names if scenario.batching_of(n) == "static"]
    out.extend(_token_findings(scenario, report))
    if static and scenario.dispatcher.close_after_s is None:
        slow = max(static, key=lambda n: v("fill_time_quiet_s", n) or Fraction(0))
        out.append(_finding(
            "clarify", "No rule says when a partial batch closes",
            f"A batch closes only when full. At 1 request a second a {show(v('requests_per_batch', slow), '')}-request "
            f"{slow} batch takes {show(v('fill_time_quiet_s', slow), 's')} to fill (at average traffic "
            f"{show(v('fill_time_avg_s', slow), 's')}). A maximum wait (dispatcher.close_after_s) bounds it.",
            [f"{slow}.fill_time_quiet_s", f"{slow}.fill_time_avg_s"],
        ))

    floor = v("latency_floor_s") if static else None
    if floor is not None and floor >= 1:
        out.append(_finding(
            "clarify", f"\"Low latency\" cannot mean sub-second: the floor is {show(floor, 's')}",
            f"Every request spends one batch's service time ({show(floor, 's')}) in a worker, plus the wait for "
            "its batch to fill and for a free worker. What latency target does the doc mean?",
            ["fleet.latency_floor_s"] + [f"{n}.latency_floor_avg_s" for n in names],
        ))

    wasted = sum(units - sum(scenario.models[w.model].worker_units for w in slots if w.model in scenario.models)
                 for _, units, slots in scenario.expanded_hosts())
    if wasted > 0:
        out.append(_finding(
            "mention", f"{wasted} GPU units are left idle by the placement",
            "Free units that no worker uses; python -m emulator place shows the layouts and what each wastes.",
            ["fleet.workers_placed"]))
    for name in static:
        if scenario.models[name].tokens_cv > 0:
            out.append(_finding(
                "mention", f"{name} requests per batch is an average",
                f"Request sizes vary (tokens_cv {scenario.models[name].tokens_cv:g}); larger requests make "
                f"batches of fewer than {show(v('requests_per_batch', name), '')} requests and lower throughput.",
                [f"{name}.requests_per_batch"]))
    order = {"fix_now": 0, "clarify": 1, "mention": 2}
    return sorted(out, key=lambda f: order[f["severity"]])


def _token_findings(scenario: Scenario, report: NumbersReport) -> list[dict[str, Any]]:
    """Where a continuous-batching model's goals break its own arithmetic."""
    out = []
    v = report.value
    slo = scenario.slo
    for name in scenario.models:
        if scenario.batching_of(name) != "continuous":
            continue
        tpot_floor, ttft_floor = _num(v("tpot_floor_s", name)), _num(v("ttft_floor_s", name))
        decode_floor = v("decode_step_floor_s", name)
        roof = scenario.roofline_for(name)
        if slo.tpot_s is not None and roof is not None and decode_floor is not None \
                and decode_floor > exact(slo.tpot_s):
            out.append(_finding(
                "fix_now", f"The TPOT goal is under the time {name}'s GPUs take to read its weights",
                f"slo.tpot_s is {show(exact(slo.tpot_s), 's')}, but every decode step reads all "
                f"{show(v('weights_gb', name), 'GB')} of weights, which takes {show(decode_floor, 's')} at the "
                f"full bandwidth of {roof.units} {roof.gpu.name}: no scheduler or batch size meets it; it "
                "needs more GPUs per worker, faster memory or smaller weights.",
                [f"{name}.decode_step_floor_s", f"{name}.weights_gb"]))
        elif slo.tpot_s is not None and tpot_floor > exact(slo.tpot_s):
            out.append(_finding(
                "fix_now", f"The TPOT goal is under what one {name} decode step takes",
                f"slo.tpot_s is {show(exact(slo.tpot_s), 's')}, but a decode step of a single sequence takes "
                f"{show(tpot_floor, 's')}: no load, batch size or scheduler meets it on these workers.",
                [f"{name}.tpot_floor_s"]))
        if slo.ttft_s is not None and ttft_floor > exact(slo.ttft_s):
            out.append(_finding(
                "fix_now", f"The TTFT goal is under one {name} prefill",
                f"slo.ttft_s is {show(exact(slo.ttft_s), 's')}, but prefilling a mean prompt alone takes "
                f"{show(ttft_floor, 's')}.", [f"{name}.ttft_floor_s"]))
        by_kv = _num(v("kv_concurrent_seqs", name))
        latency, placed = v("latency_at_full_s", name), v("workers_placed", name)
        for offered_key, word in (("offered_avg_qps", "average"), (_peak_key(report, name), "peak")):
            offered = v(offered_key, name) if offered_key else None
            if not (latency and placed and offered is not None):
                continue
            needed = offered / placed * latency  # Little's law, per worker
            if needed > by_kv and by_kv < scenario.worker_for(name).max_num_seqs:
                out.append(_finding(
                    "fix_now", f"{name}'s KV cache cannot hold the concurrency its {word} load implies",
                    f"At {show(offered, 'QPS')} over {show(placed, '')} workers and about "
                    f"{show(latency, 's')} a request, each worker holds about {show(needed, '')} sequences "
                    f"(Little's law), but its KV cache holds {show(by_kv, '')}: expect preemptions and "
                    "recompute, and TTFT far above its floor.",
                    [f"{name}.kv_concurrent_seqs", f"{name}.latency_at_full_s", f"{name}.{offered_key}"]))
                break  # the average already says it
        out.extend(_physics_findings(scenario, report, name))
    return out


def _peak_key(report: NumbersReport, name: str) -> str | None:
    """The figure holding ``name``'s peak offered load, if the report has one."""
    keys = {f.key for f in report.figures if f.model == name}
    return "offered_peak_qps" if "offered_peak_qps" in keys else None


def _physics_findings(scenario: Scenario, report: NumbersReport, name: str) -> list[dict[str, Any]]:
    """Where a token-level design asks for more than its GPUs have: more KV than their
    memory holds, or more GPUs at the peak than the hosts carry."""
    out = []
    v = report.value
    w = scenario.worker_for(name)
    roof = scenario.roofline_for(name)
    if roof is not None and w.kv_cache_tokens > roof.kv_capacity_tokens:
        out.append(_finding(
            "fix_now", f"{name}'s KV cache is bigger than its GPUs' memory",
            f"kv_cache_tokens is {w.kv_cache_tokens:,}, but {roof.units} {roof.gpu.name} at "
            f"gpu_memory_utilization {show(roof.memory_utilization, '')} leave room for "
            f"{roof.kv_capacity_tokens:,} tokens of {show(roof.kv_bytes_per_token, '')} bytes after the "
            'weights. Use kv_cache_tokens = "auto", or say where the rest lives.',
            [f"{name}.kv_capacity_tokens", f"{name}.kv_bytes_per_token"]))
    keys = {f.key for f in report.figures if f.model == name}
    whole_key = next((k for k in ("whole_workers_peak", "whole_workers_trace_peak") if k in keys), None)
    whole = v(whole_key, name) if whole_key else None
    if whole is not None:
        units = scenario.models[name].worker_units
        gpus = whole * units
        total = sum(u for _, u, _ in scenario.expanded_hosts())
        if gpus > total:
            out.append(_finding(
                "fix_now", f"{name} needs {show(gpus, '')} GPUs at the peak; the hosts have {total}",
                f"The peak needs {show(whole, '')} workers of {units} GPUs at "
                f"{show(v('worker_qps', name), 'QPS')} each (at full concurrency), more GPUs than every host "
                "together, before any other model takes a unit. Is the goal or the fleet fixed?",
                [f"{name}.{whole_key}", f"{name}.worker_qps"]))
    return out


def _num(value: Fraction | None) -> Fraction:
    return Fraction(0) if value is None else value


def _most_clause(v: Any) -> str:
    most = v("queue_growth_most_avg")
    if most:
        return f"even the most workers these hosts could hold leave {show(most, 'requests/s')} unserved"
    try:
        best = v("best_mix_qps")
    except KeyError:  # hosts of different sizes: no best-mix figure
        return "these hosts might serve it with another mix of workers (python -m emulator place)"
    if best is not None and best < v("offered_avg_qps"):
        return f"no mix of workers on these hosts serves it at this split (at most {show(best, 'QPS')})"
    return f"another mix of workers on these hosts would serve it (up to {show(best, 'QPS')} at this split)"


def _host_loss_findings(scenario: Scenario) -> list[dict[str, Any]]:
    out = []
    hosts = scenario.expanded_hosts()
    for name, spec in scenario.models.items():
        total = scenario.worker_count(name)
        if total == 0 or spec.share == 0 or len(hosts) < 2:
            continue
        for index, _, slots in hosts:
            here = sum(1 for w in slots if w.model == name)
            if here == total:
                out.append(_finding(
                    "fix_now", f"Losing host:{index} takes {name} down",
                    f"All {total} {name} workers are on host:{index}; a single host failure leaves the model with "
                    "no workers, and a dispatcher standby does nothing about it. Spread them over hosts "
                    "(python -m emulator place ranks layouts by the worst single-host loss).",
                    [f"{name}.workers_placed"]))
                break
    return out
