"""The numbers pass of SLO-aware admission: the waiting bound the predicted-TTFT rule
acts as, the load from which it refuses arrivals and the share it admits at the peak,
held against hand arithmetic and against runs of the engine."""

from __future__ import annotations

import math

import numpy as np
import pytest

from emulator import Engine
from emulator.analysis.fleet import analyse
from emulator.analysis.fleet.admission import REFUSED_FROM, admission_of
from emulator.analysis.fleet.queueing import admitted_share, prefill_times
from emulator.analysis.fleet.steps import step_cost
from emulator.analysis.numbers import compute
from emulator.scenario.presets import load_preset

PRESET = load_preset("pd-slo-admission", max_requests=None)


def test_the_numbers_pass_shows_the_rules_figures() -> None:
    report = compute(PRESET)
    a = admission_of(PRESET, analyse(PRESET).models["chat"])
    assert a is not None
    assert report.value("admission_limit_s", "chat") == pytest.approx(2.0)
    assert report.value("admission_bound", "chat") == a.bound
    assert float(report.value("admission_refuses_from_qps", "chat")) == pytest.approx(a.refuses_from_qps)
    assert float(report.value("admission_admitted_at_peak", "chat")) == pytest.approx(a.admitted_at_peak)
    assert "dispatcher.admission" in report.get("admission_bound", "chat").inputs
    # Without the rule none of them is shown.
    plain = compute(PRESET.with_overrides(['dispatcher.admission="queue_limit"'], max_requests=None))
    assert not plain.has("admission_bound", "chat")


def test_the_bound_is_the_first_wait_past_the_room_and_the_shares_follow_the_queue() -> None:
    m = analyse(PRESET).models["chat"]
    a = admission_of(PRESET, m)
    assert a is not None
    pool = m.pool("prefill")
    assert pool is not None
    service, c = a.service_s, a.workers
    assert service == pytest.approx(float(pool.worker.prefill_s))
    times, weights = prefill_times(m.workload, step_cost(PRESET, "chat"), 0.0, 0.0, service)
    cs2 = float(np.dot(times * times, weights)) / service**2 - 1
    wait = [(j + (1 + cs2) / 2) * service / c + service for j in range(40)]
    assert wait[a.bound - 1] <= a.room_s < wait[a.bound]
    assert a.room_s == pytest.approx(2.0 - float(m.transfer_s) - float(step_cost(PRESET, "chat").decode_alone_s(8001)))
    goal_room = a.room_s  # slack 1: the rule's room is the goal's
    refused = 1 - admitted_share(a.refuses_from_qps, c, times, weights, a.room_s, goal_room)[0]
    assert refused == pytest.approx(REFUSED_FROM, rel=1e-6)
    # Below its pool's throughput, refusals start; at the peak (20 QPS) the queue's
    # figure sits between the fluid one and all.
    throughput = c * float(pool.worker.throughput_qps)
    assert 0.5 * throughput < a.refuses_from_qps < throughput
    assert a.fluid_at_peak == pytest.approx(throughput / 20)
    assert a.fluid_at_peak < a.admitted_at_peak < 1


def _refused(qps: float, duration_s: float = 600) -> float:
    sc = PRESET.with_overrides(
        ['traffic.shape="constant"', f"traffic.qps={qps}", f"duration_s={duration_s}"], max_requests=None)
    s = Engine(sc).run()
    return s.shed_slo_miss / s.offered


def test_the_engine_refuses_about_as_the_analysis_says_around_the_start() -> None:
    a = admission_of(PRESET, analyse(PRESET).models["chat"])
    assert a is not None and a.refuses_from_qps is not None
    # Half the load: almost nothing refused; at it, about REFUSED_FROM; half again
    # more: several times as many.
    assert _refused(0.5 * a.refuses_from_qps) < REFUSED_FROM / 4
    at = _refused(a.refuses_from_qps)
    assert REFUSED_FROM / 3 < at < 3 * REFUSED_FROM
    assert _refused(1.5 * a.refuses_from_qps) > 4 * REFUSED_FROM


def test_the_engine_admits_at_the_peak_about_what_the_analysis_says() -> None:
    # At four times the prefill pool's throughput the rule admits the short prompts:
    # far more than the fluid share, and about the share the analysis gives by size.
    a = admission_of(PRESET, analyse(PRESET).models["chat"])
    assert a is not None and a.admitted_at_peak is not None and a.fluid_at_peak is not None
    admitted = 1 - _refused(20.0, duration_s=240)
    assert admitted > a.fluid_at_peak * 1.4
    assert admitted == pytest.approx(a.admitted_at_peak, abs=0.04)


def _admitted_by_lindley(lam: float, c: int, times: np.ndarray, weights: np.ndarray, room: float,
                         n: int = 200_000) -> float:
    """The same idealised pool, drawn: Poisson arrivals, one queue of work drained by c
    workers together; an arrival of time s is admitted when the wait (work ahead / c)
    plus s fits the room, and then adds s to the work."""
    rng = np.random.default_rng(7)
    gaps = rng.exponential(1 / lam, n)
    sizes = rng.choice(times, n, p=weights / weights.sum())
    wait, admitted = 0.0, 0
    for gap, s in zip(gaps.tolist(), sizes.tolist(), strict=True):
        wait = max(0.0, wait - gap)
        if wait + s <= room:
            admitted += 1
            wait += s / c
    return admitted / n


@pytest.mark.parametrize(("lam", "c"), [(3.0, 1), (6.0, 2), (12.0, 2), (30.0, 4)])
def test_the_admitted_share_solves_the_pool_it_describes(lam: float, c: int) -> None:
    # Two prompt sizes, each admitted up to its own wait: the grid's solution of the
    # level-crossing equation against a long draw of the same pool.
    times = np.array([0.1, 0.5])
    weights = np.array([0.6, 0.4])
    room = 1.2
    got, good = admitted_share(lam, c, times, weights, room, room)
    assert good == pytest.approx(got)
    assert got == pytest.approx(_admitted_by_lindley(lam, c, times, weights, room), abs=0.005)
    # A tighter goal than the rule's room: fewer of the admitted are good.
    assert admitted_share(lam, c, times, weights, room, 0.6)[1] < got


def test_at_light_load_every_prompt_that_fits_alone_is_admitted() -> None:
    times = np.array([0.2, 0.9, 2.5])
    weights = np.array([0.5, 0.3, 0.2])
    admitted, good = admitted_share(1e-6, 2, times, weights, 1.0, 1.0)
    assert admitted == pytest.approx(0.8, abs=1e-5)
    assert good == pytest.approx(0.8, abs=1e-5)


def test_a_whole_pool_uses_its_throughput_as_the_service_rate() -> None:
    sc = load_preset("continuous-comfortable").with_overrides(['dispatcher.admission="predicted_ttft"'])
    name = next(iter(sc.models))
    m = analyse(sc).models[name]
    a = admission_of(sc, m)
    assert a is not None and a.pool == name
    service = 1 / float(m.pools[0].worker.throughput_qps)
    assert a.service_s == pytest.approx(service)
    assert a.room_s == a.limit_s == sc.slo.ttft_s
    times, weights = prefill_times(m.workload, step_cost(sc, name), 0.0, 0.0, service)
    cs2 = max(0.0, float(np.dot(times * times, weights)) / service**2 - 1)
    assert a.bound == math.floor((a.room_s - service) * a.workers / service - (1 + cs2) / 2) + 1
