"""The fleet analysis of a split model with prefix caches: the prefill pool's hits, the
uncached decider's share, and the decode pool's cache for what it serves whole."""

from __future__ import annotations

import numpy as np
import pytest

from emulator.analysis.fleet import analyse
from emulator.analysis.fleet.prefix import che_group_hits, che_hit_rate
from emulator.analysis.numbers import compute
from emulator.scenario.presets import load_preset


@pytest.mark.parametrize("capacity", [0.0, 3.0, 40.0, 299.5, 1000.0])
def test_the_groups_hits_average_to_the_caches_hit_rate(capacity: float) -> None:
    rates = np.arange(1, 301, dtype=float) ** -1.0
    hits = che_group_hits(rates, capacity)
    assert float(np.dot(hits, rates) / rates.sum()) == pytest.approx(che_hit_rate(rates, capacity), abs=1e-9)
    assert np.all(np.diff(hits) <= 1e-12)  # the more popular, the likelier cached


def test_the_prefill_pool_is_credited_with_its_cache() -> None:
    base = load_preset("pd-long-prompt-admission", max_requests=None)
    cached, plain = analyse(base).models["chat"], analyse(base.with_overrides(["worker.prefix_cache=false"])).models["chat"]
    pre, pre_plain = cached.pool("prefill"), plain.pool("prefill")
    assert pre is not None and pre_plain is not None
    assert pre.worker.hit_rate is not None and 0.5 < pre.worker.hit_rate < 0.9
    assert pre_plain.worker.hit_rate is None
    # What a prefill worker serves grows as the new tokens a prompt shrink (less than in
    # proportion: the new tokens' attention reaches back over the cached prefix).
    new = 8000 - float(pre.worker.hit_rate) * (5000 - 8)
    assert 1.4 < float(pre.worker.qps / pre_plain.worker.qps) < 8000 / new
    assert cached.binding_pool == "prefill" and cached.capacity_qps > plain.capacity_qps * 1.4
    report = compute(base, analyse(base))
    assert report.value("prefill_prefix_hit_rate", "chat") == pre.worker.hit_rate


def test_the_uncached_decider_sends_cached_prompts_to_decode_and_the_decode_cache_sees_them() -> None:
    s = load_preset("pd-prefix-aware", max_requests=None)
    m = analyse(s).models["chat"]
    by_prompt = analyse(s.with_overrides(['models.chat.disaggregated.decider="prompt"'])).models["chat"]
    # The threshold (768) is under nearly every prompt: only the cached ones skip prefill.
    assert by_prompt.decode_direct_share < 0.01
    assert 0.3 < m.decode_direct_share < 0.6  # the run sends 46%
    # Served whole on decode, a request finds its prefix there more often than when the
    # same share goes by prompt length: the uncached decider sends the popular groups,
    # the ones the prefill workers have cached.
    by_length = analyse(s.with_overrides(['models.chat.disaggregated.decider="prompt"',
                                          "models.chat.disaggregated.decider_threshold_tokens=2600"])).models["chat"]
    assert abs(by_length.decode_direct_share - m.decode_direct_share) < 0.02
    hit, hit_by_length = (x.pool("decode").worker.hit_rate for x in (m, by_length))  # type: ignore[union-attr]
    assert hit is not None and hit_by_length is not None and hit > hit_by_length + 0.05


def test_round_robin_in_a_split_fleet_is_told_to_route_by_prefix_in_the_prefill_pool() -> None:
    from emulator.analysis.findings import suggest

    s = load_preset("pd-long-prompt-admission", max_requests=None).with_overrides(['dispatcher.policy="round_robin"'])
    found = {f["title"]: f for f in suggest(s, compute(s, analyse(s)))}
    title = "round_robin spreads chat's prefixes over every prefill worker"
    assert title in found, list(found)
    assert "prefix_aware" in found[title]["body"]
    as_shipped = load_preset("pd-long-prompt-admission", max_requests=None)
    assert title not in {f["title"] for f in suggest(as_shipped, compute(as_shipped, analyse(as_shipped)))}


def test_a_short_prefill_pool_is_said_to_queue_prompts_not_handoffs() -> None:
    from emulator.analysis.findings import suggest

    s = load_preset("pd-long-prompt-admission", max_requests=None)
    found = {f["title"]: f["body"] for f in suggest(s, compute(s, analyse(s)))}
    body = found["chat's prefill pool cannot carry its average load"]
    assert "Prompts queue at the prefill workers" in body and "Handoffs wait" not in body
    assert "beyond 8 waiting requests the excess is shed" in body
