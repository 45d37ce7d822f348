"""The example reviews that ship with the product, as data: each a design doc, its
fleet config and a started review (``manage.py load_example`` loads them).

The second example's findings carry emulator evidence: the command plays its runs
when it loads them, and the findings quote the figures those runs gave.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from reviewer.models import ReviewPass, Severity, Verdict

#: A finding's fields, given the summaries of the example's evidence runs by label.
FindingsFrom = Callable[[dict[str, dict[str, Any]]], list[dict[str, Any]]]


@dataclass(frozen=True)
class EvidenceRun:
    """A run of the example's fleet config played when the example loads."""

    label: str
    overrides: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExampleReview:
    """One example: found again by its doc's title, so loading is idempotent."""

    key: str  # load_example --example KEY
    title: str
    doc_file: str  # in reviewer.review.example
    fleet_name: str
    fleet_package: str
    fleet_file: str
    session_title: str
    findings: FindingsFrom
    runs: tuple[EvidenceRun, ...] = field(default_factory=tuple)
    # Where the fleet config's figures come from (see reviewer.fleets.provenance).
    provenance: dict[str, dict[str, str]] = field(default_factory=dict)
    # The review document (opening, strengths, restatement) and the published review.
    document: dict[str, str] = field(default_factory=dict)
    verdict: str = Verdict.NEEDS_CHANGES
    summary: str = ""

    def body(self) -> str:
        return resources.files("reviewer.review.example").joinpath(self.doc_file).read_text("utf-8")

    def toml(self) -> str:
        return resources.files(self.fleet_package).joinpath(self.fleet_file).read_text("utf-8")


# --- the seed's chat service: gateway, dispatchers and GPU workers ------------------

def _first_findings(runs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "review_pass": ReviewPass.RESTATE,
            "severity": Severity.CLARIFY,
            "title": "\"Low latency\" next to a 1.5 s batch time",
            "body": "Every request spends at least one batch time (1.5 s) in a worker, plus the time "
            "its batch takes to fill. Ask what latency target the author has in mind: it cannot be "
            "sub-second with this engine.",
            "anchor_exact": "Keep latency low for every user.",
        },
        {
            "review_pass": ReviewPass.NUMBERS,
            "severity": Severity.FIX_NOW,
            "title": "The fleet is about 50 times too small for the peak goal",
            "body": "A batch holds 10,000 / 500 = 20 requests, so one worker serves 20 / 1.5 s, about "
            "13.3 QPS. 10k QPS needs about 750 workers; 1k QPS about 75. Three 10-unit hosts hold at "
            "most 15 small workers, about 200 QPS.",
            "anchor_exact": "Sustain 10,000 QPS at peak.",
        },
        {
            "review_pass": ReviewPass.TRACE,
            "severity": Severity.FIX_NOW,
            "trace_hop": "dispatcher",
            "title": "Round-robin pushes batches to workers that are still busy",
            "body": "Workers take one batch at a time, yet batches are handed out in rotation "
            "whatever each worker is doing. A batch can wait behind a busy worker while the next one "
            "sits idle. Let idle workers pull the oldest closed batch instead.",
            "anchor_exact": "That queue hands each batch to the next worker, in round-robin order.",
        },
    ]


# The first example's review document, in our own words about its doc.
FIRST_DOCUMENT: dict[str, str] = {
    "opening": (
        "Not ready to build as written: the fleet in the capacity plan serves about 200 requests per "
        "second against a 10,000 QPS peak goal, so either the goal or the hardware has to change first. "
        "Before shipping, fix three things: let idle workers pull batches instead of pushing them "
        "round-robin to busy ones; decide what a dispatcher failover may lose, since the in-memory queue "
        "exists only on the active dispatcher; and describe how each answer finds its waiting client "
        "connection on the way back."
    ),
    "strengths": (
        "- One dispatcher per model is the right split: each model's queue, batching and failover stay "
        "independent.\n"
        "- Batching by input tokens, with a token ceiling per batch, measures work in the unit the engine "
        "actually pays for.\n"
        "- Treating the inference engine as a black box keeps the doc's scope to routing and queueing, "
        "where its decisions are."
    ),
    "restatement": (
        "A chat product serves a small and a big model. Clients hold a synchronous HTTP connection open "
        "until their answer arrives. A stateless gateway authenticates and rate-limits each request and "
        "passes it to the dispatcher of the requested model; one active dispatcher per model (with a hot "
        "standby) queues requests in memory and closes batches of up to 10,000 input tokens, about 20 "
        "requests of 500 tokens. GPU workers take 2 (small) or 5 (big) of a host's 10 units, run one batch "
        "at a time in 1.5 s, and receive batches in round-robin order. The goals are 10,000 QPS at peak and "
        "low latency; the stated assumptions are a constant batch time and prompts about as long as "
        "answers."
    ),
}


FIRST_SUMMARY = (
    "Not ready to build on yet: the fleet as sized cannot carry the stated peak, and the "
    "dispatch rule leaves work queued behind busy workers. Both are fixable in the doc."
)


