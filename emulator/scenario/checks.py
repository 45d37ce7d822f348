"""Reading a scenario's dict form into typed dataclasses, checking every key on the way.

Each check raises ``ScenarioError`` with the key path and the fix, so a user sees one
line such as ``dispatcher.policy: "rr" is not one of round_robin, pull, least_loaded``.

Kept as one module: every table's checks share the key-path helpers (``_Table``,
``_show``) and run in the order of the format, so a scenario's first error is the first
one a reader meets; the tables only some scenarios have (pools, prefixes, the
autoscaler) have their own modules.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Any

from emulator.scenario import (
    admission_checks,
    catalog,
    kv_tier_checks,
    moe_checks,
    pipeline_checks,
    prefix_checks,
    router_checks,
    session_checks,
    speculative_checks,
)
from emulator.scenario.errors import ScenarioError
from emulator.scenario.hardware import GPUS, MODEL_SHAPES
from emulator.scenario.limits import (
    MAX_HOST_UNITS,
    MAX_MODELS,
    MAX_TOKENS,
    MAX_WORKERS,
    check_nesting,
)
from emulator.scenario.pools import (
    check_disaggregated,
    kv_bytes_per_token,
    parse_disaggregated,
    parse_pool,
    parse_pools,
    split_pools,
)
from emulator.scenario.specs import (
    ARRIVALS,
    AUTO_KV,
    BATCHING,
    FAULT_ACTIONS,
    SCHEDULERS,
    SERVICES,
    SHAPES,
    STANDBYS,
    STEP_MODELS,
    ArchSpec,
    ClientSpec,
    DispatcherSpec,
    Fault,
    GatewaySpec,
    HardwareSpec,
    HostGroup,
    ModelSpec,
    Scenario,
    SloSpec,
    Traffic,
    WorkerSlot,
    WorkerSpec,
)
from emulator.scenario.step_table import NAMED_TABLES, load_step_table
from emulator.scenario.traces import load_trace, replay_times

_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_SLOT = re.compile(r"^([^@\s]+)@(\d+)$")
#: Frames are kept by live runs and the web app; more than this is a mistake.
MAX_FRAMES = 200_000
#: The engine keeps one rate-limit counter per key (and instance); more is a mistake.
MAX_RATE_COUNTERS = 10_000_000
#: Hosts in one scenario (the engine holds each host and worker); more is a mistake.
MAX_HOSTS = 100_000
#: Largest gamma arrival cv: beyond it most gaps round to 0 (simultaneous arrivals).
MAX_ARRIVAL_CV = 10.0
#: Shortest retry backoff the engine honours (its arrival chunks are at least this long).
MIN_BACKOFF_S = 0.01


class _Table:
    """A TOML table being read: typed getters that know their key path."""

    def __init__(self, data: Any, path: str, known: tuple[str, ...]) -> None:
        if not isinstance(data, dict):
            raise ScenarioError(path, f"must be a table, not {_kind(data)}")
        for key in data:
            if key not in known:
                raise ScenarioError(
                    _join(path, key), "unknown key", f"known keys here: {', '.join(known)}"
                )
        self.data, self.path = data, path

    def key(self, name: str) -> str:
        return _join(self.path, name)

    def has(self, name: str) -> bool:
        return name in self.data

    def raw(self, name: str, default: Any = ...) -> Any:
        if name not in self.data:
            if default is ...:
                raise ScenarioError(self.key(name), "missing", "this key is required")
            return default
        return self.data[name]

    def number(
        self, name: str, default: Any = ..., *, low: float | None = None, positive: bool = False
    ) -> float:
        value = self.raw(name, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ScenarioError(self.key(name), f"{_show(value)} is not a number")
        if not math.isfinite(value):
            raise ScenarioError(self.key(name), f"{_show(value)} is not a finite number")
        if positive and value <= 0:
            raise ScenarioError(self.key(name), f"must be greater than 0, not {_show(value)}")
        if low is not None and value < low:
            raise ScenarioError(
                self.key(name), f"must be at least {_show(low)}, not {_show(value)}"
            )
        return float(value)

    def integer(
        self, name: str, default: Any = ..., *, low: int | None = None, high: int | None = None
    ) -> int:
        value = self.raw(name, default)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ScenarioError(self.key(name), f"{_show(value)} is not a whole number")
        if low is not None and value < low:
            raise ScenarioError(self.key(name), f"must be at least {low}, not {value}")
        if high is not None and value > high:
            raise ScenarioError(
                self.key(name), f"{value:,} is over the limit of {high:,}",
                f"give at most {high:,}",
            )
        return value

    def text(self, name: str, default: Any = ...) -> str:
        value = self.raw(name, default)
        if not isinstance(value, str):
            raise ScenarioError(self.key(name), f"{_show(value)} is not a string")
        return value

    def choice(self, name: str, options: tuple[str, ...], default: Any = ...) -> str:
        value = self.text(name, default)
        if value not in options:
            raise ScenarioError(self.key(name), f'"{value}" is not one of {", ".join(options)}')
        return value

    def flag(self, name: str, default: Any = ...) -> bool:
        value = self.raw(name, default)
        if not isinstance(value, bool):
            raise ScenarioError(self.key(name), f"{_show(value)} is not true or false")
        return value

    def seconds_or(self, name: str, word: str, default: Any = ...) -> float | None:
        """A positive number of seconds, or ``word`` ("never"/"none") meaning no limit."""
        value = self.raw(name, default)
        if value is None or value == word:
            return None
        if isinstance(value, str):
            raise ScenarioError(self.key(name), f'"{value}" is not a number of seconds or "{word}"')
        return self.number(name, default, positive=True)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _kind(value: Any) -> str:
    return {dict: "a table", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "a number"
    )


def _show(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict | list):
        return _kind(value)
    return str(value)


_TOP = (
    "name",
    "duration_s",
    "seed",
    "sample_s",
    "traffic",
    "models",
    "dispatcher",
    "worker",
    "client",
    "gateway",
    "hosts",
    "faults",
    "slo",
    "hardware",
    "autoscaler",
    "pools",
)


def parse_scenario(data: Any, max_requests: int | None) -> Scenario:
    """Turn a scenario dict into a validated ``Scenario`` (raises ScenarioError)."""
    check_nesting(data)
    top = _Table(data, "", _TOP)
    duration_s = top.number("duration_s", 60.0, positive=True)
    sample_s = top.number("sample_s", 1.0, positive=True)
    if duration_s / sample_s > MAX_FRAMES:
        raise ScenarioError(
            "sample_s",
            f"{_show(sample_s)} gives {math.ceil(duration_s / sample_s):,} frames, "
            f"more than {MAX_FRAMES:,}",
            "raise sample_s or shorten duration_s",
        )
    traffic = _traffic(_Table(top.raw("traffic"), "traffic", tuple(Traffic.__dataclass_fields__)))
    worker = _worker(top.raw("worker", {}))
    models = _models(top.raw("models"), worker)
    raw_dispatcher = top.raw("dispatcher", {})
    dispatcher = _dispatcher(raw_dispatcher)
    batching = {name: _resolved(worker, m).batching for name, m in models.items()}
    hardware = _hardware(top.raw("hardware")) if top.has("hardware") else None
    for m in models.values():
        resolved = _resolve_hardware(m, _resolved(worker, m), hardware)
        moe_checks.check_expert_parallel(m, resolved, hardware)
        if batching[m.name] != "static":
            _check_continuous(m, resolved)
        elif resolved.speculative is not None:
            where = "worker" if "speculative" not in dict(m.worker_overrides) else f"models.{m.name}.worker"
            speculative_checks.check_static(resolved, where)
        elif resolved.step_table is not None:
            where = "worker" if "step_table" not in dict(m.worker_overrides) else f"models.{m.name}.worker"
            raise ScenarioError(
                f"{where}.step_table",
                f"applies to continuous batching, but model {m.name} batches statically",
                "set batching = \"continuous\" and step_model = \"table\", or remove step_table",
            )
        elif resolved.step_model != "linear":
            where = "worker" if "step_model" not in dict(m.worker_overrides) else f"models.{m.name}.worker"
            raise ScenarioError(
                f"{where}.step_model",
                f"applies to continuous batching, but model {m.name} batches statically",
                "set batching = \"continuous\" for it, or remove step_model",
            )
        elif m.tokens > dispatcher.max_batch_tokens and m.tokens_cv == 0:
            raise ScenarioError(
                f"models.{m.name}.tokens",
                f"{m.tokens} is more than dispatcher.max_batch_tokens ({dispatcher.max_batch_tokens})",
                "a request must fit in a batch",
            )
    if "static" not in batching.values() and isinstance(raw_dispatcher, dict):
        for key in ("max_batch_tokens", "close_after_s"):
            default = DispatcherSpec.__dataclass_fields__[key].default
            if key in raw_dispatcher and getattr(dispatcher, key) != default:
                raise ScenarioError(
                    f"dispatcher.{key}",
                    "does not apply to continuous batching (each request is routed on its "
                    "own and workers batch per step)",
                    "remove it, or set worker.max_batched_tokens for the step's token budget",
                )
    _check_trace_models(traffic, models)
    by_model = {n: _resolved(worker, m) for n, m in models.items()}
    prefix_checks.check_scenario(models, by_model, dispatcher, traffic)
    kv_tier_checks.check_scenario(
        models, by_model, {n: kv_bytes_per_token(m) for n, m in models.items()}
    )
    client = _client(top.raw("client", {}))
    gateway = _gateway(top.raw("gateway", {}))
    hosts = _hosts(top.raw("hosts"), models)
    check_disaggregated(models, batching, dispatcher, hosts)
    pools = parse_pools(top.raw("pools", None), models, batching, dispatcher, hosts)
    pipeline_checks.check_scenario(
        models, hosts, pools, dispatcher, {n: w.max_batched_tokens for n, w in by_model.items()}
    )
    for name, m in models.items():
        split = m.disaggregated
        if split is not None and split.decider == "uncached" and not _resolved(worker, m).prefix_cache:
            raise ScenarioError(
                f"models.{name}.disaggregated.decider",
                f'"uncached" counts the prompt tokens not cached on the prefill worker, but model '
                f"{name} has no prefix cache",
                f'set prefix_cache = true in [worker] or [models.{name}.worker], or decider = "prompt"',
            )
    router_checks.check(dispatcher, batching, pools)
    session_checks.check(dispatcher, pools, models, batching, traffic.trace is not None)
    slo = _slo(top.raw("slo", {}))
    admission_checks.check(
        dispatcher.admission,
        isinstance(raw_dispatcher, dict) and "admission_slack" in raw_dispatcher and dispatcher.admission_slack != 1.0,
        pools, models, batching, slo,
    )
    scenario = Scenario(
        name=top.text("name", "scenario"),
        duration_s=duration_s,
        seed=top.integer("seed", 1, low=0),
        sample_s=sample_s,
        traffic=traffic,
        models=models,
        dispatcher=dispatcher,
        worker=worker,
        client=client,
        gateway=gateway,
        hosts=hosts,
        faults=(),
        slo=slo,
        hardware=hardware,
        pools=pools,
    )
    if top.has("autoscaler"):
        # cycle: autoscale_checks imports this module's _show and _Table at load time
        from emulator.scenario.autoscale_checks import parse_autoscaler

        raw_scaler = top.raw("autoscaler")
        named = raw_scaler.get("model") if isinstance(raw_scaler, dict) else None
        scaled = named if named is not None else next(iter(models)) if len(models) == 1 else None
        if isinstance(scaled, str) and scaled in models and models[scaled].disaggregated is not None:
            # Refused before its other keys are read: it is the table's place that is wrong.
            mine = [p for p, (m, _) in split_pools(models).items() if m == scaled]
            raise ScenarioError(
                "autoscaler.model",
                f"{scaled} is split into pools {' and '.join(mine)}, and each pool is scaled "
                "by its own autoscaler",
                f"move the table to [pools.{mine[0]}.autoscaler] (and/or "
                f"[pools.{mine[-1]}.autoscaler]), or scale another model",
            )
        scenario = scenario.replace(
            autoscaler=parse_autoscaler(raw_scaler, models, batching, hosts)
        )
    faults = _faults(top.raw("faults", []), scenario)
    scenario = scenario.replace(faults=faults)
    if max_requests is not None:
        expected = scenario.expected_requests()
        if expected > max_requests:
            raise ScenarioError(
                "duration_s",
                f"the run would simulate about {expected:,.0f} requests (traffic x duration_s x "
                f"(1 + client.retries)), over the run budget of {max_requests:,}",
                "shorten duration_s or lower traffic.qps",
            )
    return scenario


def _traffic(t: _Table) -> Traffic:
    qps = t.number("qps", low=0.0)
    shape = t.choice("shape", SHAPES, "constant")
    peak = t.number("peak_qps", 0.0, low=0.0)
    traffic = Traffic(
        qps=qps,
        shape=shape,
        peak_qps=peak,
        ramp_s=t.number("ramp_s", 60.0, low=0.0),
        step_at_s=t.number("step_at_s", 60.0, low=0.0),
        period_s=t.number("period_s", 300.0, positive=True),
        burst_at_s=t.number("burst_at_s", 60.0, low=0.0),
        burst_s=t.number("burst_s", 10.0, positive=True),
        trace=_trace_path(t),
        trace_speedup=t.number("trace_speedup", 1.0, positive=True),
        trace_start_s=t.number("trace_start_s", 0.0, low=0.0),
        trace_loop=t.flag("trace_loop", False),
        arrival=t.choice("arrival", ARRIVALS, "poisson"),
        arrival_cv=t.number("arrival_cv", 1.0, positive=True),
    )
    _check_arrival(t, traffic)
    if traffic.trace is not None and traffic.trace_loop:

        # Refused here (one line naming the key) rather than when the run starts.
        try:
            replay_times(load_trace(traffic.trace), loop=True, until_s=0.0)
        except ScenarioError as exc:
            raise ScenarioError(t.key("trace_loop"), exc.message, "set trace_loop = false") from None
    return traffic


def _check_arrival(t: _Table, traffic: Traffic) -> None:
    """``arrival_cv`` only means something for gamma gaps, and gaps only for synthetic
    traffic: a key that would be silently ignored is refused instead."""
    if traffic.arrival_cv > MAX_ARRIVAL_CV:
        raise ScenarioError(
            t.key("arrival_cv"), f"{_show(traffic.arrival_cv)} is over {MAX_ARRIVAL_CV:g}",
            f"use a value from just above 0 to {MAX_ARRIVAL_CV:g} (1 is Poisson)",
        )
    if traffic.arrival == "poisson" and traffic.arrival_cv != 1.0:
        raise ScenarioError(
            t.key("arrival_cv"), "applies only to gamma arrivals (Poisson gaps have cv 1)",
            'set traffic.arrival = "gamma" or remove arrival_cv',
        )
    if traffic.arrival == "gamma" and traffic.trace is not None:
        raise ScenarioError(
            t.key("arrival"), "gamma arrivals do not apply to a trace replay (the trace "
            "gives every arrival time)", "remove arrival and arrival_cv, or the trace",
        )


def _trace_path(t: _Table) -> str | None:
    """``traffic.trace``: a readable trace file (read and checked now, once)."""
    if not t.has("trace"):
        return None

    path = t.text("trace")
    load_trace(path, key=t.key("trace"))
    return path


def _check_trace_models(traffic: Traffic, models: dict[str, ModelSpec]) -> None:
    if traffic.trace is None:
        return

    names = load_trace(traffic.trace).model
    if names is None:
        return
    unknown = sorted(set(names) - set(models))
    if unknown:
        raise ScenarioError(
            "traffic.trace",
            f'the trace names model "{unknown[0]}", which the scenario does not have',
            f"models are {', '.join(models)}; add [models.{unknown[0]}] or rename it in the trace",
        )


def _models(raw: Any, worker: WorkerSpec) -> dict[str, ModelSpec]:
    if not isinstance(raw, dict) or not raw:
        raise ScenarioError("models", "needs at least one [models.NAME] table")
    if len(raw) > MAX_MODELS:
        raise ScenarioError(
            "models", f"{len(raw):,} models, over the limit of {MAX_MODELS}", "review fewer models at once"
        )
    models: dict[str, ModelSpec] = {}
    for name, body in raw.items():
        path = f"models.{name}"
        if not _NAME.match(name):
            raise ScenarioError(
                path, f'"{name}" is not a usable model name', "use letters, digits, _ and - only"
            )
        t = _Table(
            body,
            path,
            (
                "share",
                "worker_units",
                "tokens",
                "tokens_cv",
                "output_tokens",
                "output_tokens_cv",
                "worker",
                "arch",
                "prefixes",
                "disaggregated",
            ),
        )
        share = t.number("share", low=0.0)
        if share > 1:
            raise ScenarioError(t.key("share"), f"{_show(share)} is more than 1")
        models[name] = ModelSpec(
            name=name,
            share=share,
            worker_units=t.integer("worker_units", low=1, high=MAX_HOST_UNITS),
            tokens=t.integer("tokens", low=1, high=MAX_TOKENS),
            tokens_cv=t.number("tokens_cv", 0.0, low=0.0),
            output_tokens=t.integer("output_tokens", 1, low=1, high=MAX_TOKENS),
            output_tokens_cv=t.number("output_tokens_cv", 0.0, low=0.0),
            worker_overrides=_worker_overrides(t.raw("worker", {}), f"{path}.worker", worker),
            arch=_arch(t.raw("arch"), f"{path}.arch") if t.has("arch") else None,
            prefixes=(
                prefix_checks.prefixes(t.raw("prefixes"), f"{path}.prefixes")
                if t.has("prefixes") else None
            ),
            disaggregated=(
                parse_disaggregated(t.raw("disaggregated"), f"{path}.disaggregated")
                if t.has("disaggregated")
                else None
            ),
        )
    total = sum(m.share for m in models.values())
    if abs(total - 1.0) > 1e-6:
        raise ScenarioError("models", f"shares add up to {round(total, 6):g}, not 1")
    return models


def _dispatcher(raw: Any) -> DispatcherSpec:
    t = _Table(raw, "dispatcher", tuple(DispatcherSpec.__dataclass_fields__))
    return DispatcherSpec(
        max_batch_tokens=t.integer("max_batch_tokens", 10000, low=1, high=MAX_TOKENS),
        close_after_s=t.seconds_or("close_after_s", "never", "never"),
        policy=t.choice("policy", _policy_names(), "round_robin"),
        queue_limit=t.integer("queue_limit", 0, low=0),
        standby=t.choice("standby", STANDBYS, "cold"),
        failover_s=t.number("failover_s", 3.0, low=0.0),
        health_check_s=t.number("health_check_s", 5.0, positive=True),
        scorers=prefix_checks.scorers(t.raw("scorers"), t.key("scorers")) if t.has("scorers") else (),
        admission=admission_checks.rule(t, "queue_limit") or "queue_limit",
        admission_slack=admission_checks.slack(t, 1.0) or 1.0,
        **prefix_checks.index_keys(t),
        proxy_hop_s=router_checks.proxy_hop(t),
        **session_checks.keys(t),
    )


def _policy_names() -> tuple[str, ...]:
    """The registered dispatch policies: the catalog is the one list of them."""
    return catalog.policy_names()


def _worker(raw: Any) -> WorkerSpec:
    t = _Table(raw, "worker", tuple(WorkerSpec.__dataclass_fields__))
    return WorkerSpec(**_worker_values(t, WorkerSpec()))


def _worker_overrides(raw: Any, path: str, base: WorkerSpec) -> tuple[tuple[str, Any], ...]:
    """A model's ``[models.NAME.worker]`` table: the keys it sets, each checked."""
    t = _Table(raw, path, tuple(WorkerSpec.__dataclass_fields__))
    values = _worker_values(t, base)
    return tuple((k, values[k]) for k in WorkerSpec.__dataclass_fields__ if t.has(k))


