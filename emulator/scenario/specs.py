"""The scenario format: a typed, validated description of one serving system and its run.

A scenario file is TOML with the vocabulary of ``examples/doc-as-written.toml``. The
dataclasses below carry exactly those keys as field names, plus a few added keys
(with defaults) that the example does not need:

* ``traffic.ramp_s`` (60): ``ramp`` rises linearly from ``qps`` to ``peak_qps`` over
  the first ``ramp_s`` seconds, then holds ``peak_qps``.
* ``traffic.step_at_s`` (60): ``step`` runs at ``qps`` and jumps to ``peak_qps`` at
  this time.
* ``traffic.period_s`` (300): ``diurnal`` swings between ``qps`` (at t = 0) and
  ``peak_qps`` (at half a period) along a cosine with this period.
* ``traffic.burst_at_s`` (60) and ``traffic.burst_s`` (10): ``burst`` runs at
  ``peak_qps`` during ``[burst_at_s, burst_at_s + burst_s)`` and at ``qps`` otherwise.
* ``traffic.arrival`` ("poisson") and ``traffic.arrival_cv`` (1): with ``"gamma"`` the
  gaps between fresh arrivals are gamma with that coefficient of variation (bursty
  above 1), for every shape; see ``emulator.sim.renewal``.
* ``dispatcher.health_check_s`` (5): how often a pushing dispatcher (round_robin,
  least_loaded) learns which of its workers are alive; until then it keeps pushing
  to a dead worker, and a restored worker rejoins the rotation only then.

Token-level serving (``worker.batching = "continuous"``) adds the worker keys of
``WorkerSpec`` below, ``models.NAME.output_tokens`` (and ``_cv``), per-model worker
overrides in ``[models.NAME.worker]``, trace replay in ``[traffic]`` (``trace``,
``trace_speedup``, ``trace_start_s``, ``trace_loop``) and SLOs in ``[slo]``. Keys
left at their defaults are not written back by ``to_dict``, so a scenario of the
seed's kind reads back exactly as it was written.

``[autoscaler]`` (``AutoscalerSpec``) scales one continuous-batching model's workers;
see docs/autoscaling.md.
Disaggregated serving adds ``[models.NAME.disaggregated]`` (``DisaggSpec``) and a
``pool`` key on ``[[hosts]]`` groups, read and checked by ``emulator.scenario.pools``;
both are written back only when set.

Errors are ``ScenarioError``: one line naming the key path and the fix.

Kept as one module: the dataclasses are the format, read top to bottom as one
description of a serving system; reading and checking them lives in
:mod:`emulator.scenario.checks`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import tomli_w

from emulator.scenario import catalog
from emulator.scenario.errors import ScenarioError
from emulator.scenario.hardware import GPUS, MODEL_SHAPES, Accelerator, ModelShape, Roofline
from emulator.scenario.limits import loads_toml
from emulator.scenario.traces import load_trace, replay_times

SHAPES = ("constant", "ramp", "step", "diurnal", "burst")
ARRIVALS = ("poisson", "gamma")
BATCHING = ("static", "continuous")
STANDBYS = ("cold", "replicated")
SERVICES = ("constant", "linear", "lognormal")
FAULT_ACTIONS = ("kill", "restore")
STEP_MODELS = ("linear", "roofline", "table")
#: How a continuous worker fills a step (``worker.scheduler``).
SCHEDULERS = ("mixed", "prefill_first")
#: How the prefix scorer learns what the workers hold (``dispatcher.prefix_index``):
#: by reading their caches, or from the router's own record of where it sent each
#: prefix group (``emulator.sim.policies.prefix_index``).
PREFIX_INDEXES = ("exact", "estimated")
#: The scorers ``policy = "weighted"`` sums (``[dispatcher.scorers]``), and the weights
#: it uses when none are given: the prefix-cache score counts more than the queue.
SCORERS = ("prefix", "queue", "kv_free", "running", "session")
DEFAULT_SCORERS = (("prefix", 3.0), ("queue", 2.0))
#: What ``[autoscaler] metric`` may read: waiting requests per active worker, the
#: KV cache in use (a fraction), running sequences per active worker.
AUTOSCALE_METRICS = ("queue", "kv", "running")
#: ``metric = "slo"``: the SLO planner (``emulator.sim.planner``) sizes the pool to
#: its predicted arrival rate over what one worker serves within its target.
PLANNER_METRIC = "slo"
#: ``kv_cache_tokens = "auto"`` as held in a WorkerSpec: resolved per model by
#: ``Scenario.worker_for`` from its arch and the hardware (a real capacity is >= 1).
AUTO_KV = 0


@dataclass(frozen=True)
class Traffic:
    """Offered load of all models together; ``shape`` moves it between qps and peak_qps."""

    qps: float
    shape: str = "constant"
    peak_qps: float = 0.0
    ramp_s: float = 60.0
    step_at_s: float = 60.0
    period_s: float = 300.0
    burst_at_s: float = 60.0
    burst_s: float = 10.0
    #: A request trace to replay instead of Poisson traffic (a file path); qps and
    #: shape are then ignored. Each row is one request with exactly its sizes.
    trace: str | None = None
    trace_speedup: float = 1.0  # divides the gaps between arrivals
    trace_start_s: float = 0.0  # when the trace's first request arrives
    trace_loop: bool = False  # repeat the trace until the run ends
    #: How fresh arrivals are spaced: "poisson" (exponential gaps) or "gamma" (gamma
    #: gaps whose coefficient of variation is ``arrival_cv``; above 1 is bursty).
    arrival: str = "poisson"
    arrival_cv: float = 1.0

    def rate_at(self, t_s: float) -> float:
        """Offered requests per second at simulated time ``t_s``."""
        low, high = self.qps, self.peak_qps
        if self.shape == "constant":
            return low
        if self.shape == "ramp":
            frac = 1.0 if self.ramp_s <= 0 else min(1.0, max(0.0, t_s / self.ramp_s))
            return low + (high - low) * frac
        if self.shape == "step":
            return high if t_s >= self.step_at_s else low
        if self.shape == "diurnal":
            return low + (high - low) * (1.0 - math.cos(2.0 * math.pi * t_s / self.period_s)) / 2.0
        if self.shape == "burst":
            return high if self.burst_at_s <= t_s < self.burst_at_s + self.burst_s else low
        raise ValueError(f"unknown traffic shape {self.shape!r}")

    def breakpoints(self) -> tuple[float, ...]:
        """Times where ``rate_at`` jumps or bends (for integrating it exactly)."""
        if self.shape == "ramp":
            return (self.ramp_s,)
        if self.shape == "step":
            return (self.step_at_s,)
        if self.shape == "burst":
            return (self.burst_at_s, self.burst_at_s + self.burst_s)
        return ()

    def max_rate(self) -> float:
        """An upper bound of ``rate_at`` over all times (for thinning)."""
        return self.qps if self.shape == "constant" else max(self.qps, self.peak_qps)

    def mean_rate(self, duration_s: float, steps: int = 2000) -> float:
        """Mean offered rate over ``[0, duration_s]`` (midpoint rule; exact for constant)."""
        if self.shape == "constant" or duration_s <= 0:
            return self.qps
        dt = duration_s / steps
        return sum(self.rate_at((i + 0.5) * dt) for i in range(steps)) / steps


def _decimal(value: float | int) -> Fraction:
    """A user number as a Fraction, read by its decimal spelling (0.9 is 9/10)."""
    return Fraction(repr(value)) if isinstance(value, float) else Fraction(value)


@dataclass(frozen=True)
class HardwareSpec:
    """The accelerator every worker's units are: a catalog ``gpu``, or its numbers given
    directly (a number given next to ``gpu`` replaces the catalog's)."""

    gpu: str | None = None
    memory_gb: float | None = None
    hbm_tb_s: float | None = None
    bf16_tflops: float | None = None
    gpu_memory_utilization: float = 0.9  # the share of memory the engine may take
    link_gb_s: float | None = None  # GPU-to-GPU link each way (tensor parallelism)
    collective_us: float | None = None  # latency of one all-reduce

    def accelerator(self) -> Accelerator:
        """The accelerator, catalog values overridden by the numbers given."""
        base = GPUS[self.gpu] if self.gpu is not None else None

        def pick(name: str) -> Fraction:
            given = getattr(self, name)
            if given is not None:
                return _decimal(given)
            assert base is not None, "validation requires gpu or every number"
            return Fraction(getattr(base, name))

        def maybe(name: str) -> Fraction | None:
            given = getattr(self, name)
            if given is not None:
                return _decimal(given)
            return None if base is None else getattr(base, name)

        return Accelerator(
            self.gpu or "custom", pick("memory_gb"), pick("hbm_tb_s"), pick("bf16_tflops"),
            maybe("link_gb_s"), maybe("collective_us"),
        )


@dataclass(frozen=True)
class ArchSpec:
    """A model's shape: a catalog ``model``, or its numbers given directly (a number
    given next to ``model`` replaces the catalog's). ``dtype_bytes`` is the bytes of
    one weight and one KV value (2 for BF16)."""

    model: str | None = None
    params_b: float | None = None
    active_params_b: float | None = None  # a mixture of experts: per token (default: all)
    layers: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    dtype_bytes: float = 2
    hidden_size: int | None = None  # tensor-parallel communication needs it
    # A mixture of experts (``emulator.scenario.moe_checks``): routed experts of a MoE
    # layer, how many a token picks, shared experts, MoE layers, one routed expert's
    # parameters (in billions, one layer), and the GPUs its experts spread over.
    experts: int | None = None
    experts_per_token: int | None = None
    shared_experts: int | None = None
    moe_layers: int | None = None
    expert_params_b: float | None = None
    expert_parallel: int | None = None  # (None: 1, no expert parallelism)
    experts_read: str | None = None  # "all": every step reads every expert, as if dense (None: "hit")

    def shape(self) -> ModelShape:
        """The model shape, catalog values overridden by the numbers given."""
        base = MODEL_SHAPES[self.model] if self.model is not None else None

        def pick(name: str) -> Any:
            given = getattr(self, name)
            if given is not None:
                return _decimal(given) if name.endswith("_b") else given
            assert base is not None, "validation requires model or every number"
            return getattr(base, name)

        params = pick("params_b")
        if self.active_params_b is not None:
            active = _decimal(self.active_params_b)
        elif base is not None and self.params_b is None:
            active = base.active_params_b
        else:
            active = params
        hidden = self.hidden_size if self.hidden_size is not None else (
            None if base is None else base.hidden)

        def moe(name: str) -> Any:
            given = getattr(self, name)
            if given is not None:
                return _decimal(given) if name.endswith("_b") else given
            return getattr(base, name) if base is not None else ModelShape.__dataclass_fields__[name].default

        return ModelShape(
            self.model or "custom", params, active, pick("layers"), pick("kv_heads"),
            pick("head_dim"), hidden, moe("experts"), moe("experts_per_token"),
            moe("shared_experts"), moe("moe_layers"), moe("expert_params_b"),
        )


@dataclass(frozen=True)
class PrefixSpec:
    """Shared prompt prefixes of a model's requests (``[models.NAME.prefixes]``): each
    request draws one of ``groups`` prefixes by a Zipf law of exponent ``zipf_s`` (group
    k, from 1, with weight 1 / k^zipf_s), and the first ``prefix_tokens`` of its prompt
    are that group's."""

    groups: int
    prefix_tokens: int
    zipf_s: float = 1.1


@dataclass(frozen=True)
class ModelSpec:
    """One model: its share of the traffic, its worker size and its request sizes.

    ``tokens`` is the mean prompt; ``output_tokens`` the mean output (lognormal around
    it when ``output_tokens_cv`` > 0). ``worker_overrides`` are the keys of its
    ``[models.NAME.worker]`` table, applied over ``[worker]`` (``Scenario.worker_for``).
    """

    name: str
    share: float
    worker_units: int
    tokens: int
    tokens_cv: float = 0.0
    output_tokens: int = 1
    output_tokens_cv: float = 0.0
    worker_overrides: tuple[tuple[str, Any], ...] = ()
    arch: ArchSpec | None = None  # its shape, for kv_cache_tokens = "auto" and the roofline
    prefixes: PrefixSpec | None = None  # shared prompt prefixes (None: every prompt its own)
    #: Prefill and decode on separate pools of workers (``[models.NAME.disaggregated]``).
    disaggregated: DisaggSpec | None = None


@dataclass(frozen=True)
class DisaggSpec:
    """A model split into a prefill pool and a decode pool (``[models.NAME.disaggregated]``).

    ``prefill_workers`` and ``decode_workers`` name pools: the workers of host groups
    whose ``pool`` key is that name. A request whose prompt has at most
    ``decider_threshold_tokens`` tokens skips the prefill pool and is served whole by a
    decode worker; any other prefills in the prefill pool and its KV moves to a decode
    worker over a link of ``kv_transfer_gb_s`` (GB/s, each decode worker's own). The
    KV's size comes from the model's arch, or ``kv_bytes_per_token`` given here.

    ``decider`` says what the threshold is held against: the prompt's tokens
    (``"prompt"``), or the tokens of it not cached on the prefill worker the policy
    picks (``"uncached"``, with ``worker.prefix_cache``). With
    ``decider_max_prefill_queue`` above 0 a request goes to the prefill pool only while
    fewer requests than that wait in the pool's queues; otherwise the decode pool
    serves it whole. See ``emulator.sim.workers.disaggregated``.

    Pipelined prefill (off while ``pipeline_threshold_tokens`` is 0): the last
    ``pipeline_workers`` workers of the prefill pool form one pipeline group, reserved
    for prompts of more than ``pipeline_threshold_tokens`` tokens; each holds an equal
    share of the layers, a prompt runs through them in chunks of
    ``pipeline_chunk_tokens`` (0: the worker's ``max_batched_tokens``) and each chunk
    crosses each stage boundary in ``pipeline_hop_s`` plus, with
    ``pipeline_link_gb_s``, its activations (chunk tokens x hidden size x dtype bytes)
    over that link. See ``emulator.sim.workers.pipeline``.
    """

    prefill_workers: str
    decode_workers: str
    kv_transfer_gb_s: float = 50.0
    decider_threshold_tokens: int = 0
    kv_bytes_per_token: float | None = None
    decider: str = "prompt"
    decider_max_prefill_queue: int = 0
    pipeline_threshold_tokens: int = 0
    pipeline_workers: int = 0
    pipeline_chunk_tokens: int = 0
    pipeline_hop_s: float = 0.0
    pipeline_link_gb_s: float = 0.0


@dataclass(frozen=True)
class DispatcherSpec:
    """The per-model dispatcher: batching rule, dispatch policy, queue limit, standby."""

    max_batch_tokens: int = 10000
    close_after_s: float | None = None
    policy: str = "round_robin"
    queue_limit: int = 0
    standby: str = "cold"
    failover_s: float = 3.0
    health_check_s: float = 5.0
    #: Under ``policy = "weighted"``: (scorer, weight) pairs of ``[dispatcher.scorers]``.
    scorers: tuple[tuple[str, float], ...] = ()
    #: How arrivals are admitted: ``"queue_limit"`` (only the waiting bound, if any) or
    #: ``"predicted_ttft"`` (refused at once when the predicted TTFT exceeds
    #: ``admission_slack`` x ``slo.ttft_s``; see ``emulator.sim.admission``).
    admission: str = "queue_limit"
    admission_slack: float = 1.0
    #: What the prefix scorer reads: ``"exact"`` (every worker's cache as it is) or
    #: ``"estimated"`` (the router's record of the (worker, prefix group) pairs it
    #: routed, at most ``prefix_index_capacity`` of them, least recently routed
    #: forgotten first, each forgotten ``prefix_index_ttl_s`` after it was last routed).
    prefix_index: str = "exact"
    prefix_index_capacity: int = 4096
    prefix_index_ttl_s: float = 300.0
    #: Seconds between the router's decision and the request's arrival at its worker
    #: (a proxy or sidecar hop; see ``emulator.scenario.router_checks``).
    proxy_hop_s: float = 0.0
    #: Session affinity (``emulator.scenario.session_checks``): a request of a session
    #: (a prefix group) goes to the worker that served the session last, while that
    #: worker is a candidate and the session was seen within ``session_ttl_s``.
    session_affinity: bool = False
    session_ttl_s: float = 600.0


@dataclass(frozen=True)
class WorkerSpec:
    """How a worker serves: ``static`` runs one closed batch at a time for its service
    time (``batch_s``, ``service``, ``service_cv``); ``continuous`` batches at the
    level of iterations with a KV cache, each step lasting

        step_base_s + prefill_token_s * prefill tokens in the step
        + prefill_attn_s * sum over prefill chunks of chunk * (chunk start + chunk)
        + decode_seq_s * decoding sequences
        + kv_token_s * sum of the decoding sequences' context lengths

    or, with ``step_model = "roofline"`` (the model's arch and the hardware set),
    max(memory time, compute time) of the step (``Scenario.roofline_for``), the
    bandwidth and FLOPs scaled by ``mbu`` and ``mfu``. ``kv_cache_tokens = "auto"``
    (``AUTO_KV`` here) is the capacity the GPUs' memory leaves after the weights.
    """

    batch_s: float = 1.5
    service: str = "constant"
    service_cv: float = 0.0
    batching: str = "static"
    max_num_seqs: int = 256  # running sequences per worker
    max_batched_tokens: int = 8192  # tokens per step: one per decoding sequence + chunks
    kv_cache_tokens: int = 200_000  # KV capacity per worker, in tokens
    step_base_s: float = 0.005
    prefill_token_s: float = 2e-5
    prefill_attn_s: float = 0.0
    decode_seq_s: float = 1e-4
    kv_token_s: float = 0.0
    step_model: str = "linear"  # "linear" (the formula above) | "roofline"
    mbu: float = 1.0  # memory-bandwidth utilisation the roofline assumes (1: a floor)
    mfu: float = 1.0  # FLOPs utilisation the roofline assumes (1: a floor)
    step_overhead_s: float = 0.0  # roofline: launching one step's kernels, whatever it holds
    step_table: str | None = None  # table: a named step-time table, a calibration set or a CSV path
    #: Keep the KV blocks of shared prompt prefixes after use (continuous batching):
    #: a request whose prefix is cached skips prefilling it. ``block_tokens`` is the
    #: size of a KV block; only whole blocks are cached.
    prefix_cache: bool = False
    block_tokens: int = 16
    #: Lower KV tiers under the GPU prefix cache (``[[worker.kv_tiers]]``, see
    #: docs/kv-tiers.md), fastest first; empty: evicted blocks are dropped.
    kv_tiers: tuple[KvTierSpec, ...] = ()
    #: Speculative decoding (``[worker.speculative]``, see docs/speculative-decoding.md):
    #: decode-only steps verify drafted tokens; None: every step decodes one token.
    speculative: SpeculativeSpec | None = None
    #: KV is held in blocks of ``kv_block_tokens`` (a request takes whole blocks, as
    #: vLLM's block manager gives them), and an admission must leave ``kv_watermark``
    #: of the blocks free (vLLM's default 1 %); 1 and 0 count KV token by token.
    kv_block_tokens: int = 16
    kv_watermark: float = 0.01
    #: "mixed": a step runs the decoders and prefill chunks together (vLLM v1,
    #: Sarathi-Serve); "prefill_first": while prefill work can run, a step runs only
    #: prefill chunks and the decoders wait (vLLM v0's default scheduler).
    scheduler: str = "mixed"

    @property
    def kv_blocks(self) -> int:
        """The KV cache's whole blocks."""
        return self.kv_cache_tokens // self.kv_block_tokens

    @property
    def kv_watermark_blocks(self) -> int:
        """Blocks an admission must leave free (vLLM: int(watermark x blocks))."""
        return int(self.kv_watermark * self.kv_blocks)

    @property
    def kv_request_limit(self) -> int:
        """The largest prompt + output a worker can serve alone: the blocks an admission
        may use, in tokens (``kv_cache_tokens`` when counting by the token)."""
        return (self.kv_blocks - self.kv_watermark_blocks) * self.kv_block_tokens


@dataclass(frozen=True)
class KvTierSpec:
    """One lower KV tier (``[[worker.kv_tiers]]``): where prefix blocks evicted from
    the tier above go, and what bringing them back costs.

    ``capacity_tokens`` is the tier's size in KV tokens (``capacity_gb`` is turned into
    tokens with the model's KV bytes per token); ``bandwidth_gb_s`` is the rate at which
    its blocks are copied back to the GPU. ``shared``: one pool for all the workers of the
    model (or pool) rather than one per worker.
    """

    name: str
    capacity_tokens: int | None = None
    capacity_gb: float | None = None
    bandwidth_gb_s: float = 25.0
    shared: bool = False


@dataclass(frozen=True)
class SpeculativeSpec:
    """Speculative decoding (``[worker.speculative]``): each decode-only step drafts
    ``draft_tokens`` (k) tokens per sequence and the target model verifies them in one
    pass over k + 1 tokens per sequence; each drafted token is accepted with
    probability ``acceptance_rate`` (alpha, i.i.d.), so a step emits on average
    tau = (1 - alpha^(k+1)) / (1 - alpha) tokens per sequence (the accepted prefix and
    the target's own next token).

    The draft's cost per step is k passes of ``draft_step_s`` + ``draft_seq_s`` x the
    decoding sequences. ``method`` ("draft", "eagle", "mtp") is a label: it sets no
    cost, so the draft's figures are the file's own.
    """

    method: str = "draft"
    draft_tokens: int = 3
    acceptance_rate: float = 0.7
    draft_step_s: float = 0.0
    draft_seq_s: float = 0.0

    @property
    def tokens_per_step(self) -> float:
        """tau: the expected tokens a verification step emits per sequence."""
        a, k = self.acceptance_rate, self.draft_tokens
        return float(k + 1) if a == 1 else (1.0 - a ** (k + 1)) / (1.0 - a)

    def draft_s(self, n: float) -> float:
        """The draft's k passes for ``n`` decoding sequences."""
        return self.draft_tokens * (self.draft_step_s + self.draft_seq_s * n)


@dataclass(frozen=True)
class ClientSpec:
    """Synchronous clients: how long they wait and how often they re-send."""

    timeout_s: float | None = 60.0
    retries: int = 0
    retry_backoff_s: float = 1.0


@dataclass(frozen=True)
class GatewaySpec:
    """The gateway's per-key rate limit (0: off) and how its instances count."""

    instances: int = 2
    rate_limit_qps: float = 0.0
    keys: int = 50
    shared_counter: bool = True


@dataclass(frozen=True)
class SloSpec:
    """Service-level objectives of token-level serving (None: no objective)."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    #: A request meets it if none of its gaps between consecutive output tokens is
    #: longer (the time between tokens, TBT, that streaming users see).
    tbt_s: float | None = None

    def any(self) -> bool:
        """Whether any objective is set."""
        return self.ttft_s is not None or self.tpot_s is not None or self.tbt_s is not None


@dataclass(frozen=True)
class WorkerSlot:
    """One worker on a host: its model and the first of its adjacent units."""

    model: str
    first_unit: int

    def spelling(self) -> str:
        """The file spelling, ``MODEL@FIRST_UNIT``."""
        return f"{self.model}@{self.first_unit}"


@dataclass(frozen=True)
class HostGroup:
    """``count`` identical hosts of ``units`` units carrying the same workers."""

    count: int
    units: int
    workers: tuple[WorkerSlot, ...]
    #: The named pool the group's workers of a disaggregated model belong to (None: none).
    pool: str | None = None


@dataclass(frozen=True)
class Fault:
    """At ``at_s``, ``action`` (kill or restore) applied to ``target``."""

    at_s: float
    action: str
    target: str

    def command(self) -> str:
        """The live-command spelling, e.g. ``kill host:2``."""
        return f"{self.action} {self.target}"


@dataclass(frozen=True)
class AutoscalerSpec:
    """``[autoscaler]``: one model's worker count follows a metric, as a Kubernetes HPA
    does: every ``interval_s`` the desired count is ceil(active workers x metric /
    target), clamped to [min_workers, max_workers] (a scale-down goes only as far as
    the highest count wanted over the last ``stabilization_s``); a new worker takes free units of a
    live host and serves ``warmup_s`` later (it loads its weights first); a worker
    scaled down takes no new requests and gives its units back once its requests are
    done. ``cooldown_s`` separates two scale actions. See ``emulator.sim.autoscaler``.

    ``metric = "slo"`` is the SLO planner (``emulator.sim.planner``): it predicts the
    pool's arrival rate ``horizon_s`` ahead (``predictor`` over the rates of the last
    ``window_s``) and wants ceil(predicted / per-worker rate) workers, the per-worker
    rate given (``per_worker_qps``) or worked out from a target: ``target_ttft_s``
    (prefill or whole pool) or ``target_tbt_s`` (decode pool). ``target`` is then 0.
    """

    model: str
    metric: str
    target: float
    min_workers: int
    max_workers: int
    interval_s: float = 15.0
    warmup_s: float = 60.0
    cooldown_s: float = 0.0
    stabilization_s: float = 0.0
    per_worker_qps: float | None = None
    target_ttft_s: float | None = None
    target_tbt_s: float | None = None
    predictor: str = "moving_average"
    window_s: float = 60.0
    #: None: ``warmup_s``.
    horizon_s: float | None = None
    #: The load's period, read by ``predictor = "seasonal"`` only.
    season_s: float | None = None

    @property
    def lead_s(self) -> float:
        """How far ahead the planner predicts: ``horizon_s``, else ``warmup_s``."""
        return self.warmup_s if self.horizon_s is None else self.horizon_s


@dataclass(frozen=True)
class PoolSpec:
    """``[pools.NAME]``: one pool of a disaggregated model (the workers of the host
    groups whose ``pool`` is NAME) with its own routing, admission and scaling. Each
    key left out is the fleet's: ``policy``, ``queue_limit``, ``scorers``, ``admission``
    and ``admission_slack`` and the prefix index keys default to ``[dispatcher]``'s; ``autoscaler`` (the keys of
    ``[autoscaler]``, ``model`` optional) scales the pool's workers on the pool's
    hosts (None: not scaled)."""

    name: str
    policy: str | None = None
    queue_limit: int | None = None
    scorers: tuple[tuple[str, float], ...] = ()
    autoscaler: AutoscalerSpec | None = None
    admission: str | None = None
    admission_slack: float | None = None
    #: The pool's own ``prefix_index``, ``prefix_index_capacity`` and
    #: ``prefix_index_ttl_s`` (None: ``[dispatcher]``'s).
    prefix_index: str | None = None
    prefix_index_capacity: int | None = None
    prefix_index_ttl_s: float | None = None
    #: The pool's own ``session_affinity`` and ``session_ttl_s`` (None: ``[dispatcher]``'s).
    session_affinity: bool | None = None
    session_ttl_s: float | None = None


@dataclass(frozen=True)
class Scenario:
    """A whole scenario: the system, its traffic, its faults and the run's length."""

    name: str
    duration_s: float
    seed: int
    sample_s: float
    traffic: Traffic
    models: dict[str, ModelSpec]
    dispatcher: DispatcherSpec = field(default_factory=DispatcherSpec)
    worker: WorkerSpec = field(default_factory=WorkerSpec)
    client: ClientSpec = field(default_factory=ClientSpec)
    gateway: GatewaySpec = field(default_factory=GatewaySpec)
    hosts: tuple[HostGroup, ...] = ()
    faults: tuple[Fault, ...] = ()
    slo: SloSpec = field(default_factory=SloSpec)
    hardware: HardwareSpec | None = None
    autoscaler: AutoscalerSpec | None = None
    #: ``[pools.NAME]`` tables: a disaggregated model's pools with their own routing,
    #: admission or scaling (a pool without a table uses ``[dispatcher]``'s).
    pools: tuple[PoolSpec, ...] = ()
    #: What ``with_overrides`` changed beyond the keys it was given (not part of the
    #: scenario's data: ``to_dict`` leaves it out).
    notes: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any], max_requests: int | None | object = ...) -> Scenario:
        """Build and validate a scenario from its dict form (TOML spelling).

        ``max_requests`` caps the simulated requests (default
        ``emulator.DEFAULT_REQUEST_BUDGET``; None: no cap). Raises ScenarioError.
        """
        # cycle: checks imports this module's specs at load time
        from emulator.scenario.checks import parse_scenario

        return parse_scenario(data, _budget(max_requests))

    def to_dict(self) -> dict[str, Any]:
        """The JSON-safe dict form, in the file's spelling; ``from_dict`` round-trips it."""
        d = self.dispatcher
        return {
            "name": self.name,
            "duration_s": self.duration_s,
            "seed": self.seed,
            "sample_s": self.sample_s,
            "traffic": _without_defaults(self.traffic, _NEW_TRAFFIC),
            "models": {name: _model_dict(m) for name, m in self.models.items()},
            "dispatcher": {
                **{k: v for k, v in _without_defaults(d, _NEW_DISPATCHER).items() if k != "scorers"},
                "close_after_s": "never" if d.close_after_s is None else d.close_after_s,
                **({"scorers": dict(d.scorers)} if d.scorers else {}),
            },
            "worker": _worker_dict(self.worker),
            "client": {
                **_fields(self.client),
                "timeout_s": "none" if self.client.timeout_s is None else self.client.timeout_s,
            },
            "gateway": _fields(self.gateway),
            "hosts": [
                {
                    "count": h.count,
                    "units": h.units,
                    "workers": [w.spelling() for w in h.workers],
                    **({"pool": h.pool} if h.pool is not None else {}),
                }
                for h in self.hosts
            ],
            "faults": [{"at_s": f.at_s, f.action: f.target} for f in self.faults],
            **({"slo": _without_defaults(self.slo, ("ttft_s", "tpot_s", "tbt_s"))} if self.slo.any() else {}),
            **({"hardware": _set_fields(self.hardware)} if self.hardware is not None else {}),
            **({"autoscaler": _scaler_fields(self.autoscaler)} if self.autoscaler is not None else {}),
            **({"pools": {p.name: _pool_dict(p) for p in self.pools}} if self.pools else {}),
        }

    def to_toml(self) -> str:
        """The scenario as TOML text that ``load_scenario`` reads back to an equal scenario."""
        return tomli_w.dumps(self.to_dict())

    def with_overrides(
        self, overrides: list[str] | tuple[str, ...], max_requests: int | None | object = ...
    ) -> Scenario:
        """A copy with ``KEY=VALUE`` overrides applied by dotted path.

        Paths look like ``traffic.qps``, ``models.small.share`` or ``hosts[0].count``;
        values are TOML values (``10000``, ``"pull"``, ``[\"big@0\"]``), or bare words
        taken as strings (``pull``, ``never``). The result is validated again.
        A new ``dispatcher.policy`` that sums no scorers drops a ``[dispatcher.scorers]``
        table, with a note (``notes``) saying so; so does a new ``pools.NAME.policy``
        for that pool's scorers. One that scores no prefix drops the prefix index keys
        (``dispatcher.prefix_index`` and its capacity and TTL) the same way.
        """
        # cycle: overrides imports the scenario package, which loads this module
        from emulator.scenario.overrides import apply_overrides

        data = apply_overrides(self.to_dict(), overrides)
        notes: list[str] = []
        dispatcher = data.get("dispatcher")
        sets_policy = any(o.split("=", 1)[0].strip() == "dispatcher.policy" for o in overrides)
        if sets_policy and isinstance(dispatcher, dict) and dispatcher.get("scorers"):
            policy = dispatcher.get("policy")
            if policy in catalog.POLICIES and policy not in catalog.policies_with("uses_scorers"):
                names = ", ".join(dispatcher.pop("scorers"))
                notes.append(f'dispatcher.scorers ({names}) dropped: policy "{policy}" uses no scorers')
        if sets_policy and isinstance(dispatcher, dict):
            # A policy that scores no prefix has no use for the router's prefix index.
            policy = dispatcher.get("policy")
            index_keys = [k for k in _INDEX_KEYS if k in dispatcher]
            if index_keys and policy in catalog.POLICIES and policy not in catalog.policies_with("needs_prefix_caches"):
                for k in index_keys:
                    dispatcher.pop(k)
                notes.append(f'dispatcher.{", ".join(index_keys)} dropped: policy "{policy}" scores no prefix')
        pools = data.get("pools")
        if sets_policy and isinstance(dispatcher, dict) and isinstance(pools, dict):
            # Pools without a policy of their own take the new one: their scorers too.
            policy = dispatcher.get("policy")
            if policy in catalog.POLICIES and policy not in catalog.policies_with("uses_scorers"):
                for name, table in pools.items():
                    if isinstance(table, dict) and table.get("scorers") and "policy" not in table:
                        names = ", ".join(table.pop("scorers"))
                        notes.append(f'pools.{name}.scorers ({names}) dropped: policy "{policy}" uses no scorers')
        for o in overrides:
            key = o.split("=", 1)[0].strip()
            parts = key.split(".")
            if len(parts) != 3 or parts[0] != "pools" or parts[2] != "policy" or not isinstance(pools, dict):
                continue
            table = pools.get(parts[1])
            if isinstance(table, dict) and table.get("scorers"):
                policy = table.get("policy")
                if policy in catalog.POLICIES and policy not in catalog.policies_with("uses_scorers"):
                    names = ", ".join(table.pop("scorers"))
                    notes.append(f'pools.{parts[1]}.scorers ({names}) dropped: policy "{policy}" uses no scorers')
        scenario = Scenario.from_dict(data, max_requests)
        return replace(scenario, notes=tuple(notes)) if notes else scenario

    def expanded_hosts(self) -> list[tuple[int, int, tuple[WorkerSlot, ...]]]:
        """Every host as ``(host_index, units, workers)``, groups expanded in file order."""
        out: list[tuple[int, int, tuple[WorkerSlot, ...]]] = []
        for group in self.hosts:
            for _ in range(group.count):
                out.append((len(out), group.units, group.workers))
        return out

    def worker_for(self, model: str) -> WorkerSpec:
        """The worker spec of ``model``: ``[worker]`` with its ``[models.NAME.worker]``
        overrides applied."""
        spec = self._raw_worker(model)
        if spec.kv_cache_tokens == AUTO_KV:
            roof = self.roofline_for(model)
            assert roof is not None, "validation requires arch and hardware for auto"
            spec = replace(spec, kv_cache_tokens=roof.kv_capacity_tokens)
        return spec

    def kv_is_auto(self, model: str) -> bool:
        """Whether ``model``'s KV capacity is ``"auto"`` (sized from its GPUs)."""
        return self._raw_worker(model).kv_cache_tokens == AUTO_KV

    def _raw_worker(self, model: str) -> WorkerSpec:
        overrides = self.models[model].worker_overrides
        return replace(self.worker, **dict(overrides)) if overrides else self.worker

    def roofline_for(self, model: str) -> Roofline | None:
        """``model``'s shape on its worker's units of the scenario's hardware (None
        unless both its arch and ``[hardware]`` are set)."""
        spec = self.models[model]
        if spec.arch is None or self.hardware is None:
            return None
        w = self._raw_worker(model)
        return Roofline(
            gpu=self.hardware.accelerator(),
            shape=spec.arch.shape(),
            units=spec.worker_units,
            dtype_bytes=_decimal(spec.arch.dtype_bytes),
            memory_utilization=_decimal(self.hardware.gpu_memory_utilization),
            mbu=_decimal(w.mbu),
            mfu=_decimal(w.mfu),
            step_overhead_s=_decimal(w.step_overhead_s),
            expert_parallel=spec.arch.expert_parallel or 1,
            experts_read=spec.arch.experts_read or "hit",
        )

    def batching_of(self, model: str) -> str:
        """``static`` or ``continuous``: how the workers of ``model`` batch."""
        return self.worker_for(model).batching

    def worker_count(self, model: str) -> int:
        """How many workers of ``model`` the hosts carry."""
        return sum(g.count * sum(1 for w in g.workers if w.model == model) for g in self.hosts)

    def expected_requests(self) -> float:
        """Fresh arrivals expected over the run, times one plus the client's retries."""
        t = self.traffic
        if t.trace is not None:

            _, times = replay_times(
                load_trace(t.trace),
                speedup=t.trace_speedup,
                start_s=t.trace_start_s,
                loop=t.trace_loop,
                until_s=self.duration_s,
            )
            # The run offers arrivals before its end, not one at the end itself.
            fresh = float((times < self.duration_s).sum())
        else:
            fresh = self.traffic.mean_rate(self.duration_s) * self.duration_s
        return fresh * (1 + self.client.retries)

    def pool(self, name: str | None) -> PoolSpec | None:
        """The ``[pools.NAME]`` table of pool ``name`` (None: it has none)."""
        for p in self.pools:
            if p.name == name:
                return p
        return None

    def pool_policy(self, name: str | None) -> str:
        """The routing policy of pool ``name``: its own, else ``dispatcher.policy``."""
        p = self.pool(name)
        return p.policy if p is not None and p.policy is not None else self.dispatcher.policy

    def pool_queue_limit(self, name: str | None) -> int:
        """The waiting bound of pool ``name``: its own, else ``dispatcher.queue_limit``."""
        p = self.pool(name)
        return p.queue_limit if p is not None and p.queue_limit is not None else self.dispatcher.queue_limit

    def pool_admission(self, name: str | None) -> tuple[str, float]:
        """The admission rule of pool ``name`` and its slack: its own, else
        ``[dispatcher]``'s."""
        p, d = self.pool(name), self.dispatcher
        rule = p.admission if p is not None and p.admission is not None else d.admission
        slack = p.admission_slack if p is not None and p.admission_slack is not None else d.admission_slack
        return rule, slack

    def pool_scorers(self, name: str | None) -> tuple[tuple[str, float], ...]:
        """The scorer weights of pool ``name``: its own, else ``dispatcher.scorers``."""
        p = self.pool(name)
        return p.scorers if p is not None and p.scorers else self.dispatcher.scorers

    def pool_prefix_index(self, name: str | None) -> tuple[str, int, float]:
        """The prefix index of pool ``name`` (kind, capacity, TTL): each key its own,
        else ``[dispatcher]``'s."""
        p, d = self.pool(name), self.dispatcher
        own = p if p is not None else PoolSpec("")
        return (
            own.prefix_index if own.prefix_index is not None else d.prefix_index,
            own.prefix_index_capacity if own.prefix_index_capacity is not None else d.prefix_index_capacity,
            own.prefix_index_ttl_s if own.prefix_index_ttl_s is not None else d.prefix_index_ttl_s,
        )

    def pool_session(self, name: str | None) -> tuple[bool, float]:
        """Session affinity of pool ``name`` (on, TTL): each key its own, else
        ``[dispatcher]``'s."""
        p, d = self.pool(name), self.dispatcher
        own = p if p is not None else PoolSpec("")
        return (
            own.session_affinity if own.session_affinity is not None else d.session_affinity,
            own.session_ttl_s if own.session_ttl_s is not None else d.session_ttl_s,
        )

    def autoscalers(self) -> list[tuple[str | None, AutoscalerSpec]]:
        """Every autoscaler: ``(None, [autoscaler])`` first, then ``(pool, spec)`` of each
        ``[pools.NAME.autoscaler]``."""
        out: list[tuple[str | None, AutoscalerSpec]] = []
        if self.autoscaler is not None:
            out.append((None, self.autoscaler))
        out.extend((p.name, p.autoscaler) for p in self.pools if p.autoscaler is not None)
        return out

    def replace(self, **changes: Any) -> Scenario:
        """A copy with top-level fields replaced (not re-validated)."""
        return replace(self, **changes)