FIRST = ExampleReview(
    key="gateway",
    title="Chat inference serving: gateway, dispatchers and GPU workers",
    doc_file="design-doc.md",
    fleet_name="doc-as-written (Part 2 hosts: 2 big / 2 big / 5 small)",
    fleet_package="emulator.scenario.presets",
    fleet_file="doc-as-written.toml",
    session_title="Example review: chat inference serving",
    findings=_first_findings,
    provenance={path: {"source": "doc", "quote": quote} for path, quote in (
        ("traffic.peak_qps", "At the daily peak we expect 10,000 requests per second (QPS) across both models."),
        ("traffic.qps", "Averaged over a day, traffic is about 1,000 QPS."),
        ("models.small.tokens", "A typical request carries about 500 input tokens."),
        ("models.big.tokens", "A typical request carries about 500 input tokens."),
        ("dispatcher.max_batch_tokens", "A batch may hold at most 10,000 input tokens."),
        ("dispatcher.policy", "That queue hands each batch to the next worker, in round-robin order."),
        ("worker.batch_s", "A batch takes 1.5 seconds to process on either model."),
        ("hosts[0].units", "Workers run on GPU hosts that each have 10 GPU units."),
        ("models.small.worker_units", "A worker for the small model occupies 2 units"),
    )},
    document=FIRST_DOCUMENT,
    summary=FIRST_SUMMARY,
)


# --- a 70B chat model on 4-GPU H100 replicas with continuous batching ----------------