def _worker_values(t: _Table, base: WorkerSpec) -> dict[str, Any]:
    """Every worker key of ``t``, checked, with ``base``'s value where it is absent."""
    return {
        "batch_s": t.number("batch_s", base.batch_s, positive=True),
        "service": t.choice("service", SERVICES, base.service),
        "service_cv": t.number("service_cv", base.service_cv, low=0.0),
        "batching": t.choice("batching", _batching_names(), base.batching),
        "max_num_seqs": t.integer("max_num_seqs", base.max_num_seqs, low=1),
        "max_batched_tokens": t.integer(
            "max_batched_tokens", base.max_batched_tokens, low=1, high=MAX_TOKENS
        ),
        "kv_cache_tokens": _kv_tokens(t, base.kv_cache_tokens),
        # A step of no length would let a worker run forever at one instant.
        "step_base_s": t.number("step_base_s", base.step_base_s, positive=True),
        "prefill_token_s": t.number("prefill_token_s", base.prefill_token_s, low=0.0),
        "prefill_attn_s": t.number("prefill_attn_s", base.prefill_attn_s, low=0.0),
        "decode_seq_s": t.number("decode_seq_s", base.decode_seq_s, low=0.0),
        "kv_token_s": t.number("kv_token_s", base.kv_token_s, low=0.0),
        "step_model": t.choice("step_model", STEP_MODELS, base.step_model),
        "mbu": _efficiency(t, "mbu", base.mbu),
        "mfu": _efficiency(t, "mfu", base.mfu),
        "step_overhead_s": t.number("step_overhead_s", base.step_overhead_s, low=0.0),
        "step_table": t.text("step_table") if t.has("step_table") else base.step_table,
        **prefix_checks.worker_keys(t, base),
        **speculative_checks.worker_keys(t, base),
        "kv_block_tokens": t.integer("kv_block_tokens", base.kv_block_tokens, low=1),
        "kv_watermark": _watermark(t, base.kv_watermark),
        "scheduler": t.choice("scheduler", SCHEDULERS, base.scheduler),
    }