def _pool_dict(p: PoolSpec) -> dict[str, Any]:
    """A ``[pools.NAME]`` table in the file's spelling: only the keys it sets."""
    out: dict[str, Any] = {}
    if p.policy is not None:
        out["policy"] = p.policy
    if p.queue_limit is not None:
        out["queue_limit"] = p.queue_limit
    if p.scorers:
        out["scorers"] = dict(p.scorers)
    if p.autoscaler is not None:
        out["autoscaler"] = _scaler_fields(p.autoscaler)
    if p.admission is not None:
        out["admission"] = p.admission
    if p.admission_slack is not None:
        out["admission_slack"] = p.admission_slack
    for key in (*_INDEX_KEYS, "session_affinity", "session_ttl_s"):
        if getattr(p, key) is not None:
            out[key] = getattr(p, key)
    return out


def _fields(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__dataclass_fields__}


#: The planner's keys: written back only when not at their default, so reactive
#: autoscalers keep their exact spelling.
_PLANNER_DEFAULTS = {"per_worker_qps": None, "target_ttft_s": None, "target_tbt_s": None,
                     "predictor": "moving_average", "window_s": 60.0, "horizon_s": None,
                     "season_s": None}


def _scaler_fields(spec: AutoscalerSpec) -> dict[str, Any]:
    # The planner has no reactive target (it is 0 and the table leaves it out).
    return {k: v for k, v in _fields(spec).items()
            if (k not in _PLANNER_DEFAULTS or v != _PLANNER_DEFAULTS[k])
            and not (k == "target" and spec.metric == PLANNER_METRIC)}


