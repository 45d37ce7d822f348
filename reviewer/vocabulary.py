"""The words the server and the browser share, sent to the page in its config.

Passes, severities, finding statuses, trace hops, run statuses, speeds and the
emulator's frame metrics are defined by the models and the emulator; the page's
scripts read them from here (``page_config["vocabulary"]``) and never spell
them out themselves.
"""

from __future__ import annotations

from typing import Any

from emulator.sim.results import COUNT_KEYS, DEPTH_KEYS, STAT_KEYS
from reviewer.mechanism_charts import mechanism_vocabulary
from reviewer.models.review import FindingStatus, ReviewPass, Severity, TraceHop
from reviewer.models.runs import ACTIVE_STATUSES, FINAL_STATUSES, SPEEDS, RunStatus

# The per-model metrics of a frame, as the emulator's results module groups them.
FRAME_METRICS = (*COUNT_KEYS, *DEPTH_KEYS, *STAT_KEYS)

# The run panel's charts: which frame metrics each one draws, and how. Chart
# titles and labels are presentation; the metric keys must be the emulator's.
RUN_CHARTS: list[dict[str, Any]] = [
    {"key": "queue", "title": "Queue depth and worker backlog", "per_model": True,
     "metrics": [{"key": "queue_depth", "label": "queue"},
                 {"key": "backlog", "label": "backlog", "dash": "dot"}]},
    # Frames with no ok request have no percentile; the line bridges them.
    {"key": "latency", "title": "Latency of ok requests (s)", "per_model": True, "connect_gaps": True,
     "metrics": [{"key": key, "label": key.removesuffix("_s")} for key in ("p50_s", "p95_s", "p99_s")]},
    {"key": "outcomes", "title": "Requests per frame by outcome", "per_model": False,
     "metrics": [{"key": key, "label": key} for key in COUNT_KEYS]},
]


# The two kinds of measured step a calibration fits (the emulator's
# ``calibration.Point.kind``): one prefill step of a batch of prompts, and one
# decode step of a batch of sequences.
CALIBRATION_STEP_KINDS: list[dict[str, str]] = [
    {"key": "prompt", "label": "prompt (prefill) steps"},
    {"key": "token", "label": "token (decode) steps"},
]


def _choices(choices: Any) -> list[dict[str, str]]:
    return [{"key": c.value, "label": str(c.label)} for c in choices]


def vocabulary() -> dict[str, Any]:
    """Everything the page's scripts need to name passes, buckets, statuses, hops and metrics."""
    return {
        "passes": _choices(ReviewPass),
        # By name, for scripts that mean one in particular: config.pass.BREAK.
        "pass": {p.name: p.value for p in ReviewPass},
        "severities": _choices(Severity),
        "findingStatuses": _choices(FindingStatus),
        "openStatus": FindingStatus.OPEN.value,
        # Dropped findings are kept but not drawn in the doc.
        "droppedStatus": FindingStatus.DROPPED.value,
        "hops": [{**hop, "returns": hop["key"] == TraceHop.RESPONSE_PATH} for hop in _choices(TraceHop)],
        "runStatus": {s.name: s.value for s in RunStatus},
        "runStatuses": {
            "all": [s.value for s in RunStatus],
            "active": [s.value for s in RunStatus if s in ACTIVE_STATUSES],
            "final": [s.value for s in RunStatus if s in FINAL_STATUSES],
        },
        "speeds": list(SPEEDS),
        "frameMetrics": list(FRAME_METRICS),
        # A run summary's request counts: offered, then each outcome.
        "requestCounts": list(COUNT_KEYS),
        "runCharts": RUN_CHARTS,
        # Prefix caching, prefill/decode pools and autoscaling, for runs whose frames carry them.
        "mechanismCharts": mechanism_vocabulary(),
    }