def _watermark(t: _Table, default: float) -> float:
    """``kv_watermark``: the share of KV blocks an admission leaves free, below 1."""
    value = t.number("kv_watermark", default, low=0.0)
    if value >= 1:
        raise ScenarioError(
            t.key("kv_watermark"), f"{_show(value)} would keep the whole cache free",
            "it is a share of the KV blocks, e.g. 0.01 (vLLM's default), or 0 for none",
        )
    return value


def _kv_tokens(t: _Table, default: int) -> int:
    """``kv_cache_tokens``: a whole number of tokens, or "auto" (``AUTO_KV``)."""
    if t.raw("kv_cache_tokens", None) == "auto":
        return AUTO_KV
    if isinstance(t.raw("kv_cache_tokens", None), str):
        raise ScenarioError(
            t.key("kv_cache_tokens"),
            f"{_show(t.raw('kv_cache_tokens'))} is not a whole number or \"auto\"",
            'give the tokens, or "auto" with [hardware] and the model\'s arch',
        )
    if not t.has("kv_cache_tokens"):
        return default  # [worker]'s value, "auto" included
    return t.integer("kv_cache_tokens", low=1)


def _efficiency(t: _Table, name: str, default: float) -> float:
    value = t.number(name, default, positive=True)
    if value > 1:
        raise ScenarioError(
            t.key(name), f"{_show(value)} is more than 1", "an efficiency is a share of the peak, at most 1"
        )
    return value