#: Keys added for token-level serving: written back only when set to something else
#: than their default, so older scenarios keep their exact spelling.
_NEW_TRAFFIC = (
    "trace", "trace_speedup", "trace_start_s", "trace_loop", "arrival", "arrival_cv",
)
_NEW_WORKER = (
    "batching",
    "max_num_seqs",
    "max_batched_tokens",
    "kv_cache_tokens",
    "step_base_s",
    "prefill_token_s",
    "prefill_attn_s",
    "decode_seq_s",
    "kv_token_s",
    "step_model",
    "mbu",
    "mfu",
    "step_overhead_s",
    "step_table",
    "prefix_cache",
    "block_tokens",
    "kv_tiers",
    "speculative",
    "kv_block_tokens",
    "kv_watermark",
    "scheduler",
)
_NEW_MODEL = ("output_tokens", "output_tokens_cv")
_INDEX_KEYS = ("prefix_index", "prefix_index_capacity", "prefix_index_ttl_s")
_NEW_DISPATCHER = ("admission", "admission_slack", *_INDEX_KEYS, "proxy_hop_s", "session_affinity",
                   "session_ttl_s")


def _set_fields(obj: Any) -> dict[str, Any]:
    """``obj``'s fields that are set (not None)."""
    return {k: v for k, v in _fields(obj).items() if v is not None}


