"""A run summary's outcomes as shares of the requests offered.

Every offered request ends the run with exactly one outcome, or is still in the
system at the end (the emulator's conservation law, ``Outcomes.balanced``); the
shares shown therefore include those still in the system, and are rounded so the
shown figures add up to exactly 100%.
"""

from __future__ import annotations

import math
from typing import Any

from emulator.sim.results import OUTCOME_KEYS

#: The run page's words for the outcomes whose key does not read as it is.
_LABELS = {"timed_out": "timed out", "in_system_end": "in the system at the end"}
#: Each outcome of a summary, in the emulator's order, with its label.
OUTCOMES: tuple[tuple[str, str], ...] = tuple(
    (key, _LABELS.get(key, key)) for key in (*OUTCOME_KEYS, "in_system_end"))

#: Why requests were shed (``Outcomes.to_dict``'s ``shed_reasons``), with their labels.
SHED_REASONS: tuple[tuple[str, str], ...] = (
    ("queue_full", "waiting bound full"),
    ("oversized", "too large for the KV cache"),
    ("rate_limit", "gateway rate limit"),
    ("slo_miss", "predicted SLO miss"),
)

#: Shares are shown to one decimal place: 1000 tenths of a percent make the whole.
_TENTHS = 1000


def outcome_shares(summary: dict[str, Any] | None) -> list[dict[str, Any]]:
    """``[{"key", "label", "count", "percent"}]`` for each outcome of ``summary``
    (a ``Summary.to_dict``), ``percent`` its share of the offered requests to one
    decimal place; the shed entry also lists ``reasons`` (``{"key", "label",
    "count"}`` for each reason that shed a request). The tenths are given out by largest remainder, so when every
    offered request is accounted for the percents add up to exactly 100.0; an
    empty run gives 0 for each."""
    if not summary:
        return []
    counts = [int(summary.get(key) or 0) for key, _ in OUTCOMES]
    offered = int(summary.get("offered") or 0)
    if offered <= 0:
        tenths = [0] * len(counts)
    else:
        exact = [_TENTHS * n / offered for n in counts]
        tenths = [math.floor(x) for x in exact]
        # The tenths the floors left over, to the largest remainders first.
        left = round(sum(exact)) - sum(tenths)
        for i in sorted(range(len(exact)), key=lambda i: exact[i] - tenths[i], reverse=True)[: max(0, left)]:
            tenths[i] += 1
    out = [
        {"key": key, "label": label, "count": n, "percent": t / 10}
        for (key, label), n, t in zip(OUTCOMES, counts, tenths, strict=True)
    ]
    reasons = summary.get("shed_reasons") or {}
    for entry in out:
        if entry["key"] == "shed":
            entry["reasons"] = [
                {"key": key, "label": label, "count": int(reasons.get(key) or 0)}
                for key, label in SHED_REASONS
                if reasons.get(key)
            ]
    return out
