"""Shipped scenarios, each reproducing one finding of a review of the canonical doc.

``PRESETS`` maps a preset's name to a one-line description; ``load_preset(name)``
reads ``emulator/scenario/presets/<name>.toml`` (package data) into a validated Scenario.
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

from emulator.scenario import ScenarioError, load_scenario

if TYPE_CHECKING:
    from emulator.scenario import Scenario

PRESETS: dict[str, str] = {
    "doc-as-written": "the doc's system as written, on the Part 2 hosts (2 big / 2 big / 5 small) "
    "at its average 1k QPS: a queue that grows without bound, then dispatcher and host failures",
    "peak-sized": "10k QPS on the fleet the numbers pass sizes (800 workers, about 94% busy), "
    "pull dispatching and a 0.1 s max-wait rule: latency stays near the 1.5 s floor",
    "low-traffic-no-close": "night traffic (4 QPS) with close_after_s never: batches wait about "
    "10 s to fill, so mean latency is about 6 s instead of 1.5 s",
    "round-robin-vs-pull": "one model at about 85% load with lognormal service (cv 0.5), "
    "round-robin; compare --set dispatcher.policy=pull for a much lower p99",
    "dispatcher-failover": "the small dispatcher dies at 60 s with a cold standby: its queue is "
    "lost and batches at workers are orphaned; compare --set dispatcher.standby=replicated",
    "host-loss": "2 big / 2 big / 5 small at 80 QPS loses host 2 at 60 s: no small request is "
    "served while it is down, nor for long after (the backlog has timed out); the 1 big + 2 "
    "small layout keeps both models up",
    "retry-storm": "150 QPS on 120 QPS of workers, 10 s client timeout, 3 retries: retries "
    "multiply the load and most completed work is wasted on clients that left",
    "continuous-comfortable": "a chat model with continuous batching on four 4-GPU workers at "
    "40 QPS: TTFT and TPOT well inside their SLOs, no preemption",
    "kv-preemption-storm": "the same fleet and traffic with a KV cache of 45,000 tokens a "
    "worker: constant preemption and recompute, TTFT far past its SLO; compare --set "
    "worker.kv_cache_tokens=200000",
    "roofline-70b-h100": "Llama-2-70B on 4-GPU H100 workers at 24 QPS, step times from the "
    "roofline (mbu 0.6, mfu 0.5) and a KV cache sized from the GPUs' memory: TTFT about 80 ms "
    "and TPOT about 28 ms at the median, inside their SLOs",
    "spec-eagle-70b-h100": "the roofline-70b-h100 fleet at 16 QPS with an EAGLE-style draft of 3 "
    "tokens a step accepted at 0.7 (2.53 tokens a verification step): TPOT about 17 ms at the median "
    "against 39 ms without; compare --set worker.speculative=false",
    "prefix-heavy-chat": "a chat fleet whose prompts share long preambles, with a prefix cache "
    "on each worker, routed round-robin: about 55% of prefix tokens hit and TTFT climbs to "
    "seconds; compare --set dispatcher.policy=prefix_aware for about 93% and 50 ms",
    "autoscaled-diurnal": "a day of chat traffic (0 to 12 QPS and back) on 2-GPU workers that an "
    "autoscaler adds and removes on running requests per worker, with 3-minute cold starts: "
    "scaled to zero at night, the first requests after a quiet spell time out",
    "disagg-decode-undersized": "a 70B chat model split into three prefill workers and one "
    "decode worker at 16 QPS: handoffs wait for KV room on the decode worker, the prefill "
    "workers hold their KV meanwhile and their queues grow; compare --set hosts[1].count=3",
    "pd-prefix-aware": "an llm-d-like split fleet: prefix-aware picking in both pools, a decider "
    "on the tokens not cached on the picked prefill worker, and a prefill worker that crashes "
    "for a minute: the TTFT tail reaches tens of seconds; compare --set "
    "models.chat.disaggregated.decider_max_prefill_queue=8",
    "pd-long-prompt-admission": "a Mooncake-like split fleet on 8,000-token prompts with long "
    "shared contexts: prefill workers cache them, yet the prefill pool is short, and "
    "queue_limit = 8 refuses the excess so the served keep a TTFT near a second; compare "
    "--set dispatcher.queue_limit=0",
    "pd-slo-admission": "a Mooncake-like split fleet on 8,000-token prompts whose traffic "
    "steps to four times its prefill capacity: each arrival's TTFT is predicted and those past "
    "the goal are refused at once, so the admitted keep their TTFT within it; compare --set "
    "dispatcher.admission=queue_limit for plain queueing, where nearly none does",
    "deepseek-v3-h200": "DeepSeek-V3 (256 routed experts, 8 a token) in FP8 on two 8-GPU H200 "
    "workers with expert parallelism at 10 QPS: a decode step reads only the experts its batch "
    "hits, and every MoE layer pays a dispatch and a combine all-to-all; compare --set "
    "traffic.qps=1 with and without models.chat.arch.experts_read=all (costed as if dense)",
    "mooncake-dram-tier": "a Mooncake-like split fleet on 8,000-token prompts sharing 6,000-token "
    "documents whose KV is three times a prefill worker's GPU KV: a DRAM tier under each GPU "
    "prefix cache and SLO-aware admission; compare --set 'worker.kv_tiers=[]'",
    "mooncake-shared-pool": "a Mooncake-like split fleet of four prefill workers over one remote "
    "KV store shared by the pool (shared = true) holding 400 documents of 6,000 tokens: a "
    "document one worker evicted is loaded by any other; compare four private tiers of the same "
    "total with --set 'worker.kv_tiers=[{name=\"cpu\", capacity_gb=250, bandwidth_gb_s=40}]'",
    "disagg-planner-ramp": "a 70B chat model in prefill and decode pools, each scaled by its "
    "own autoscaler (running prefills, decode KV in use) on a ramp from 4 to 24 QPS, routed "
    "on queue and running scores: every request inside its SLOs; compare --set "
    "pools.prefill.autoscaler.metric=queue",
    "prefix-router-estimated": "prefix-aware routing by the router's own record of where it sent "
    "each preamble (as llm-d's default prefix scorer), on caches too small to keep them: "
    "evictions it never sees cost a sixth of the SLO goodput; compare --set "
    "dispatcher.prefix_index=exact",
    "mooncake-long-context-pipeline": "a split 70B fleet on long-tailed prompts (10,000 tokens "
    "on average, a few past 100,000) under a 30 s TTFT goal: three prefill workers form a "
    "pipeline group, a third of the layers each, for prompts past 65,536 tokens, so a "
    "126,000-token prompt is prefilled in about 12 s instead of 33 s; compare --set "
    "models.chat.disaggregated.pipeline_threshold_tokens=0",
    "dynamo-planner-ramp": "the same split 70B fleet and ramp, each pool sized ahead by the "
    "SLO planner: a straight-line fit of its arrival rates read one warm-up ahead over the "
    "per-worker rate within a 1.5 s TTFT (prefill) or 40 ms between tokens (decode); compare "
    "disagg-planner-ramp, the reactive autoscalers",
    "planner-seasonal-diurnal": "the same split 70B fleet on a load that rises from 2 to 24 QPS "
    "and back every ten minutes, each pool's SLO planner predicting with the seasonal rule "
    "(the last period's rate at the time ahead, moved by the change in level): fewer "
    "worker-seconds and more goodput than the trend; compare --set "
    "pools.prefill.autoscaler.predictor=linear_trend",
}


def load_preset(name: str, max_requests: int | None | object = ...) -> Scenario:
    """Load the preset ``name`` as a validated Scenario (ScenarioError if unknown)."""

    if name not in PRESETS:
        raise ScenarioError(
            name, "is not a scenario file or a preset", f"presets are {', '.join(PRESETS)}"
        )
    text = resources.files(__name__).joinpath(f"{name}.toml").read_text(encoding="utf-8")
    return load_scenario(text, max_requests=max_requests)
