"""Admission (rate limits, queue limits) and client behaviour (timeouts, retries, waste)."""

from __future__ import annotations

from scenarios import shortened, single_model

from emulator import Engine
from emulator.scenario.presets import load_preset


def _rate_limited(shared: bool) -> float:
    # One API key sending 50 QPS through 2 gateway instances, limited to 10 QPS per key.
    s = single_model(
        qps=50,
        workers=20,
        duration_s=60,
        gateway={"instances": 2, "rate_limit_qps": 10, "keys": 1, "shared_counter": shared},
    )
    summary = Engine(s).run()
    assert summary.balanced()
    return (summary.offered - summary.shed) / 60


def test_a_shared_counter_holds_a_key_to_its_limit() -> None:
    assert 9.0 <= _rate_limited(shared=True) <= 10.0


def test_per_instance_counters_let_a_key_through_up_to_instances_times_the_limit() -> None:
    assert 18.0 <= _rate_limited(shared=False) <= 20.0


def test_rate_limiting_is_off_at_zero() -> None:
    s = single_model(qps=50, workers=20, duration_s=30, gateway={"keys": 1, "rate_limit_qps": 0})
    assert Engine(s).run().shed == 0


def test_queue_limit_sheds_beyond_it_and_bounds_the_dispatcher_queue() -> None:
    s = single_model(qps=100, workers=3, duration_s=120, dispatcher={"queue_limit": 200})
    engine = Engine(s)
    frames = engine.advance_to(120)
    summary = engine.summary()
    assert max(f.m["queue_depth"][0] for f in frames) <= 200
    assert summary.shed > 0.5 * (100 - 40) * 120 * 0.9
    assert abs(summary.served_qps / 40 - 1) < 0.03
    assert summary.balanced()


def test_queue_limit_with_push_and_varied_tokens_still_balances() -> None:
    s = single_model(
        qps=150,
        workers=3,
        duration_s=60,
        policy="round_robin",
        close_after_s=0.3,
        dispatcher={"queue_limit": 30},
        models={"m": {"share": 1.0, "worker_units": 2, "tokens": 500, "tokens_cv": 0.8}},
    )
    summary = Engine(s).run()
    assert summary.balanced() and summary.ok > 0


def test_timed_out_clients_leave_and_their_finished_work_is_wasted() -> None:
    s = single_model(qps=100, workers=3, duration_s=200, timeout_s=20)
    engine = Engine(s)
    summary = engine.run()
    assert summary.timed_out > 0
    assert summary.latency_s["max"] <= 20
    assert summary.wasted_batches > 0
    assert summary.balanced()


def test_retries_are_new_offered_requests_and_the_books_still_balance() -> None:
    base = shortened(load_preset("retry-storm"), 120)
    without = Engine(base.with_overrides(["client.retries=0"])).run()
    storm = Engine(base).run()
    assert without.retried == 0
    assert storm.retried > 0.5 * without.offered
    assert storm.offered - storm.retried == without.offered  # same fresh arrivals
    # Pull serves the oldest first, so retries only lengthen the queue behind them.
    assert storm.in_system_end > 2 * without.in_system_end
    assert storm.timed_out > without.timed_out
    assert storm.balanced() and without.balanced()


def test_shed_clients_retry_after_their_backoff() -> None:
    s = single_model(
        qps=50,
        workers=20,
        duration_s=60,
        client={"retries": 2, "timeout_s": 30, "retry_backoff_s": 0.5},
        gateway={"instances": 1, "rate_limit_qps": 10, "keys": 1},
    )
    summary = Engine(s).run()
    assert summary.retried > 0 and summary.shed > 0
    assert summary.balanced()


def test_linear_service_scales_with_the_batch_tokens() -> None:
    # Batches close after 0.5 s holding about 6 requests of 20: short service times.
    def mean_latency(service: str, qps: float) -> float:
        s = single_model(qps=qps, workers=10, duration_s=300, close_after_s=0.5, service=service)
        return Engine(s).run().latency_s["mean"]

    assert mean_latency("linear", 10) < 0.6 * mean_latency("constant", 10)
    # Full batches take batch_s either way.
    assert abs(mean_latency("linear", 100) / mean_latency("constant", 100) - 1) < 0.02
