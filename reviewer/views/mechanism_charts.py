"""The run view's charts of the emulator's serving mechanisms: prefix caching,
disaggregated prefill and decode pools, autoscaling, SLO-aware admission, the lower
KV tiers under the prefix cache, speculative decoding, a mixture of experts'
expert load and pipelined prefill of long prompts.

Part of the shared vocabulary (``vocabulary()["mechanismCharts"]``): the frame
metrics each chart draws are the emulator's own frame keys, imported from the
modules that add them, so a renamed key breaks the server's tests rather than a
chart. A chart appears only for runs whose frames carry its metrics.
"""

from __future__ import annotations

from typing import Any

from emulator.scenario.kv_tier_checks import TIER_NAMES
from emulator.sim.admission import FRAME_KEYS as ADMISSION_KEYS
from emulator.sim.autoscaler import FRAME_KEYS as AUTOSCALE_KEYS
from emulator.sim.planner import LOOK_KEYS as PLANNER_LOOK_KEYS
from emulator.sim.results import TOKEN_KEYS
from emulator.sim.workers.continuous import ContinuousWorkers
from emulator.sim.workers.disaggregated import DisaggregatedWorkers
from emulator.sim.workers.moe_figures import MOE_FRAME_KEYS
from emulator.sim.workers.prefix_figures import PREFIX_FRAME_KEYS, TIER_FRAME_KEYS
from emulator.sim.workers.spec_figures import SPEC_FRAME_KEYS

#: The per-model frame metrics of the disaggregated worker model, beyond the continuous one's.
POOL_KEYS: tuple[str, ...] = tuple(
    k for k in DisaggregatedWorkers.frame_keys if k not in ContinuousWorkers.frame_keys
)

#: The per-model frame metrics a pipeline group adds (only runs with one carry them).
PIPELINE_KEYS: tuple[str, ...] = DisaggregatedWorkers.pipeline_keys

#: Every per-model frame metric the mechanism charts draw.
MECHANISM_METRICS: tuple[str, ...] = (*PREFIX_FRAME_KEYS, *POOL_KEYS, *AUTOSCALE_KEYS, *ADMISSION_KEYS,
                                     *TIER_FRAME_KEYS, *SPEC_FRAME_KEYS, *MOE_FRAME_KEYS, *PIPELINE_KEYS)

#: The per-worker frame figure (``frame["w"][...]``) of each worker's prefix hit rate.
WORKER_PREFIX_HIT = "prefix_hit"

#: An autoscaler's event in a frame's ``events``: "scale <direction> <model>[ worker
#: <n>][ on host <h>]: <reason>" (``emulator.sim.autoscaler.Autoscaler._note``). The
#: groups are direction, model, worker, host and reason; the same pattern is used
#: by Python's ``re`` in the tests and by the browser's ``RegExp``.
SCALE_EVENT_PATTERN = r"^scale (\S+) (\S+)(?: worker (\d+))?(?: on host (\d+))?: (.*)$"

#: Colours of the scale-event markers by direction; others are grey.
SCALE_DIRECTION_COLOURS = {
    "up": "#2b8a3e", "ready": "#74b816", "down": "#e8590c", "parked": "#868e96",
    "blocked": "#c92a2a", "lost": "#862e9c", "rewarm": "#1971c2",
}

_PREFIX_HIT, _SAVED = PREFIX_FRAME_KEYS
(_P_TTFT50, _P_TTFT95, _D_TTFT50, _D_TTFT95, _TRANSFERS, _WAITING, _BACKLOG, _STRANDED) = POOL_KEYS
_ACTIVE, _WARMING, _DRAINING, _PARKED = AUTOSCALE_KEYS
_CLIENT_TTFT50, _CLIENT_TTFT95 = TOKEN_KEYS[0], TOKEN_KEYS[1]
_REJECTED, _REJECTED_TTFT, _ADMITTED_TTFT = ADMISSION_KEYS
_TIER_HIT, _TIER_LOAD = TIER_FRAME_KEYS
_VERIFIED, _PER_STEP, _TAU = SPEC_FRAME_KEYS
_EXPERTS_HIT, _WEIGHTS_GB = MOE_FRAME_KEYS
_PIPELINED, _PIPELINED_MAX = PIPELINE_KEYS

