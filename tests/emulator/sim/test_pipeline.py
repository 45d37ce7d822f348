"""Pipelined prefill (``pipeline_*`` of ``[models.NAME.disaggregated]``): a lone long
prompt's TTFT against the pipeline's closed form worked out by hand here, the same
prompt without the pipeline as before, and a loaded fleet's invariants (every request
answered once, KV released, no stage running two chunks at once)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from disagg_scenarios import KV_BYTES, pd_data
from token_reference import TokenRequest
from token_scenarios import WORKER, poisson_requests, write_trace

from emulator import Engine
from emulator.scenario import Scenario

PARAMS = replace(WORKER, prefill_attn_s=2e-9, kv_cache_tokens=400_000)
GB_S = 50.0


def _data(trace: Path, *, stages: int, threshold: int = 50_000, chunk: int = 0, hop: float = 0.0,
          prefill: int = 5, duration_s: float = 120, params: Any = PARAMS, link: float = 0.0) -> dict[str, Any]:
    data = pd_data(prefill=prefill, decode=1, duration_s=duration_s, trace=trace, params=params, gb_s=GB_S)
    if stages:
        split = data["models"]["m"]["disaggregated"]
        split.update(pipeline_threshold_tokens=threshold, pipeline_workers=stages)
        if chunk:
            split["pipeline_chunk_tokens"] = chunk
        if hop:
            split["pipeline_hop_s"] = hop
        if link:
            split["pipeline_link_gb_s"] = link
            data["models"]["m"]["arch"] = {"model": "Llama-2-70B"}  # hidden 8192, 2 bytes a value
    return data


def _run(data: dict[str, Any]) -> tuple[Engine, dict[str, Any]]:
    engine = Engine(Scenario.from_dict(data, max_requests=None))
    return engine, engine.run().per_model["m"].to_dict()


def _by_hand(prompt: int, stages: int, chunk: int, hop: float, link: float = 0.0) -> float:
    """The prefill of one prompt over an idle pipeline, from the recurrence written out
    directly: end[s][i] = max(end[s][i-1], end[s-1][i] + hop(i)) + cost(i), hop(i) the
    fixed hop plus chunk i's activations (tokens x 8,192 x 2 bytes) over ``link`` GB/s."""
    w = PARAMS
    costs, hops = [], []
    for start in range(0, prompt, chunk):
        c = min(chunk, prompt - start)
        work = w.prefill_token_s * c + w.prefill_attn_s * c * (start + c)
        costs.append(w.step_base_s + work / stages)  # the fixed cost whole, the rest split
        hops.append(hop + (c * 8192 * 2 / (link * 1e9) if link else 0.0))
    end = [[0.0] * len(costs) for _ in range(stages)]
    for s in range(stages):
        for i, cost in enumerate(costs):
            before = end[s][i - 1] if i else 0.0
            ready = end[s - 1][i] + hops[i] if s else 0.0
            end[s][i] = max(before, ready) + cost
    return end[-1][-1]


@pytest.mark.parametrize(("stages", "chunk", "hop", "link"),
                         [(2, 8192, 0.0, 0.0), (4, 8192, 0.002, 0.0), (3, 5000, 0.01, 0.0), (3, 8192, 0.001, 2.0)])
def test_a_lone_long_prompt_is_prefilled_in_the_pipelines_time(
    tmp_path: Path, stages: int, chunk: int, hop: float, link: float
) -> None:
    prompt = 100_000
    trace = write_trace([TokenRequest(0.0, prompt, 20)], tmp_path / "one.jsonl")
    _, got = _run(_data(trace, stages=stages, chunk=chunk, hop=hop, link=link))
    prefill = _by_hand(prompt, stages, chunk, hop, link)
    pools = got["pools"]
    assert pools["prefill_ttft_s"]["mean"] == pytest.approx(prefill, rel=1e-12)
    if link:  # a 2 GB/s link: 67 ms a whole chunk, longer than a stage's chunk early on
        assert prefill > _by_hand(prompt, stages, chunk, hop) + 0.1
    # The client's TTFT adds the transfer of the whole prompt's KV and one step of its
    # last position at the decode worker, as without the pipeline.
    kv_bytes = 327_680 if link else KV_BYTES  # (the arch's KV, when it is given)
    transfer = prompt * kv_bytes / (GB_S * 1e9)
    first = PARAMS.step_base_s + PARAMS.prefill_token_s + PARAMS.prefill_attn_s * prompt
    assert got["ttft_s"]["mean"] == pytest.approx(prefill + transfer + first, rel=1e-12)
    assert pools["pipeline"]["pipelined"] == 1
    assert pools["pipeline"]["client_ttft_s"]["mean"] == pytest.approx(got["ttft_s"]["mean"], rel=1e-12)