def _hardware(raw: Any) -> HardwareSpec:
    """``[hardware]``: a catalog gpu, or memory_gb, hbm_tb_s and bf16_tflops given."""

    t = _Table(raw, "hardware", tuple(HardwareSpec.__dataclass_fields__))
    gpu = t.text("gpu") if t.has("gpu") else None
    if gpu is not None and gpu not in GPUS:
        raise ScenarioError(
            t.key("gpu"), f'"{gpu}" is not in the catalog', f"known GPUs: {', '.join(GPUS)}; "
            "or give memory_gb, hbm_tb_s and bf16_tflops instead"
        )
    numbers = {
        name: t.number(name, positive=True) if t.has(name) else None
        for name in ("memory_gb", "hbm_tb_s", "bf16_tflops")
    }
    missing = [name for name, value in numbers.items() if value is None]
    if gpu is None and missing:
        raise ScenarioError(
            t.key(missing[0]), "missing (no gpu is named)",
            f"name a gpu ({', '.join(GPUS)}) or give memory_gb, hbm_tb_s and bf16_tflops",
        )
    util = t.number("gpu_memory_utilization", 0.9, positive=True)
    if util > 1:
        raise ScenarioError(
            t.key("gpu_memory_utilization"), f"{_show(util)} is more than 1",
            "it is the share of each GPU's memory the engine may take, e.g. 0.9",
        )
    link = {
        name: t.number(name, positive=True) if t.has(name) else None
        for name in ("link_gb_s", "collective_us")
    }
    return HardwareSpec(gpu=gpu, gpu_memory_utilization=util, **numbers, **link)