def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _second_findings(runs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    rr, roomy = runs["as written"], runs["engine given 90 % of memory"]
    roomy_ll = runs["least loaded, 90 % of memory"]
    return [
        {
            "review_pass": ReviewPass.RESTATE,
            "severity": Severity.CLARIFY,
            "title": "\"Every request\" needs a percentile",
            "body": "A TTFT bound for every request is a bound on the maximum, which one long prompt "
            "behind a busy replica breaks. Ask for the percentile the goal means (p95? p99?) and the "
            "window it is measured over.",
            "anchor_exact": "Time to first token (TTFT) under 1 second for every request.",
        },
        {
            "review_pass": ReviewPass.NUMBERS,
            "severity": Severity.FIX_NOW,
            "title": "The TPOT goal is under the decode floor of these GPUs",
            "body": "Every decode step reads all 141 GB of BF16 weights. Four H100 SXM GPUs read "
            "4 x 3.35 TB/s, so a step takes at least 10.5 ms even at full bandwidth and with an empty "
            "cache: an 8 ms TPOT cannot be met by any scheduler or batch size. At the 60 % bandwidth "
            "tuned engines reach (assumed by the reviewer), and with the two all-reduces a layer that "
            "tensor parallelism 4 adds to every step (about 9.8 ms over 80 layers), one sequence alone "
            "gets about 27 ms. "
            f"The emulator's run of the doc's fleet: TPOT p50 {_ms(rr['tpot_s']['p50'])}, and "
            f"{rr['slo_met']:,} requests met the SLOs.",
            "anchor_exact": "Time per output token (TPOT) of at most 8 ms",
            "evidence": ("as written", "tpot_p50_s"),
        },
        {
            "review_pass": ReviewPass.NUMBERS,
            "severity": Severity.FIX_NOW,
            "title": "Half the memory leaves a KV cache for about 42 conversations per replica",
            "body": "4 x 80 GB x 0.5 = 160 GB, less 141 GB of weights, leaves 18.9 GB: 57,678 tokens "
            "at 327,680 bytes each (80 layers x 8 KV heads x 128 x 2 x 2 bytes). The trace's mean "
            "request holds 1,155 + 211 tokens, so 42 sequences fit, while 44 QPS over 8 replicas at "
            "about 11 s a request keeps about 60 running on each on average, and more in bursts. "
            f"In the emulator the doc's fleet preempts {rr['preemptions']:,} times in 300 s and TTFT "
            f"p50 is {rr['ttft_s']['p50']:.2f} s; giving the engine 90 % of memory: "
            f"{roomy['preemptions']:,} preemptions, TTFT p50 {_ms(roomy['ttft_s']['p50'])}.",
            "anchor_exact": "The engine is given half of each GPU's memory.",
            "evidence": ("as written", "ttft_p50_s"),
        },
        {
            "review_pass": ReviewPass.TRACE,
            "severity": Severity.FIX_NOW,
            "trace_hop": "routing",
            "title": "Round-robin stacks long prompts on replicas that are already full",
            "body": "Conversation prompts run past 10,000 tokens. The router gives the next request to "
            "the next replica whatever that replica holds, so a replica that has just taken a long "
            "prompt (or is preempting) gets its turn anyway while others have room. Route on load "
            "(least outstanding tokens) or on the prefix. While the cache is too small no router "
            "helps; with the engine given 90 % of memory (no preemptions), the emulator on the same "
            f"trace and seed: round-robin TTFT p99 {roomy['ttft_s']['p99']:.2f} s, p95 "
            f"{roomy['ttft_s']['p95']:.2f} s; least-loaded TTFT p99 {roomy_ll['ttft_s']['p99']:.2f} s, "
            f"p95 {roomy_ll['ttft_s']['p95']:.2f} s.",
            "anchor_exact": "it sends each request to the next replica in turn.",
            "evidence": ("engine given 90 % of memory", "ttft_p99_s"),
        },
        {
            "review_pass": ReviewPass.BREAK,
            "severity": Severity.CLARIFY,
            "title": "Losing a host leaves 6 replicas for a load that needs 8",
            "body": "With the engine given 90 % of memory a replica serves about 8.2 QPS under the "
            "reviewer's assumed efficiencies, so 8 replicas give about 66 QPS against the trace's mean "
            "rate x 8 of 44; the busiest minute of the trace asks for about 61 QPS. One host down "
            "leaves 6 replicas, about 49 QPS: enough for the mean, short of the peak. Is the launch "
            "sized for the mean, the peak, or N+1?",
            "anchor_exact": "No request dropped when one host fails.",
        },
    ]


# The second example's review document, in our own words about its doc.
SECOND_DOCUMENT: dict[str, str] = {
    "opening": (
        "Not ready to launch as written: at half of each GPU's memory a replica's KV cache holds the "
        "context of only about 42 average conversations, far fewer than the concurrency the launch "
        "traffic brings, so replicas preempt and recompute and TTFT runs to seconds. Fix three things "
        "first: size the KV cache for the concurrency the goal implies (or add replicas), route by load "
        "instead of in turn, and restate the TPOT goal above the decode floor of these GPUs, which is "
        "about 10.5 ms per token for a 70B model at tensor parallelism 4."
    ),
    "strengths": (
        "- Sizing the launch from a real conversation trace, replayed faster, brings the long tail of "
        "prompts into the plan instead of an average.\n"
        "- TTFT and TPOT are separate goals, which is how a streaming chat is felt by its users.\n"
        "- The engine settings (sequences per replica, tokens per step, preemption by recompute) are "
        "written down, so they can be checked."
    ),
    "restatement": (
        "Atlas answers long conversations with one Llama-3-70B model on an engine that batches per "
        "decode step with chunked prefill. Eight replicas, each on 4 H100 GPUs at tensor parallelism 4, "
        "sit two to a host on four hosts; the engine gets half of each GPU's memory and the KV cache "
        "gets what the weights leave of it. A router sends each request to the next replica in turn, "
        "without looking at prompts or load. Traffic is the Azure conversation trace at eight times its "
        "rate (prompts about 1,150 tokens, answers about 210). The goals are TTFT under 1 s for every "
        "request, TPOT of at most 8 ms, and no request dropped when a host fails; clients give up after "
        "60 s and retry."
    ),
}

SECOND_SUMMARY = (
    "The fleet as written runs out of KV cache, preempts and queues, and misses both latency goals; "
    "the KV cache size, the routing rule and the TPOT goal each need a change before launch."
)


SECOND = ExampleReview(
    key="chat-70b",
    title="Atlas chat: serving a 70B model with continuous batching",
    doc_file="chat-70b-doc.md",
    fleet_name="atlas-chat as written (4 hosts of two 4-GPU H100 replicas)",
    fleet_package="reviewer.review.example",
    fleet_file="chat-70b-fleet.toml",
    session_title="Example review: a 70B chat model with continuous batching",
    findings=_second_findings,
    provenance={
        **{path: {"source": "doc", "quote": quote} for path, quote in (
            ("traffic.trace", "the conversation trace of the Azure LLM inference dataset 2023"),
            ("traffic.trace_speedup", "Launch traffic is eight times the trace's rate"),
            ("hardware.gpu", "Each replica of the model runs on 4 H100 SXM GPUs (80 GB each)"),
            ("hardware.gpu_memory_utilization", "The engine is given half of each GPU's memory."),
            ("models.chat.worker_units", "with tensor parallelism 4"),
            ("models.chat.arch.model", "It answers with one model, Llama-3-70B"),
            ("models.chat.arch.dtype_bytes", "in BF16 for both the weights and the KV cache"),
            ("dispatcher.policy", "it sends each request to the next replica in turn."),
            ("worker.max_num_seqs", "Up to 256 sequences run at once on a replica."),
            ("worker.max_batched_tokens", "A step schedules at most 8,192 tokens"),
            ("slo.ttft_s", "Time to first token (TTFT) under 1 second for every request."),
            ("slo.tpot_s", "Time per output token (TPOT) of at most 8 ms"),
            ("hosts[0].count", "We start with four hosts, which gives eight replicas."),
            ("client.timeout_s", "Clients give up on a request after 60 seconds"),
        )},
        "worker.mbu": {"source": "assumed"},
        "worker.mfu": {"source": "assumed"},
    },
    runs=(
        EvidenceRun("as written"),
        EvidenceRun("engine given 90 % of memory", ("hardware.gpu_memory_utilization=0.9",)),
        EvidenceRun("least loaded, 90 % of memory",
                    ("dispatcher.policy=least_loaded", "hardware.gpu_memory_utilization=0.9")),
    ),
    document=SECOND_DOCUMENT,
    summary=SECOND_SUMMARY,
)

EXAMPLES: tuple[ExampleReview, ...] = (FIRST, SECOND)