def test_equal_chunks_take_c_plus_n_minus_one_chunk_times(tmp_path: Path) -> None:
    # Without the attention term every chunk costs the same c on a stage, so an idle
    # pipeline of N stages prefills C chunks in (C + N - 1) c plus N - 1 hops.
    params = replace(PARAMS, prefill_attn_s=0.0)
    prompt, chunk, stages, hop = 8192 * 12, 8192, 4, 0.003
    trace = write_trace([TokenRequest(0.0, prompt, 20)], tmp_path / "one.jsonl")
    _, got = _run(_data(trace, stages=stages, hop=hop, params=params))
    c = params.step_base_s + params.prefill_token_s * chunk / stages
    assert got["pools"]["prefill_ttft_s"]["mean"] == pytest.approx((12 + stages - 1) * c + (stages - 1) * hop,
                                                                   rel=1e-12)


def test_short_prompts_and_the_pipeline_off_give_todays_figures(tmp_path: Path) -> None:
    prompt = 100_000
    trace = write_trace([TokenRequest(0.0, prompt, 20)], tmp_path / "one.jsonl")
    _, off = _run(_data(trace, stages=0))
    # Chunked prefill on one worker: one chunk of at most 8,192 tokens a step.
    w, by_hand = PARAMS, 0.0
    for start in range(0, prompt, w.max_batched_tokens):
        c = min(w.max_batched_tokens, prompt - start)
        by_hand += w.step_base_s + w.prefill_token_s * c + w.prefill_attn_s * c * (start + c)
    assert off["pools"]["prefill_ttft_s"]["mean"] == pytest.approx(by_hand, rel=1e-12)
    assert "pipeline" not in off["pools"]
    # A prompt at the threshold is not pipelined: it is prefilled as before.
    _, at = _run(_data(trace, stages=2, threshold=prompt))
    assert at["ttft_s"] == off["ttft_s"]
    assert at["pools"]["pipeline"]["pipelined"] == 0


def test_under_load_every_request_is_answered_once_and_the_stages_never_overlap(tmp_path: Path) -> None:
    short = poisson_requests(qps=6, duration_s=60, prompt=3000, output=100, prompt_cv=1.0, seed=3)
    long = [TokenRequest(t, 60_000 + 7_000 * k, 50) for k, t in enumerate((1.0, 1.5, 2.0, 9.0, 9.2, 30.0))]
    requests = sorted(short + long, key=lambda r: r.arrival_s)
    trace = write_trace(requests, tmp_path / "mix.jsonl")
    params = replace(PARAMS, kv_cache_tokens=120_000)  # a stage holds two long prompts' shares
    data = _data(trace, stages=3, hop=0.002, duration_s=400, params=params)
    engine = Engine(Scenario.from_dict(data, max_requests=None))
    group = engine.workers.groups[0]  # type: ignore[attr-defined]
    group.trace = []
    summary = engine.run()
    assert summary.balanced()
    m = summary.per_model["m"]
    assert m.ok == len(requests)  # every request answered (once: the books balance)
    assert m.pools["pipeline"]["pipelined"] == len(long)
    assert m.pools["pipeline"]["delivered"] == len(long)
    # No stage runs two chunks at once, and stage s runs a chunk only after stage s - 1.
    for s in range(group.n):
        runs = sorted((a, b) for k, a, b in group.trace if k == s)
        assert all(b0 <= a1 + 1e-12 for (_, b0), (a1, _) in zip(runs, runs[1:], strict=False))
    at = 0  # the trace holds each prompt's chunks stage by stage, prompts in arrival order
    for r in long:
        c = -(-r.prompt_tokens // PARAMS.max_batched_tokens)
        mine = group.trace[at : at + c * group.n]
        at += c * group.n
        for k in range(1, group.n):
            for i in range(c):
                assert mine[k * c + i][1] >= mine[(k - 1) * c + i][2] + 0.002 - 1e-12
    assert at == len(group.trace)
    # KV released: every stage and worker holds nothing once all is done.
    for wk in engine.workers.workers.values():  # type: ignore[attr-defined]
        assert wk.kv_prefill == 0 and not wk.running and not wk.waiting
    # The group's workers took the long prompts only, the pool's others the short ones.
    assert m.pools["pipeline"]["stages"] == [2, 3, 4]
    assert group.head.serial == len(long)
    assert all(engine.workers.workers[w].serial == 0 for w in (3, 4))  # type: ignore[attr-defined]
    assert sum(engine.workers.workers[w].serial for w in (0, 1)) == len(short)  # type: ignore[attr-defined]


def test_a_stages_death_loses_the_groups_prompts_and_the_long_ones_go_elsewhere(tmp_path: Path) -> None:
    long = [TokenRequest(t, 90_000, 20) for t in (0.0, 0.5, 20.0)]
    trace = write_trace(long, tmp_path / "long.jsonl")
    data = _data(trace, stages=2, duration_s=120)
    data["faults"] = [{"at_s": 1.0, "kill": "worker:m:4"}]  # the last stage
    summary = Engine(Scenario.from_dict(data, max_requests=None)).run()
    assert summary.balanced()
    m = summary.per_model["m"]
    assert m.lost == 2  # the two in the group when its stage died
    assert m.ok == 1  # the third, prefilled by an ordinary prefill worker
    assert m.pools["pipeline"]["pipelined"] == 0