def _arch(raw: Any, path: str) -> ArchSpec:
    """``[models.NAME.arch]``: a catalog model, or its shape given."""

    t = _Table(raw, path, tuple(ArchSpec.__dataclass_fields__))
    model = t.text("model") if t.has("model") else None
    if model is not None and model not in MODEL_SHAPES:
        raise ScenarioError(
            t.key("model"), f'"{model}" is not in the catalog',
            f"known models: {', '.join(MODEL_SHAPES)}; or give params_b, layers, kv_heads "
            "and head_dim instead",
        )
    values: dict[str, Any] = {}
    for name in ("params_b", "active_params_b"):
        if t.has(name):
            values[name] = t.number(name, positive=True)
    for name in ("layers", "kv_heads", "head_dim", "hidden_size"):
        if t.has(name):
            values[name] = t.integer(name, low=1)
    values.update(moe_checks.values(t))
    if model is None:
        for name in ("params_b", "layers", "kv_heads", "head_dim"):
            if name not in values:
                raise ScenarioError(
                    t.key(name), "missing (no model is named)",
                    f"name a model ({', '.join(MODEL_SHAPES)}) or give params_b, layers, "
                    "kv_heads and head_dim",
                )
    arch = ArchSpec(model=model, dtype_bytes=t.number("dtype_bytes", 2, positive=True), **values)
    shape = arch.shape()
    if shape.active_params_b > shape.params_b:
        raise ScenarioError(
            t.key("active_params_b"),
            f"{float(shape.active_params_b):g} is more than params_b ({float(shape.params_b):g})",
            "active parameters are those one token uses: at most all of them",
        )
    moe_checks.check_shape(t, shape)
    return arch


