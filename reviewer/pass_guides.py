"""Short guides shown with each review pass, in the product's own words.

Each guide is a one-line aim and a few prompts; the session page shows them
beside the pass's tools. Kept apart from the views so they read as text.
"""

from __future__ import annotations

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