# Each chart: a key (its div's data-chart), the mechanism heading it sits under, a
# title, the y axis's title (with its unit), how a value is scaled for display and
# the axis's tick suffix, and its metrics (a trace per model that reports them).
# ``spread`` adds, per model, the band between its workers' lowest and highest
# per-worker figure (a metric's ``markers`` draws a mark per frame, for sparse events);
# ``present_keys`` (default: every metric) are those whose values
# decide which models a chart draws and whether it shows; ``per_frame`` adds the frame's length to the title; ``stacked``
# stacks a model's metrics as areas; ``scale_events`` draws the autoscaler's events
# as vertical markers and lists them under the chart.
MECHANISM_CHARTS: list[dict[str, Any]] = [
    {"key": "prefix_hit", "mechanism": "Prefix caching", "title": "Prefix cache hit rate per frame",
     "y_title": "hit rate (%)", "scale": 100, "tick_suffix": "%", "range": [0, 100], "connect_gaps": True,
     "metrics": [{"key": _PREFIX_HIT, "label": "hit rate"}],
     "spread": {"worker_key": WORKER_PREFIX_HIT, "label": "workers' range"}},
    {"key": "prefill_saved", "mechanism": "Prefix caching", "title": "Prefill tokens saved per frame",
     "y_title": "tokens per frame", "per_frame": True, "metrics": [{"key": _SAVED, "label": "tokens saved"}]},
    {"key": "pool_ttft", "mechanism": "Prefill and decode pools",
     "title": "TTFT: prefill pool, decode pool (handoff to first token), client (both)",
     "y_title": "seconds", "tick_suffix": " s", "connect_gaps": True,
     "present_keys": [_P_TTFT50, _D_TTFT50],
     "metrics": [{"key": _P_TTFT50, "label": "prefill p50", "colour": "#1f77b4"},
                 {"key": _P_TTFT95, "label": "prefill p95", "dash": "dot", "colour": "#1f77b4"},
                 {"key": _D_TTFT50, "label": "decode p50", "colour": "#2ca02c"},
                 {"key": _D_TTFT95, "label": "decode p95", "dash": "dot", "colour": "#2ca02c"},
                 {"key": _CLIENT_TTFT50, "label": "client p50", "colour": "#9467bd"},
                 {"key": _CLIENT_TTFT95, "label": "client p95", "dash": "dot", "colour": "#9467bd"}]},
    {"key": "pool_handoff", "mechanism": "Prefill and decode pools",
     "title": "KV handoff: transfers in flight, handoffs waiting, prefill backlog, stranded",
     "y_title": "requests",
     "metrics": [{"key": _TRANSFERS, "label": "KV transfers"},
                 {"key": _WAITING, "label": "handoffs waiting"},
                 {"key": _BACKLOG, "label": "prefill backlog", "dash": "dot"},
                 {"key": _STRANDED, "label": "stranded", "dash": "dash"}]},
    {"key": "autoscale_workers", "mechanism": "Autoscaling", "title": "Workers by state (stacked)",
     "y_title": "workers", "stacked": True, "scale_events": True,
     "metrics": [{"key": _ACTIVE, "label": "active", "colour": "#3b7dd8"},
                 {"key": _WARMING, "label": "warming", "colour": "#f6b26b"},
                 {"key": _DRAINING, "label": "draining", "colour": "#e8590c"},
                 {"key": _PARKED, "label": "parked", "colour": "#ced4da"}]},
    {"key": "admission_rejected", "mechanism": "SLO-aware admission",
     "title": "Arrivals refused for a predicted SLO miss", "y_title": "requests/s",
     "metrics": [{"key": _REJECTED, "label": "refused a second", "colour": "#c92a2a"}]},
    # The predictions beside the TTFT the admitted got: the admitted's mean stays under
    # the goal, the refused's above it.
    {"key": "admission_ttft", "mechanism": "SLO-aware admission",
     "title": "Predicted TTFT of the arrivals refused and admitted (frame means), client TTFT",
     "y_title": "seconds", "tick_suffix": " s", "connect_gaps": True,
     "present_keys": [_REJECTED_TTFT, _ADMITTED_TTFT],
     # Refusals come in bursts: that series is not joined across the frames without
     # any (a line would claim refusals between them), and each frame's mean is a mark.
     "metrics": [{"key": _REJECTED_TTFT, "label": "refused, predicted", "colour": "#c92a2a", "sparse": True},
                 {"key": _ADMITTED_TTFT, "label": "admitted, predicted", "colour": "#2b8a3e"},
                 {"key": _CLIENT_TTFT50, "label": "client p50", "colour": "#9467bd"},
                 {"key": _CLIENT_TTFT95, "label": "client p95", "dash": "dot", "colour": "#9467bd"}]},
    # Beside the hit rate over every level: the share of the prefix loaded from a lower tier.
    {"key": "tier_hit", "mechanism": "KV tiers", "title": "Prefix tokens loaded from lower tiers, and all hits",
     "y_title": "share of prefix tokens (%)", "scale": 100, "tick_suffix": "%", "range": [0, 100],
     "connect_gaps": True, "present_keys": [_TIER_HIT],
     "metrics": [{"key": _TIER_HIT, "label": "from a lower tier", "colour": "#e8590c"},
                 {"key": _PREFIX_HIT, "label": "all levels", "dash": "dot", "colour": "#1f77b4"}]},
    {"key": "tier_load", "mechanism": "KV tiers", "title": "Seconds spent loading KV from lower tiers per frame",
     "y_title": "seconds per frame", "tick_suffix": " s", "per_frame": True,
     "metrics": [{"key": _TIER_LOAD, "label": "load time", "colour": "#e8590c"}]},
    # Against the configured tau: what decoders got a step of either kind (the steps
    # that prefill give one plain token each), and the share given by verification.
    {"key": "spec_tokens", "mechanism": "Speculative decoding",
     "title": "Tokens a decoder got per decode step, against a verification step's tau",
     "y_title": "tokens per step", "connect_gaps": True, "present_keys": [_PER_STEP],
     "metrics": [{"key": _PER_STEP, "label": "measured, all decode steps", "colour": "#1971c2"},
                 {"key": _TAU, "label": "tau (configured)", "dash": "dot", "colour": "#868e96"}]},
    {"key": "spec_share", "mechanism": "Speculative decoding",
     "title": "Share of decode tokens given by verification steps",
     "y_title": "share of decode tokens (%)", "scale": 100, "tick_suffix": "%", "range": [0, 100],
     "connect_gaps": True, "present_keys": [_VERIFIED],
     "metrics": [{"key": _VERIFIED, "label": "from verification steps", "colour": "#2b8a3e"}]},
    # A mixture of experts: how many routed experts the decode batches hit, and the
    # weights they read, both rising with the batch until every expert is hit.
    {"key": "moe_experts", "mechanism": "Mixture of experts",
     "title": "Routed experts a MoE layer's decode step hits (frame mean)", "y_title": "experts",
     "connect_gaps": True, "metrics": [{"key": _EXPERTS_HIT, "label": "experts hit", "colour": "#5f3dc4"}]},
    {"key": "moe_weights", "mechanism": "Mixture of experts",
     "title": "Weights a decode step reads (frame mean)", "y_title": "GB", "tick_suffix": " GB",
     "connect_gaps": True, "metrics": [{"key": _WEIGHTS_GB, "label": "weights read", "colour": "#5f3dc4"}]},
    # The group's longest prefill in each frame beside the whole pool's p95: long
    # prompts stay near the pool's tail instead of far past it.
    {"key": "pipeline_ttft", "mechanism": "Pipelined prefill",
     "title": "Prefill TTFT: the pipeline group's longest per frame, and the prefill pool's p95",
     "y_title": "seconds", "tick_suffix": " s", "connect_gaps": True, "present_keys": [_PIPELINED],
     "metrics": [{"key": _PIPELINED_MAX, "label": "pipelined, longest", "colour": "#d6336c", "markers": True},
                 {"key": _P_TTFT95, "label": "prefill pool p95", "dash": "dot", "colour": "#1f77b4"}]},
    {"key": "pipeline_count", "mechanism": "Pipelined prefill", "title": "Long prompts the group prefilled per frame",
     "y_title": "prompts per frame", "per_frame": True,
     "metrics": [{"key": _PIPELINED, "label": "pipelined", "colour": "#d6336c"}]},
]