def _resolve_hardware(model: ModelSpec, w: WorkerSpec, hardware: HardwareSpec | None) -> WorkerSpec:
    """Check what ``kv_cache_tokens = "auto"`` and ``step_model = "roofline"`` need and
    that the model's weights fit on its worker's GPUs, and give ``w`` with its KV
    capacity resolved."""

    where = dict(model.worker_overrides)

    def key(name: str) -> str:
        return f"models.{model.name}.worker.{name}" if name in where else f"worker.{name}"

    uses = [k for k, used in (("kv_cache_tokens", w.kv_cache_tokens == AUTO_KV),
                              ("step_model", w.step_model == "roofline")) if used]
    what = 'kv_cache_tokens = "auto"' if uses and uses[0] == "kv_cache_tokens" else 'step_model = "roofline"'
    if uses and model.arch is None:
        raise ScenarioError(
            key(uses[0]), f"{what} needs the shape of model {model.name}",
            f'add [models.{model.name}.arch] with model = "Llama-2-70B" (or params_b, layers, '
            "kv_heads, head_dim)" + (", or give kv_cache_tokens in tokens" if uses[0] == "kv_cache_tokens" else ""),
        )
    if uses and hardware is None:
        raise ScenarioError(
            key(uses[0]), f"{what} needs the GPU the workers run on",
            'add [hardware] with gpu = "H100-SXM-80GB" (or memory_gb, hbm_tb_s, bf16_tflops)',
        )
    if model.arch is None or hardware is None:
        return w
    probe = Scenario(
        name="", duration_s=1.0, seed=0, sample_s=1.0, traffic=Traffic(qps=0.0),
        models={model.name: model}, worker=w, hardware=hardware,
    )
    roof = probe.roofline_for(model.name)
    assert roof is not None
    if roof.weight_bytes >= roof.usable_bytes:
        raise ScenarioError(
            f"models.{model.name}.arch",
            f"the weights ({float(roof.weight_bytes) / 1e9:,.1f} GB) do not fit in {roof.units} x "
            f"{float(roof.gpu.memory_gb):g} GB x gpu_memory_utilization "
            f"{float(roof.memory_utilization):g} = {float(roof.usable_bytes) / 1e9:,.1f} GB",
            "give the model more worker_units, a bigger GPU, or a smaller dtype_bytes",
        )
    if w.kv_cache_tokens == AUTO_KV:
        return replace(w, kv_cache_tokens=roof.kv_capacity_tokens)
    return w


def _batching_names() -> tuple[str, ...]:
    """The registered worker models: the catalog is the one list of them."""
    return catalog.worker_model_names() or BATCHING


def _resolved(worker: WorkerSpec, model: ModelSpec) -> WorkerSpec:
    return replace(worker, **dict(model.worker_overrides)) if model.worker_overrides else worker


