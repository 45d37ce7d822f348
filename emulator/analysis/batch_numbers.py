"""The numbers pass for a statically batched model (the seed's workers): the batch
formula, the load, the fill times and latencies of the dispatcher's batches.

A batch's last request waits for no one, so the least a request takes is one batch's
service time (the floor); the first request of a batch waits for it to fill (or for the
close rule), so the most it takes before queueing is the fill time plus the service;
the mean request waits for half the rest of its batch. Little's law is applied to the
mean, not to either bound.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING

from emulator.analysis.numbers import Adder, div, share_inputs, show
from emulator.analysis.placement import exact
from emulator.scenario import Scenario

if TYPE_CHECKING:
    from emulator.analysis.fleet import FleetAnalysis, ModelAnalysis

__all__ = ["QUIET_QPS", "batch_figures"]

#: The quiet-hours arrival rate used for "how long a batch takes to fill when traffic is low".
QUIET_QPS = Fraction(1)


def batch_figures(add: Adder, scenario: Scenario, m: ModelAnalysis, fa: FleetAnalysis) -> None:
    """Every figure of a statically batched model."""
    name = m.name
    pool = m.pools[0]
    w = pool.worker
    inputs = w.inputs
    b = w.limit
    spec = scenario.models[name]
    tokens, batch_tokens = spec.tokens, scenario.dispatcher.max_batch_tokens
    mean_note = " (at the mean size; bigger requests make fewer per batch)" if spec.tokens_cv else ""
    add("requests_per_batch", "Requests per batch", name, b, "requests",
        f"{batch_tokens} max batch tokens // {tokens} tokens per request = {b}, whole requests only{mean_note}",
        inputs)
    service = w.step_s or Fraction(0)
    if scenario.worker.service == "linear" and b > 0:
        add("batch_service_s", "Service time of a full batch", name, service, "s",
            f"{show(exact(scenario.worker.batch_s), 's')} x {b * tokens} / {batch_tokens} tokens "
            "(service linear in tokens)", inputs)
    wq = w.qps
    add("worker_qps", "Throughput per worker", name, wq, "QPS",
        f"{b} requests per batch / {show(service, 's')} per batch = {show(wq, 'QPS')}" + _service_note(scenario),
        inputs)
    placed_figures(add, scenario, m, wq, inputs)
    close = scenario.dispatcher.close_after_s
    close_s = None if close is None else exact(close)
    loads = [("avg", "average", m.offered_avg_qps)]
    if m.offered_peak_qps is not None:
        loads.append(("peak", "peak", m.offered_peak_qps))
    load_figures(add, m, wq, loads, inputs)
    for tag, word, offered in loads:
        _fill_figures(add, name, tag, word, b, offered, close_s, service, inputs)
    _fill_figures(add, name, "quiet", "1 request/s", b, QUIET_QPS, close_s, service, inputs)
    add("latency_floor_s", "Latency floor (the least a request takes)", name, service, "s",
        "the last request of a batch waits for no one: one batch's service time; filling and queueing "
        "come on top for the others", inputs)


def placed_figures(add: Adder, scenario: Scenario, m: ModelAnalysis, wq: Fraction, inputs: tuple[str, ...]) -> None:
    """Workers placed, their capacity, what the hosts could hold, and the worst host loss."""
    name = m.name
    hosts = scenario.expanded_hosts()
    units = scenario.models[name].worker_units
    placed = m.workers
    add("workers_placed", "Workers placed", name, placed, "workers",
        f"{placed} {name} workers counted on the {len(hosts)} hosts as configured", ("hosts",))
    add("capacity_qps", "Capacity of the placed workers", name, m.capacity_qps, "QPS",
        f"{placed} workers x {show(wq, 'QPS')} each = {show(m.capacity_qps, 'QPS')}", (*inputs, "hosts"))
    total_units = sum(u for _, u, _ in hosts)
    alone = sum(u // units for _, u, _ in hosts)
    add("most_workers", f"Most {name} workers these hosts could hold", name, alone, "workers",
        f"if every host held only {name} workers: {total_units} units in {len(hosts)} hosts, "
        f"{units} adjacent units each, per host rounded down = {alone}", (f"models.{name}.worker_units", "hosts"))
    add("most_capacity_qps", f"Capacity if the hosts held only {name}", name, alone * wq, "QPS",
        f"{alone} workers x {show(wq, 'QPS')} = {show(alone * wq, 'QPS')}", (*inputs, "hosts"))
    loss_figure(add, m, inputs)


def loss_figure(add: Adder, m: ModelAnalysis, inputs: tuple[str, ...]) -> None:
    """The capacity the worst single host loss leaves the model."""
    worst = m.worst_loss
    if worst is None:
        return
    left = worst.capacity_qps[m.name]
    lost = m.workers - sum(worst.workers_left[m.name].values())
    if m.autoscaler is not None:
        how = (f"losing host:{worst.host}: the autoscaler places up to {sum(worst.workers_left[m.name].values())} "
               "workers on the other hosts' free units")
    else:
        how = (f"losing host:{worst.host}, which carries the most {m.name} workers ({lost} of {m.workers})"
               + (": the model is down" if m.name in worst.down else f": {show(left, 'QPS')} left"))
    add("capacity_one_host_lost_qps", "Capacity after losing the worst host", m.name, left, "QPS", how,
        (*inputs, "hosts"))


def load_figures(add: Adder, m: ModelAnalysis, wq: Fraction,
                 loads: list[tuple[str, str, Fraction]], inputs: tuple[str, ...]) -> None:
    """Per load: offered, utilisation, workers needed and the queue's growth."""
    name = m.name
    for tag, word, offered in loads:
        basis = share_inputs(name) if tag == "avg" else ("traffic.peak_qps", f"models.{name}.share")
        add(f"offered_{tag}_qps", f"Offered load at {word} traffic", name, offered, "QPS",
            m.peak_how if tag == "peak" else f"{show(offered, 'QPS')} for {name}", basis)
        add(f"utilisation_{tag}", f"Utilisation at {word} traffic", name, div(offered, m.throughput_qps), "%",
            f"{show(offered, 'QPS')} offered / {show(m.throughput_qps, 'QPS')} the workers complete"
            + (" (no workers: undefined)" if not m.throughput_qps else ""), (*inputs, *basis))
        need = div(offered, wq)
        add(f"workers_needed_{tag}", f"Workers needed at {word} traffic", name, need, "workers",
            f"{show(offered, 'QPS')} / {show(wq, 'QPS')} per worker, before rounding up", (*inputs, *basis))
        add(f"whole_workers_{tag}", f"Whole workers needed at {word} traffic", name,
            None if need is None else math.ceil(need), "workers", f"{show(need, 'workers')} rounded up",
            (*inputs, *basis))
        growth = max(Fraction(0), offered - m.throughput_qps)
        add(f"queue_growth_{tag}", f"Queue growth at {word} traffic", name, growth, "requests/s",
            f"{show(offered, 'QPS')} arriving - {show(m.throughput_qps, 'QPS')} served" if growth > 0 else
            f"the workers complete {show(m.throughput_qps, 'QPS')}, over {show(offered, 'QPS')}: the queue does "
            "not grow", (*inputs, *basis))