# The run's totals shown under each mechanism's charts once the summary arrives: a
# path into the summary's ``per_model[<model>]`` (scope "model"), its
# ``pool_autoscale[<pool>]`` (scope "pool") or the summary itself (scope "run"), a
# label, the unit and a scale. A path that does not resolve
# to a number (another mechanism's run) is left out; ``optional`` marks a total only
# some runs of its mechanism have (session counts, with session affinity).
MECHANISM_TOTALS: list[dict[str, Any]] = [
    {"mechanism": "Prefix caching", "scope": "model", "path": [_PREFIX_HIT], "label": "hit rate",
     "unit": "%", "scale": 100, "digits": 1},
    {"mechanism": "Prefix caching", "scope": "model", "path": [_SAVED], "label": "prefill tokens saved",
     "unit": "tokens"},
    # With session affinity: requests kept on their session's worker, sessions pinned
    # anew and moved off a worker that left the candidates.
    *({"mechanism": "Prefix caching", "scope": "model", "path": ["sessions", key], "label": label,
       "unit": unit, "optional": True} for key, label, unit in (("kept", "kept on their session's worker", "requests"),
                                               ("pinned", "sessions pinned", "sessions"),
                                               ("repinned", "sessions moved off a worker", "sessions"))),
    {"mechanism": "Prefill and decode pools", "scope": "model", "path": ["pools", "prefill_ttft_s", "p50"],
     "label": "prefill TTFT p50", "unit": "s", "digits": 3},
    {"mechanism": "Prefill and decode pools", "scope": "model", "path": ["pools", "decode_ttft_s", "p50"],
     "label": "decode TTFT p50", "unit": "s", "digits": 3},
    {"mechanism": "Prefill and decode pools", "scope": "model", "path": ["pools", "transfer_s", "p50"],
     "label": "KV transfer p50", "unit": "s", "digits": 3},
    {"mechanism": "Prefill and decode pools", "scope": "model", "path": ["pools", "transfers"],
     "label": "KV transfers", "unit": "requests"},
    {"mechanism": "Prefill and decode pools", "scope": "model", "path": ["pools", _STRANDED],
     "label": "stranded", "unit": "requests"},
    {"mechanism": "Prefill and decode pools", "scope": "model", "path": ["pools", "handoffs_lost"],
     "label": "handoffs lost", "unit": "requests"},
    # The whole model's autoscaler (``autoscale``), then each pool's
    # (``pool_autoscale[<pool>]``, scope "pool"), with the same figures.
    *({"mechanism": "Autoscaling", "scope": scope, "path": [*head, key], "label": label, "unit": unit}
      for scope, head in (("run", ["autoscale"]), ("pool", []))
      for key, label, unit in (("scaled_up", "scaled up", "workers"), ("scaled_down", "scaled down", "workers"),
                               ("blocked", "blocked looks", ""), ("peak_workers", "most held at once", "workers"),
                               ("worker_s", "worker time", "worker-s"))),
    {"mechanism": "SLO-aware admission", "scope": "model", "path": ["admission", "rejected"],
     "label": "refused", "unit": "requests"},
    {"mechanism": "SLO-aware admission", "scope": "model", "path": ["admission", "rejected_predicted_ttft_s", "p50"],
     "label": "predicted TTFT of the refused, p50", "unit": "s", "digits": 3},
    {"mechanism": "SLO-aware admission", "scope": "model", "path": ["admission", "admitted_predicted_ttft_s", "p50"],
     "label": "predicted TTFT of the admitted, p50", "unit": "s", "digits": 3},
    {"mechanism": "SLO-aware admission", "scope": "model", "path": ["admission", "admitted_goodput"],
     "label": "goodput of the admitted", "unit": "%", "scale": 100, "digits": 1},
    # The summary's ``kv_tiers``: the GPU cache's share and each tier's, by tier name.
    {"mechanism": "KV tiers", "scope": "model", "path": ["kv_tiers", "gpu", "hit_rate"],
     "label": "found in the GPU cache", "unit": "%", "scale": 100, "digits": 1},
    *({"mechanism": "KV tiers", "scope": "model", "path": ["kv_tiers", name, key], "label": f"{name} {label}",
       "unit": unit, "scale": scale, "digits": digits}
      for name in TIER_NAMES
      for key, label, unit, scale, digits in (("hit_rate", "tier's share", "%", 100, 1),
                                              ("load_s", "load time", "s", 1, 2),
                                              ("shared_by", "store shared by", "workers", 1, 0))),
    # The summary's ``speculative`` (``emulator.sim.workers.spec_figures``).
    *({"mechanism": "Speculative decoding", "scope": "model", "path": ["speculative", key], "label": label,
       "unit": unit, "scale": scale, "digits": digits}
      for key, label, unit, scale, digits in (
          ("tokens_per_step", "tau, a verification step's tokens (configured)", "tokens", 1, 2),
          ("tokens_per_decode_step", "tokens a decoder got a decode step", "tokens", 1, 2),
          ("verified_token_share", "decode tokens from verification steps", "%", 100, 1),
          ("verified_tokens", "verified tokens", "tokens", 1, 0),
          ("plain_tokens", "plain tokens of steps that prefill", "tokens", 1, 0))),
    # The summary's ``moe``: a mixture's decode steps over the run, their mean experts hit and weights read.
    {"mechanism": "Mixture of experts", "scope": "model", "path": ["moe", "experts_hit_mean"],
     "label": "experts hit a MoE layer, decode-step mean", "unit": "experts", "digits": 1},
    {"mechanism": "Mixture of experts", "scope": "model", "path": ["moe", "weights_read_gb_mean"],
     "label": "weights read, decode-step mean", "unit": "GB", "digits": 1},
    {"mechanism": "Mixture of experts", "scope": "model", "path": ["moe", "decode_steps"],
     "label": "decode steps", "unit": "steps"},
    # The summary's ``pools.pipeline`` (``emulator.sim.workers.pipeline``).
    {"mechanism": "Pipelined prefill", "scope": "model", "path": ["pools", "pipeline", "pipelined"],
     "label": "prompts pipelined", "unit": "requests"},
    {"mechanism": "Pipelined prefill", "scope": "model", "path": ["pools", "pipeline", "client_ttft_s", "p50"],
     "label": "their client TTFT p50", "unit": "s", "digits": 2},
    {"mechanism": "Pipelined prefill", "scope": "model", "path": ["pools", "pipeline", "client_ttft_s", "max"],
     "label": "their client TTFT max", "unit": "s", "digits": 2},
    {"mechanism": "Pipelined prefill", "scope": "model", "path": ["pools", "pipeline", "within_ttft_slo"],
     "label": "within the TTFT goal", "unit": "requests"},
]