def _check_continuous(model: ModelSpec, w: WorkerSpec) -> None:
    """A continuous-batching worker must be able to hold one of the model's requests."""
    where = dict(model.worker_overrides)

    def key(name: str) -> str:
        return f"models.{model.name}.worker.{name}" if name in where else f"worker.{name}"

    _check_step_table(w, key)
    speculative_checks.check(w, key)
    if w.max_batched_tokens < w.max_num_seqs:
        raise ScenarioError(
            key("max_batched_tokens"),
            f"{w.max_batched_tokens} is below max_num_seqs ({w.max_num_seqs}): a step could "
            "not give every running sequence its token",
            f"use at least {w.max_num_seqs}, or lower max_num_seqs",
        )
    if w.prefix_cache and w.block_tokens % w.kv_block_tokens:
        raise ScenarioError(
            key("block_tokens"),
            f"{w.block_tokens} is not a whole number of KV blocks of {w.kv_block_tokens} "
            "tokens: prefix caching shares whole KV blocks",
            f"use a multiple of kv_block_tokens ({w.kv_block_tokens}), or change kv_block_tokens",
        )
    if w.kv_blocks < 1:
        raise ScenarioError(
            key("kv_block_tokens"),
            f"{w.kv_block_tokens:,} is more than the cache's {w.kv_cache_tokens:,} tokens",
            "use blocks smaller than kv_cache_tokens (16 as vLLM), or 1 to count tokens",
        )
    # With varied sizes the longest requests are shed as they come; a cache that cannot
    # hold even a request of mean size is a mistake in the file.
    need = model.tokens + model.output_tokens
    if need > w.kv_request_limit and need <= w.kv_cache_tokens:
        raise ScenarioError(
            key("kv_watermark"),
            f"{w.kv_watermark:g} of {w.kv_blocks:,} blocks of {w.kv_block_tokens} tokens leaves "
            f"{w.kv_request_limit:,} tokens to admit into, too few for one request of model "
            f"{model.name} (prompt {model.tokens:,} + output {model.output_tokens:,} = {need:,})",
            "lower kv_watermark or kv_block_tokens, or raise kv_cache_tokens",
        )
    if need > w.kv_cache_tokens:
        mean = "" if model.tokens_cv == 0 and model.output_tokens_cv == 0 else "a mean "
        raise ScenarioError(
            key("kv_cache_tokens"),
            f"{w.kv_cache_tokens:,} cannot hold one request of {mean}size for model "
            f"{model.name} (prompt {model.tokens:,} + output {model.output_tokens:,} = "
            f"{need:,} tokens)",
            f"use at least {need:,}, or shorten the model's requests",
        )


def _check_step_table(w: WorkerSpec, key: Any) -> None:
    """``step_model = "table"`` names its table, the table reads and fits, and a table
    is not given to another step model."""
    if w.step_model == "table" and w.step_table is None:
        raise ScenarioError(
            key("step_model"), '"table" needs the table of step times',
            f'add step_table = "{next(iter(NAMED_TABLES))}" (a named table, a calibration set '
            'as "NAME#hardware/tp", or a CSV path)',
        )
    if w.step_table is not None and w.step_model != "table":
        raise ScenarioError(
            key("step_table"), f'applies only with step_model = "table", not "{w.step_model}"',
            'set step_model = "table", or remove step_table',
        )
    if w.step_table is not None:
        try:
            load_step_table(w.step_table)
        except ScenarioError as err:
            where = "" if err.path == "worker.step_table" else f"{err.path}: "
            raise ScenarioError(key("step_table"), where + err.message, err.fix) from None


def _slo(raw: Any) -> SloSpec:
    t = _Table(raw, "slo", tuple(SloSpec.__dataclass_fields__))
    return SloSpec(
        ttft_s=t.number("ttft_s", positive=True) if t.has("ttft_s") else None,
        tpot_s=t.number("tpot_s", positive=True) if t.has("tpot_s") else None,
        tbt_s=t.number("tbt_s", positive=True) if t.has("tbt_s") else None,
    )


def _client(raw: Any) -> ClientSpec:
    t = _Table(raw, "client", tuple(ClientSpec.__dataclass_fields__))
    client = ClientSpec(
        timeout_s=t.seconds_or("timeout_s", "none", 60.0),
        retries=t.integer("retries", 0, low=0),
        retry_backoff_s=t.number("retry_backoff_s", 1.0, low=0.0),
    )
    if client.retries > 0 and client.retry_backoff_s < MIN_BACKOFF_S:
        # Retries are merged into the arrival stream one chunk ahead; a chunk is at
        # least this long, so a shorter backoff could not be honoured.
        raise ScenarioError(
            t.key("retry_backoff_s"),
            f"{_show(client.retry_backoff_s)} is below {MIN_BACKOFF_S} s while client.retries > 0",
            f"use at least {MIN_BACKOFF_S}",
        )
    return client


def _gateway(raw: Any) -> GatewaySpec:
    t = _Table(raw, "gateway", tuple(GatewaySpec.__dataclass_fields__))
    rate = t.number("rate_limit_qps", 0.0, low=0.0)
    if 0 < rate < 1:
        raise ScenarioError(
            t.key("rate_limit_qps"),
            f"{_show(rate)} is below 1 request a second",
            "use 0 (off) or at least 1; the counter window is one second",
        )
    gateway = GatewaySpec(
        instances=t.integer("instances", 2, low=1),
        rate_limit_qps=rate,
        keys=t.integer("keys", 50, low=1),
        shared_counter=t.flag("shared_counter", True),
    )
    counters = gateway.keys * (1 if gateway.shared_counter else gateway.instances)
    if counters > MAX_RATE_COUNTERS:
        raise ScenarioError(
            t.key("keys"),
            f"{gateway.keys:,} keys need {counters:,} counters, "
            f"more than {MAX_RATE_COUNTERS:,} rate-limit counters",
            "use fewer keys (or fewer instances with shared_counter = false)",
        )
    return gateway


