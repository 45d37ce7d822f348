"""The batch close rule with varied token counts: full, or the next request would not
fit (that request opens the next batch), or ``close_after_s`` after the first."""

from __future__ import annotations

import numpy as np
from scenarios import single_model

from emulator import Engine


def _engine_with_requests(times: list[float], tokens: list[int]) -> Engine:
    """One model, no generated traffic, 1000-token batches, two pull workers; the given
    requests are placed in its store by hand."""
    s = single_model(
        qps=0,
        workers=2,
        batch_n=2,
        batch_s=1.0,
        duration_s=200,
        models={"m": {"share": 1.0, "worker_units": 2, "tokens": 500, "tokens_cv": 0.5}},
    )
    engine = Engine(s)
    n = len(times)
    zeros = np.zeros(n, dtype=np.int64)
    engine.disp[0].store.append(
        np.array(times), np.array(tokens, dtype=np.int64), zeros.astype(np.int16), zeros, zeros
    )
    return engine


def test_a_request_that_fills_the_batch_it_opens_is_dispatched_at_its_arrival() -> None:
    # 600 tokens wait; a 1000-token request does not fit, so it closes that batch and
    # opens the next, which it fills alone: both batches leave at t=1.
    engine = _engine_with_requests([0.0, 1.0, 100.0], [600, 1000, 100])
    engine.advance_to(1.5)
    assert engine.workers.in_service[0] == 2


def test_an_oversized_request_after_others_is_dispatched_at_its_arrival() -> None:
    engine = _engine_with_requests([0.0, 1.0, 100.0], [600, 1700, 100])
    engine.advance_to(1.5)
    assert engine.workers.in_service[0] == 2


def test_a_request_that_does_not_fit_waits_in_the_next_batch() -> None:
    engine = _engine_with_requests([0.0, 1.0, 100.0], [600, 500, 100])
    engine.advance_to(1.5)
    assert engine.workers.in_service[0] == 1  # the 500-token request waits for company
    summary = engine.run()
    # No close rule and no more traffic: 500 + 100 tokens never make a full batch.
    assert (summary.ok, summary.in_system_end) == (1, 2)