def _auto_spelling(values: dict[str, Any]) -> dict[str, Any]:
    """Worker keys as the file spells them: ``AUTO_KV`` is ``"auto"``; each KV tier a
    table of its set keys."""
    if values.get("kv_cache_tokens") == AUTO_KV:
        values = {**values, "kv_cache_tokens": "auto"}
    if "kv_tiers" in values:
        values = {**values, "kv_tiers": [_set_fields(t) for t in values["kv_tiers"]]}
    if values.get("speculative") is not None:
        values = {**values, "speculative": _fields(values["speculative"])}
    return values


def _worker_dict(w: WorkerSpec) -> dict[str, Any]:
    return _auto_spelling(_without_defaults(w, _NEW_WORKER))


def _without_defaults(obj: Any, optional: tuple[str, ...]) -> dict[str, Any]:
    """``obj``'s fields, less the ``optional`` ones left at their default."""
    fields = obj.__dataclass_fields__
    return {
        name: getattr(obj, name)
        for name in fields
        if name not in optional or getattr(obj, name) != fields[name].default
    }


def _model_dict(m: ModelSpec) -> dict[str, Any]:
    out = {
        k: v
        for k, v in _without_defaults(m, _NEW_MODEL).items()
        if k not in ("name", "worker_overrides", "arch", "prefixes", "disaggregated")
    }
    if m.worker_overrides:
        out["worker"] = _auto_spelling(dict(m.worker_overrides))
    if m.arch is not None:
        out["arch"] = _set_fields(m.arch)
    if m.prefixes is not None:
        out["prefixes"] = _fields(m.prefixes)
    if m.disaggregated is not None:
        # (The pipeline's keys are written only when set: a split written before they
        # existed reads back as it was.)
        fields = DisaggSpec.__dataclass_fields__
        out["disaggregated"] = {
            k: v for k, v in _set_fields(m.disaggregated).items()
            if not k.startswith("pipeline_") or v != fields[k].default
        }
    return out