def _hosts(raw: Any, models: dict[str, ModelSpec]) -> tuple[HostGroup, ...]:
    if not isinstance(raw, list) or not raw:
        raise ScenarioError("hosts", "needs at least one [[hosts]] table")
    groups: list[HostGroup] = []
    for gi, body in enumerate(raw):
        t = _Table(body, f"hosts[{gi}]", ("count", "units", "workers", "pool"))
        count = t.integer("count", 1, low=1)
        units = t.integer("units", low=1, high=MAX_HOST_UNITS)
        spelled = t.raw("workers", [])
        if not isinstance(spelled, list):
            raise ScenarioError(
                t.key("workers"),
                f"{_show(spelled)} is not a list",
                'write workers = ["big@0", "small@5"]',
            )
        slots: list[WorkerSlot] = []
        taken: dict[int, str] = {}
        for wi, spelling in enumerate(spelled):
            path = f"hosts[{gi}].workers[{wi}]"
            match = _SLOT.match(spelling) if isinstance(spelling, str) else None
            if not match:
                raise ScenarioError(
                    path, f"{_show(spelling)} is not MODEL@FIRST_UNIT", 'write it like "big@0"'
                )
            model, first = match.group(1), int(match.group(2))
            if model not in models:
                raise ScenarioError(
                    path,
                    f'"{spelling}" names no model "{model}"',
                    f"models are {', '.join(models)}",
                )
            size = models[model].worker_units
            if first + size > units:
                raise ScenarioError(
                    path,
                    f'"{spelling}" needs units {first}-{first + size - 1} '
                    f"but the host has {units} units",
                )
            for unit in range(first, first + size):
                if unit in taken:
                    raise ScenarioError(
                        path,
                        f'"{spelling}" overlaps "{taken[unit]}" on unit {unit}',
                        "workers on a host need separate units",
                    )
                taken[unit] = spelling
            slots.append(WorkerSlot(model=model, first_unit=first))
        pool = parse_pool(t.raw("pool"), t.key("pool")) if t.has("pool") else None
        groups.append(HostGroup(count=count, units=units, workers=tuple(slots), pool=pool))
        total = sum(g.count for g in groups)
        if total > MAX_HOSTS:
            raise ScenarioError(
                t.key("count"),
                f"{total:,} hosts in all, more than {MAX_HOSTS:,} hosts",
                "lower the count",
            )
        workers = sum(g.count * len(g.workers) for g in groups)
        if workers > MAX_WORKERS:
            raise ScenarioError(
                t.key("count"),
                f"{workers:,} workers in all, more than {MAX_WORKERS:,} workers",
                "lower the count or the workers per host",
            )
    return tuple(groups)


def _faults(raw: Any, scenario: Scenario) -> tuple[Fault, ...]:
    if not isinstance(raw, list):
        raise ScenarioError("faults", f"{_show(raw)} is not a list of [[faults]] tables")
    faults: list[Fault] = []
    for fi, body in enumerate(raw):
        t = _Table(body, f"faults[{fi}]", ("at_s",) + FAULT_ACTIONS)
        at_s = t.number("at_s", low=0.0)
        if at_s > scenario.duration_s:
            raise ScenarioError(
                t.key("at_s"),
                f"{_show(at_s)} is after the end of the run "
                f"(duration_s = {_show(scenario.duration_s)})",
                "move the fault earlier or lengthen duration_s",
            )
        actions = [a for a in FAULT_ACTIONS if t.has(a)]
        if len(actions) != 1:
            raise ScenarioError(
                t.path,
                "needs exactly one of kill or restore",
                'write kill = "host:2" or restore = "host:2"',
            )
        action = actions[0]
        target = t.text(action)
        check_target(target, scenario, t.key(action))
        faults.append(Fault(at_s=at_s, action=action, target=target))
    # Stable: faults at the same time keep their file order.
    return tuple(sorted(faults, key=lambda f: f.at_s))


def check_target(target: str, scenario: Scenario, path: str) -> None:
    """Check a fault target (``host:2``, ``dispatcher:small``, ``worker:big:3``)."""
    parts = target.split(":")
    kind = parts[0]
    hint = "targets are host:INDEX, dispatcher:MODEL or worker:MODEL:INDEX"
    if kind == "host" and len(parts) == 2:
        hosts = len(scenario.expanded_hosts())
        if not parts[1].isdigit() or int(parts[1]) >= hosts:
            raise ScenarioError(
                path, f'"{target}" names no host', f"hosts are numbered 0-{hosts - 1}"
            )
        return
    if kind == "dispatcher" and len(parts) == 2:
        if parts[1] not in scenario.models:
            raise ScenarioError(
                path,
                f'"{target}" names no model "{parts[1]}"',
                f"models are {', '.join(scenario.models)}",
            )
        return
    if kind == "worker" and len(parts) == 3:
        if parts[1] not in scenario.models:
            raise ScenarioError(
                path,
                f'"{target}" names no model "{parts[1]}"',
                f"models are {', '.join(scenario.models)}",
            )
        count = scenario.worker_count(parts[1])
        if count == 0:
            raise ScenarioError(
                path, f'"{target}" names no worker', f"the hosts carry no {parts[1]} workers"
            )
        if not parts[2].isdigit() or int(parts[2]) >= count:
            raise ScenarioError(
                path,
                f'"{target}" names no worker',
                f"{parts[1]} workers are numbered 0-{count - 1}",
            )
        return
    raise ScenarioError(path, f'"{target}" is not a fault target', hint)
