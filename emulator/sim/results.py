"""What a run reports: a Frame every ``sample_s`` of simulated time, and a Summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: The outcomes an offered request can end with: the one spelling of their names, which
#: the books' ``Counts``, the summaries' ``Outcomes``, the frames and the web app use.
#: A request not yet ended when the run stops is ``in_system_end`` instead.
OUTCOME_KEYS = ("ok", "timed_out", "shed", "lost", "orphaned")
#: Per-model counts of one frame (requests offered, and those whose outcome fell in it).
COUNT_KEYS = ("offered", *OUTCOME_KEYS)
#: Per-model counts of one frame's shed requests by reason: refused at a waiting bound
#: (``queue_limit``), too large for any worker's KV cache, refused by the gateway's rate
#: limit, refused for a predicted SLO miss (``admission = "predicted_ttft"``). They add
#: up to ``shed``.
SHED_KEYS = ("shed_queue_full", "shed_oversized", "shed_rate_limit", "shed_slo_miss")
#: The reasons of ``SHED_KEYS``, as ``Outcomes.to_dict`` names them in ``shed_reasons``.
SHED_REASONS = ("queue_full", "oversized", "rate_limit", "slo_miss")
#: Per-model quantities read at the frame's end.
DEPTH_KEYS = ("queue_depth", "backlog", "in_service", "busy_workers", "alive_workers")
#: Per-model statistics of the requests completed (and batches closed) in the frame.
STAT_KEYS = ("p50_s", "p90_s", "p95_s", "p99_s", "batch_fill")
#: Per-model statistics of token-level serving, for models with continuous batching:
#: TTFT and TPOT percentiles of the requests delivered in the frame, percentiles of the
#: times between tokens (TBT: every gap between two consecutive output tokens, booked
#: when the worker's step or stretch of decode steps ends in the frame), and the
#: fraction of the requests that got an outcome in the frame that met every SLO
#: (None: no SLO).
TOKEN_KEYS = (
    "ttft_p50_s",
    "ttft_p90_s",
    "ttft_p95_s",
    "ttft_p99_s",
    "tpot_p50_s",
    "tpot_p90_s",
    "tpot_p95_s",
    "tpot_p99_s",
    "tbt_p50_s",
    "tbt_p90_s",
    "tbt_p99_s",
    "goodput",
)

IDLE, BUSY, DEAD = 0, 1, 2
#: States of autoscaled workers: loading weights (placed, not serving), and parked (a
#: slot of the autoscaler's holding no units).
WARMING, PARKED = 3, 4


@dataclass
class Frame:
    """One sample of the running system, cheap to build: arrays are converted to lists
    only by ``to_dict``.

    ``m`` maps each per-model key to a list (one value per model, in ``models`` order);
    ``w_state`` (0 idle, 1 busy, 2 dead) and ``w_backlog`` (work queued: batches, or
    waiting requests under continuous batching) are per worker in layout order;
    ``h_alive`` is 1/0 per host. With an autoscaler, ``w_state`` may also be 3
    (warming) or 4 (parked), and ``w_host`` and ``w_first_unit`` say where each worker
    is now (-1: on no host). With continuous batching, ``w_kv`` (KV cache in use, a
    fraction) and ``w_running`` (running sequences) are per worker too (None for the
    workers of static models; absent when no model batches continuously).
    """

    i: int
    t_s: float
    models: list[str]
    m: dict[str, list[Any]]
    w_state: np.ndarray
    w_backlog: np.ndarray
    h_alive: np.ndarray
    events: list[str] = field(default_factory=list)
    w_kv: list[float | None] | None = None
    w_running: list[int | None] | None = None
    #: Per worker, its prefix hit rate over the frame (None: nothing looked up, or a
    #: static worker); None unless a model has shared prefixes or a prefix cache.
    w_prefix_hit: list[float | None] | None = None
    w_host: list[int] | None = None
    w_first_unit: list[int] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-safe, compact form sent to browsers and stored with a run."""
        w: dict[str, Any] = {"state": self.w_state.tolist(), "backlog": self.w_backlog.tolist()}
        if self.w_kv is not None:
            w["kv"] = list(self.w_kv)
            w["running"] = list(self.w_running or [])
        if self.w_prefix_hit is not None:
            w["prefix_hit"] = list(self.w_prefix_hit)
        if self.w_host is not None:
            w["host"] = list(self.w_host)
            w["first_unit"] = list(self.w_first_unit or [])
        return {
            "i": self.i,
            "t_s": self.t_s,
            "models": list(self.models),
            "m": {k: list(v) for k, v in self.m.items()},
            "w": w,
            "h": {"alive": self.h_alive.tolist()},
            "events": list(self.events),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Frame:
        """Rebuild a frame from ``to_dict`` output."""
        return cls(
            i=int(data["i"]),
            t_s=float(data["t_s"]),
            models=list(data["models"]),
            m={k: list(v) for k, v in data["m"].items()},
            w_state=np.asarray(data["w"]["state"], dtype=np.int8),
            w_backlog=np.asarray(data["w"]["backlog"], dtype=np.int32),
            h_alive=np.asarray(data["h"]["alive"], dtype=np.int8),
            events=list(data.get("events", [])),
            w_kv=list(data["w"]["kv"]) if "kv" in data["w"] else None,
            w_running=list(data["w"]["running"]) if "running" in data["w"] else None,
            w_prefix_hit=list(data["w"]["prefix_hit"]) if "prefix_hit" in data["w"] else None,
            w_host=list(data["w"]["host"]) if "host" in data["w"] else None,
            w_first_unit=list(data["w"]["first_unit"]) if "first_unit" in data["w"] else None,
        )


@dataclass
class Outcomes:
    """Totals by outcome plus latency statistics, for the fleet or one model.

    ``wasted_batches`` counts batches that a worker completed without delivering a
    single response (every request in it had timed out, or its responses were
    orphaned). ``retried`` counts offered requests that were retries: a retry is a
    new offered request, so the books balance with or without retries.

    Token-level serving (``token_level``) adds ``ttft_s`` and ``tpot_s`` (statistics
    like ``latency_s``, over delivered requests; TPOT is each request's mean), ``tbt_s``
    (the same over every gap between two consecutive output tokens of any request,
    delivered or not), ``output_tokens_per_s``,
    ``preemptions``, ``slo_goodput`` (the fraction of finished requests that met every
    SLO; None without SLOs), ``shed_oversized`` (requests no worker's KV could hold) and
    ``shed_queue_full`` (requests refused at the waiting bound, ``queue_limit``).

    With shared prefixes or a prefix cache (``prefix``): ``prefix_tokens_seen`` (prefix
    tokens looked up at admissions), ``prefill_tokens_saved`` (those found cached, so
    not prefilled) and ``prefix_hit_rate`` (saved / seen; None when nothing was seen).
    With lower KV tiers (``kv_tiers``): by tier name, the prefix tokens loaded from it
    (``hit_tokens``, also in the saved), their share of those seen (``hit_rate``) and
    the seconds their copies took (``load_s``); for a shared tier, ``shared_by``, the
    workers whose levels end in a store of that name (each pool of the model has its
    own); ``gpu`` is the GPU cache's share.
    With speculative decoding (``speculative``, ``emulator.sim.workers.spec_figures``):
    tau, the decode tokens given in verification steps and in steps that prefill, the
    verified share and the mean tokens a decoder got a step.
    A mixture of experts under the roofline (``moe``): its decode-only steps, the mean
    routed experts a MoE layer's decode step hit and the mean GB of weights it read.
    """

    offered: int = 0
    ok: int = 0
    timed_out: int = 0
    shed: int = 0
    lost: int = 0
    orphaned: int = 0
    in_system_end: int = 0
    wasted_batches: int = 0
    retried: int = 0
    served_qps: float = 0.0
    latency_s: dict[str, float | None] = field(default_factory=dict)
    token_level: bool = False
    ttft_s: dict[str, float | None] = field(default_factory=dict)
    tpot_s: dict[str, float | None] = field(default_factory=dict)
    tbt_s: dict[str, float | None] = field(default_factory=dict)
    output_tokens_per_s: float = 0.0
    preemptions: int = 0
    slo_met: int = 0
    slo_goodput: float | None = None
    shed_oversized: int = 0
    #: Requests refused at the waiting bound (``dispatcher.queue_limit``).
    shed_queue_full: int = 0
    #: Requests refused by the gateway's rate limit (``gateway.rate_limit_qps``).
    shed_rate_limit: int = 0
    #: Requests refused for a predicted SLO miss (``admission = "predicted_ttft"``).
    shed_slo_miss: int = 0
    #: SLO-aware admission's figures (``emulator.sim.admission.Admission.summary``):
    #: the refused and admitted with their predicted TTFTs; else empty.
    admission: dict[str, Any] = field(default_factory=dict)
    prefix: bool = False
    prefix_tokens_seen: int = 0
    prefill_tokens_saved: int = 0
    prefix_hit_rate: float | None = None
    #: A disaggregated model's pool figures (``DisaggregatedWorkers.pool_summary``):
    #: prefill and decode TTFT, decode TPOT, transfers, stranded requests; else empty.
    pools: dict[str, Any] = field(default_factory=dict)
    kv_tiers: dict[str, Any] = field(default_factory=dict)
    speculative: dict[str, Any] = field(default_factory=dict)
    moe: dict[str, Any] = field(default_factory=dict)
    #: With session affinity or a session score (``policies/sessions.py``): requests
    #: sent to their session's worker (``kept``), sessions pinned anew (``pinned``) and
    #: moved off a worker no longer a candidate (``repinned``); else empty.
    sessions: dict[str, Any] = field(default_factory=dict)

    def add(self, other: Outcomes) -> None:
        """Add another's counts to these (not the rates and latencies)."""
        for key in _TOTALS:
            setattr(self, key, getattr(self, key) + getattr(other, key))

    def balanced(self) -> bool:
        """The conservation law: every offered request has exactly one outcome."""
        return self.offered == sum(getattr(self, key) for key in OUTCOME_KEYS) + self.in_system_end

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict of the totals."""
        return {
            **{key: getattr(self, key) for key in COUNT_KEYS},
            "in_system_end": self.in_system_end,
            "wasted_batches": self.wasted_batches,
            "retried": self.retried,
            "served_qps": self.served_qps,
            "latency_s": dict(self.latency_s),
            "shed_reasons": {
                "queue_full": self.shed_queue_full,
                "oversized": self.shed_oversized,
                "rate_limit": self.shed_rate_limit,
                "slo_miss": self.shed_slo_miss,
            },
            **(self._token_dict() if self.token_level else {}),
            **(self._prefix_dict() if self.prefix else {}),
            **({"pools": dict(self.pools)} if self.pools else {}),
            **({"admission": dict(self.admission)} if self.admission else {}),
            **({"kv_tiers": dict(self.kv_tiers)} if self.kv_tiers else {}),
            **({"speculative": dict(self.speculative)} if self.speculative else {}),
            **({"moe": dict(self.moe)} if self.moe else {}),
            **({"sessions": dict(self.sessions)} if self.sessions else {}),
        }

    def _prefix_dict(self) -> dict[str, Any]:
        return {
            "prefix_tokens_seen": self.prefix_tokens_seen,
            "prefill_tokens_saved": self.prefill_tokens_saved,
            "prefix_hit_rate": self.prefix_hit_rate,
        }

    def _token_dict(self) -> dict[str, Any]:
        return {
            "ttft_s": dict(self.ttft_s),
            "tpot_s": dict(self.tpot_s),
            "tbt_s": dict(self.tbt_s),
            "output_tokens_per_s": self.output_tokens_per_s,
            "preemptions": self.preemptions,
            "slo_met": self.slo_met,
            "slo_goodput": self.slo_goodput,
            "shed_oversized": self.shed_oversized,
            "shed_queue_full": self.shed_queue_full,
        }


#: The counts of ``Outcomes`` that add up over models.
_TOTALS = (
    *COUNT_KEYS,
    "in_system_end",
    "wasted_batches",
    "retried",
    "preemptions",
    "slo_met",
    "shed_oversized",
    "shed_queue_full",
    "shed_rate_limit",
    "shed_slo_miss",
    "prefix_tokens_seen",
    "prefill_tokens_saved",
)


@dataclass
class Summary(Outcomes):
    """A run's totals (fleet-wide), the same per model, and the run's own figures."""

    per_model: dict[str, Outcomes] = field(default_factory=dict)
    #: With ``prefix``: each worker's prefix hit rate over the run, in layout order
    #: (None: nothing looked up, or a static worker).
    prefix_hit_rate_by_worker: list[float | None] = field(default_factory=list)
    sim_s: float = 0.0
    wall_s: float = 0.0
    events: int = 0
    #: With an autoscaler: its model, scale events, worker counts and worker-seconds
    #: (``emulator.sim.autoscaler.Autoscaler.summary``); None without one.
    autoscale: dict[str, Any] | None = None
    #: Each pool's autoscaler (``[pools.NAME.autoscaler]``), by pool: the same figures.
    pool_autoscale: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict: totals, ``per_model``, ``sim_s``, ``wall_s``, ``events``."""
        out = super().to_dict()
        out["per_model"] = {name: o.to_dict() for name, o in self.per_model.items()}
        if self.prefix:
            out["prefix_hit_rate_by_worker"] = list(self.prefix_hit_rate_by_worker)
        out["sim_s"] = self.sim_s
        out["wall_s"] = self.wall_s
        out["events"] = self.events
        if self.autoscale is not None:
            out["autoscale"] = self.autoscale
        if self.pool_autoscale:
            out["pool_autoscale"] = dict(self.pool_autoscale)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Summary:
        """Rebuild a summary from ``to_dict`` output."""
        stats = ("latency_s", "ttft_s", "tpot_s", "tbt_s")
        keys = [
            k
            for k in Outcomes.__dataclass_fields__
            if k not in stats
            and k not in ("token_level", "slo_goodput", "prefix", "prefix_hit_rate", "pools", "admission",
                          "kv_tiers", "speculative", "moe", "sessions")
        ]

        def outcomes(d: dict[str, Any]) -> dict[str, Any]:
            reasons = d.get("shed_reasons", {})
            return {
                **{k: d.get(k, 0) for k in keys},
                "shed_queue_full": d.get("shed_queue_full", reasons.get("queue_full", 0)),
                "shed_oversized": d.get("shed_oversized", reasons.get("oversized", 0)),
                "shed_rate_limit": reasons.get("rate_limit", 0),
                "shed_slo_miss": reasons.get("slo_miss", 0),
                **{k: dict(d.get(k, {})) for k in stats},
                "token_level": "ttft_s" in d,
                "slo_goodput": d.get("slo_goodput"),
                "prefix": "prefix_hit_rate" in d,
                "prefix_hit_rate": d.get("prefix_hit_rate"),
                "pools": dict(d.get("pools", {})),
                "admission": dict(d.get("admission", {})),
                "kv_tiers": dict(d.get("kv_tiers", {})),
                "speculative": dict(d.get("speculative", {})),
                "moe": dict(d.get("moe", {})),
                "sessions": dict(d.get("sessions", {})),
            }

        return cls(
            **outcomes(data),
            per_model={n: Outcomes(**outcomes(d)) for n, d in data.get("per_model", {}).items()},
            prefix_hit_rate_by_worker=list(data.get("prefix_hit_rate_by_worker", [])),
            sim_s=float(data.get("sim_s", 0.0)),
            wall_s=float(data.get("wall_s", 0.0)),
            events=int(data.get("events", 0)),
            autoscale=data.get("autoscale"),
            pool_autoscale=dict(data.get("pool_autoscale", {})),
        )
