"""Short guides shown with each review pass, in the product's own words.

Each guide is a one-line aim and a few prompts; the session page shows them
beside the pass's tools. Kept apart from the views so they read as text.
"""

from __future__ import annotations

from typing import Any

PASS_GUIDES: dict[str, dict[str, object]] = {
    "restate": {
        "aim": "Say back what the doc proposes before judging any of it.",
        "prompts": [
            "Name the components, the clients and the goals in two or three sentences.",
            "List the assumptions the doc states, and mark the ones you will test later.",
            "Note anything that already conflicts, such as a latency goal next to a fixed processing time.",
            "Write it down as the review's restatement: the export gives it right after the opening.",
        ],
    },
    "numbers": {
        "aim": "Combine the doc's own figures before reading further: capacity against demand.",
        "prompts": [
            "Requests per batch, batches per second per worker, requests per second per worker.",
            "Workers needed at average and at peak, against the workers the hosts can hold.",
            "The floor on latency, and how fast a queue grows when arrivals exceed service.",
        ],
    },
    "trace": {
        "aim": "Follow one request through every hop and back, asking who holds it at each step.",
        "prompts": [
            "Where does each queue live, and who owns its failure?",
            "How does a batch reach a worker that handles one batch at a time?",
            "How does each answer find the exact connection waiting for it?",
        ],
    },
    "break": {
        "aim": "Push the design past its limits and take parts away; watch what the user loses.",
        "prompts": [
            "Offer more load than the fleet serves: what grows, and what stops it?",
            "Kill the active dispatcher, a host, a worker: which requests are lost or orphaned?",
            "Compare dispatch policies on the same seed and look at the tail latency.",
        ],
    },
    "rank": {
        "aim": "Sort the findings into what to fix now, what to clarify, and what to mention.",
        "prompts": [
            "Open with the verdict in a sentence and the few things to fix now, then what the doc gets right.",
            "Keep fix now short: the few changes you would insist on before shipping.",
            "Order each column so the most important item comes first.",
        ],
    },
}


# Prompts that replace the ones above when the fleet under review works another way:
# the seed's system batches statically behind a dispatcher; most current designs
# batch per step, and some split prefill from decode or scale their workers.
_CONTINUOUS: dict[str, list[str]] = {
    "numbers": [
        "Tokens a worker decodes per second, and the step time that sets the floor on TPOT.",
        "KV cache per worker against the context the goal's concurrency holds (sequences x tokens each).",
        "Workers needed at average and at peak, and what the loss of one host leaves.",
    ],
    "trace": [
        "Where does a request wait before its first token: at the router, in a worker's queue, in prefill?",
        "What does the router know of each worker's load and cache when it picks one?",
        "How do the tokens stream back, and what becomes of a request whose worker dies mid-answer?",
    ],
    "break": [
        "Offer more load than the fleet serves: do queues grow, or does the KV cache fill and preempt?",
        "Kill a host or a worker: which running sequences are lost, and how soon is the capacity back?",
        "Compare routing policies on the same seed and look at the tail of TTFT.",
    ],
}
_DISAGGREGATED_TRACE = "How long does the KV transfer from prefill to decode take, and who holds the KV meanwhile?"
_AUTOSCALED_BREAK = "Step the load up: how long until a new worker serves (its warm-up), and what waits meanwhile?"


def guides_for(scenario: dict[str, Any] | None) -> dict[str, dict[str, object]]:
    """The pass guides for the fleet under review (its scenario as a dict, or None):
    the seed-shaped prompts for static batching, others for continuous batching, with a
    prompt more for split prefill/decode pools and for an autoscaler."""
    if not scenario:
        return PASS_GUIDES
    models = scenario.get("models") or {}
    worker = scenario.get("worker") or {}

    def batching(spec: Any) -> str:
        own = (spec or {}).get("worker") or {} if isinstance(spec, dict) else {}
        return str(own.get("batching", worker.get("batching", "static")))

    if not any(batching(spec) == "continuous" for spec in models.values()):
        return PASS_GUIDES
    guides = {key: {**guide, "prompts": list(guide["prompts"])} for key, guide in PASS_GUIDES.items()}  # type: ignore[call-overload]
    for key, prompts in _CONTINUOUS.items():
        guides[key]["prompts"] = list(prompts)
    if any(isinstance(spec, dict) and spec.get("disaggregated") for spec in models.values()):
        guides["trace"]["prompts"].append(_DISAGGREGATED_TRACE)  # type: ignore[attr-defined]
    if scenario.get("autoscaler"):
        guides["break"]["prompts"].append(_AUTOSCALED_BREAK)  # type: ignore[attr-defined]
    return guides