def _budget(max_requests: int | None | object) -> int | None:
    if max_requests is ...:
        # cycle: the emulator package imports the scenario package, which loads this module
        from emulator import DEFAULT_REQUEST_BUDGET

        return DEFAULT_REQUEST_BUDGET
    return max_requests  # type: ignore[return-value]


def load_scenario(path_or_text: str | Path, max_requests: int | None | object = ...) -> Scenario:
    """Load and validate a scenario from a file path, TOML text, or a preset name.

    A ``Path`` or a string naming an existing file is read; a string with a newline or
    an ``=`` is TOML text; any other string is a preset name. Raises ScenarioError.
    """
    source = "scenario"
    if isinstance(path_or_text, Path):
        text, source = _read(path_or_text), path_or_text.name
    elif "\n" in path_or_text or "=" in path_or_text:
        text = path_or_text
    elif Path(path_or_text).is_file():
        text, source = _read(Path(path_or_text)), Path(path_or_text).name
    elif path_or_text.endswith(".toml") or "/" in path_or_text:
        raise ScenarioError(path_or_text, "no such file", "give a scenario file or a preset name")
    else:
        # cycle: presets imports the scenario package, which loads this module
        from emulator.scenario.presets import load_preset

        return load_preset(path_or_text, max_requests=max_requests)
    return Scenario.from_dict(loads_toml(text, source=source), max_requests)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError(
            str(path), "no such file", "give a scenario file or a preset name"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(str(path), f"cannot read the file ({exc})") from None