def _service_note(scenario: Scenario) -> str:
    service = scenario.worker.service
    if service == "linear":
        return " (service linear in tokens)"
    if service == "lognormal":
        return " (service is lognormal: batch_s is its mean)"
    return ""


def _fill_figures(add: Adder, name: str, tag: str, word: str, b: int, rate: Fraction, close: Fraction | None,
                  service: Fraction, inputs: tuple[str, ...]) -> None:
    keys = (*inputs, "dispatcher.close_after_s")
    fill = div(Fraction(b), rate)
    add(f"fill_time_{tag}_s", f"Batch fill time at {word} traffic", name, fill, "s",
        f"{b} requests per batch / {show(rate, 'QPS')} arriving for {name}", keys)
    if fill is None:
        waited, how = close, "no arrivals: a batch fills only by the close rule"
    elif close is not None and close < fill:
        waited, how = close, f"the batch closes after {show(close, 's')}, before {show(fill, 's')} to fill"
    else:
        waited, how = fill, f"fill {show(fill, 's')}" + (" (no close rule)" if close is None else "")
    most = None if waited is None else waited + service
    add(f"latency_max_{tag}_s", f"Most a batch's first request waits and runs at {word}", name, most, "s",
        f"{how} + {show(service, 's')} in the worker: the first request of a batch, before any queueing", keys)
    wait = div(Fraction(b - 1), 2 * rate) if b > 0 else None
    if wait is not None and close is not None:
        wait = min(wait, close)
    add(f"batch_wait_{tag}_s", f"Mean wait inside a filling batch at {word}", name, wait, "s",
        f"({b} - 1) / (2 x {show(rate, 'QPS')}): the average request waits for half the rest"
        + (f", capped at {show(close, 's')}" if close is not None else ""), keys)
    mean = None if wait is None else wait + service
    add(f"latency_mean_{tag}_s", f"Mean latency before queueing at {word}", name, mean, "s",
        f"{show(wait, 's')} filling + {show(service, 's')} in the worker", keys)
    add(f"in_system_{tag}", f"Requests in the system at {word} (Little's law)", name,
        None if mean is None else rate * mean, "requests",
        f"{show(rate, 'QPS')} x {show(mean, 's')} mean latency (before queueing)", keys)