# The SLO planner's decisions against its target, drawn from the summary's ``looks``
# of each planned autoscaler (``autoscale`` and ``pool_autoscale[<pool>]``): per look,
# the arrival rate it observed and the one it predicted beside the capacity of the
# workers active then (active x its per-worker rate). A run without a planner has no
# ``looks`` and shows no such chart.
_LOOK_T, _OBSERVED, _PREDICTED, _LOOK_CAPACITY = PLANNER_LOOK_KEYS
PLANNER_CHART: dict[str, Any] = {
    "key": "planner_looks", "mechanism": "Autoscaling",
    "title": "SLO planner: observed and predicted arrivals against the active workers' capacity",
    "y_title": "requests/s", "summaries": ["autoscale", "pool_autoscale"], "looks": "looks", "x": _LOOK_T,
    "series": [{"key": _OBSERVED, "label": "observed", "colour": "#868e96"},
               {"key": _PREDICTED, "label": "predicted", "colour": "#1971c2", "dash": "dot"},
               {"key": _LOOK_CAPACITY, "label": "capacity (active x per-worker rate)", "colour": "#2b8a3e",
                "shape": "hv"}],
}


def mechanism_vocabulary() -> dict[str, Any]:
    """What the run view needs to draw the mechanism charts and read scale events."""
    return {
        "charts": MECHANISM_CHARTS,
        "totals": MECHANISM_TOTALS,
        "scaleEventPattern": SCALE_EVENT_PATTERN,
        "scaleColours": SCALE_DIRECTION_COLOURS,
        # The summary's key holding the autoscaler's events with their exact times.
        "scaleSummary": "autoscale",
        # The summary's key holding each scaled pool's autoscaler, events included.
        "poolScaleSummary": "pool_autoscale",
        "plannerChart": PLANNER_CHART,
    }
