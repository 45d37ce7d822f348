"""The words the server and the browser share, sent to the page in its config.

Passes, severities, finding statuses, trace hops, run statuses, speeds and the
emulator's frame metrics are defined by the models and the emulator; the page's
scripts read them from here (``page_config["vocabulary"]``) and never spell
them out themselves.
"""

from __future__ import annotations

from typing import Any

from emulator.sim.results import COUNT_KEYS, DEPTH_KEYS, SHED_KEYS, STAT_KEYS, TOKEN_KEYS
from emulator.sim.workers.continuous import ContinuousWorkers
from reviewer.models.collaboration import FindingState, Verdict
from reviewer.models.review import FindingStatus, ReviewPass, Severity, TraceHop
from reviewer.models.runs import ACTIVE_STATUSES, FINAL_STATUSES, SPEEDS, RunStatus
from reviewer.views.mechanism_charts import mechanism_vocabulary

# The per-model metrics of a frame, as the emulator's results module groups them.
FRAME_METRICS = (*COUNT_KEYS, *SHED_KEYS, *DEPTH_KEYS, *STAT_KEYS)
#: What each shed reason of a frame is called on the page.
SHED_LABELS = {
    "shed_queue_full": "waiting bound full",
    "shed_oversized": "too large for the KV cache",
    "shed_rate_limit": "gateway rate limit",
    "shed_slo_miss": "predicted SLO miss",
}
# The metrics a frame adds for models with continuous batching.
TOKEN_FRAME_METRICS = tuple(
    k for k in (*ContinuousWorkers.frame_keys, *TOKEN_KEYS) if k not in FRAME_METRICS
)

# The run panel's charts: which frame metrics each one draws, and how. Chart
# titles and labels are presentation; the metric keys must be the emulator's.
RUN_CHARTS: list[dict[str, Any]] = [
    # Requests only: the dispatcher's queue, and under continuous batching the
    # requests waiting at the workers and those running there. A metric marked
    # "continuous" is drawn for the models that batch continuously only.
    {"key": "queue", "title": "Requests queued, waiting and running", "per_model": True,
     "y_title": "requests",
     "metrics": [{"key": "queue_depth", "label": "queue"},
                 {"key": "waiting", "label": "waiting", "dash": "dot", "continuous": True},
                 {"key": "running", "label": "running", "dash": "dash", "continuous": True}]},
    # Batches are another quantity: a chart of their own, for statically batched models.
    {"key": "backlog", "title": "Worker backlog", "per_model": True, "static": True,
     "y_title": "batches",
     "metrics": [{"key": "backlog", "label": "backlog"}]},
    # Frames with no ok request have no percentile: a gap, never a line across it.
    {"key": "latency", "title": "Latency of ok requests", "per_model": True, "markers": True,
     "y_title": "seconds", "stops_without_completions": True,
     "metrics": [{"key": key, "label": key.removesuffix("_s")} for key in ("p50_s", "p90_s", "p95_s", "p99_s")]},
    # A spike of one outcome must not flatten the others: a log axis.
    {"key": "outcomes", "title": "Requests per frame by outcome (log scale)", "per_model": False,
     "y_title": "requests per frame", "log": True,
     "metrics": [{"key": key, "label": key} for key in COUNT_KEYS]},
    # Why requests were shed: the reasons add up to the outcomes chart's shed.
    {"key": "shed", "title": "Requests shed per frame by reason", "per_model": False,
     "y_title": "requests per frame",
     "metrics": [{"key": key, "label": SHED_LABELS[key]} for key in SHED_KEYS]},
    # Token-level serving, drawn for the models that batch continuously; the
    # SLO lines come from the scenario's [slo].
    {"key": "ttft", "title": "Time to first token", "per_model": True, "markers": True,
     "continuous": True, "y_title": "seconds", "slo": "ttft_s", "stops_without_completions": True,
     "metrics": [{"key": f"ttft_{p}_s", "label": f"TTFT {p}"} for p in ("p50", "p90", "p95", "p99")]},
    # Per-token times read in milliseconds: the frames' seconds times ``scale``.
    {"key": "tpot", "title": "Time per output token", "per_model": True, "markers": True,
     "continuous": True, "y_title": "ms per token", "scale": 1000, "unit": "ms", "slo": "tpot_s",
     "stops_without_completions": True,
     "metrics": [{"key": f"tpot_{p}_s", "label": f"TPOT {p}"} for p in ("p50", "p90", "p95", "p99")]},
    # Every gap between two consecutive tokens of a request, not a request's mean:
    # the stalls TPOT averages away (a decode paused for prefills, a recompute).
    {"key": "tbt", "title": "Time between tokens", "per_model": True, "markers": True,
     "continuous": True, "y_title": "ms between tokens", "scale": 1000, "unit": "ms", "slo": "tbt_s",
     "stops_without_completions": True,
     "metrics": [{"key": f"tbt_{p}_s", "label": f"TBT {p}"} for p in ("p50", "p90", "p99")]},
    {"key": "tokens", "title": "Output tokens per second", "per_model": True, "continuous": True,
     "y_title": "tokens/s",
     "metrics": [{"key": "output_tokens_per_s", "label": "output tokens/s"}]},
    {"key": "goodput", "title": "Goodput: share of requests meeting every SLO", "per_model": True,
     "continuous": True, "markers": True, "y_title": "share of requests", "y_range": [0, 1.05],
     "metrics": [{"key": "goodput", "label": "goodput"}]},
    {"key": "preemptions", "title": "Preemptions per frame and KV cache in use", "per_model": True,
     "continuous": True, "y_title": "preemptions per frame", "y2_title": "KV in use (fraction)",
     "metrics": [{"key": "preemptions", "label": "preemptions"},
                 {"key": "kv_used", "label": "KV in use", "dash": "dot", "y2": True}]},
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
        # What the keyboard's "mark fixed" sets until findings have states of their own.
        "resolvedStatus": FindingStatus.RESOLVED.value,
        "hops": [{**hop, "returns": hop["key"] == TraceHop.RESPONSE_PATH} for hop in _choices(TraceHop)],
        "runStatus": {s.name: s.value for s in RunStatus},
        "runStatuses": {
            "all": [s.value for s in RunStatus],
            "active": [s.value for s in RunStatus if s in ACTIVE_STATUSES],
            "final": [s.value for s in RunStatus if s in FINAL_STATUSES],
        },
        "speeds": list(SPEEDS),
        "frameMetrics": list(FRAME_METRICS),
        "tokenFrameMetrics": list(TOKEN_FRAME_METRICS),
        # A run summary's request counts: offered, then each outcome.
        "requestCounts": list(COUNT_KEYS),
        "runCharts": RUN_CHARTS,
        # Prefix caching, prefill/decode pools and autoscaling, for runs whose frames carry them.
        "mechanismCharts": mechanism_vocabulary(),
        # Publishing and the author's side of a finding.
        "verdicts": _choices(Verdict),
        "findingStates": _choices(FindingState),
        "findingState": {s.name: s.value for s in FindingState},
    }
