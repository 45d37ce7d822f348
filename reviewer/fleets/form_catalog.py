"""The fleet editor's form, read from the emulator's scenario types: every key group
the emulator reads (the run, traffic, each model's request sizes, its architecture,
the hardware, the SLOs, batching and the KV cache, the step model, the
efficiencies, prefix caching, pools and disaggregation, the dispatcher, clients,
the gateway, hosts, the autoscaler, faults), each key with its label, unit, value
as written, the value the emulator uses when it is left out, and the choices the
emulator accepts.

The keys are the fields of the scenario's dataclasses (``emulator.scenario.specs``),
so a key added there appears in the form without new markup: a field the
groups below do not place goes to its table's first group. Labels and units come
from the key's name (``_s`` is seconds, ``_qps`` requests per second...), with a
few spelled out where the name alone says too little.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from emulator.scenario import catalog
from emulator.scenario import specs as sp
from emulator.scenario.admission_checks import ADMISSIONS
from emulator.scenario.autoscale_checks import PREDICTORS
from emulator.scenario.hardware import GPUS, MODEL_SHAPES
from emulator.scenario.kv_tier_checks import TIER_NAMES
from emulator.scenario.moe_checks import EXPERTS_READ
from emulator.scenario.specs import (
    ARRIVALS,
    AUTOSCALE_METRICS,
    BATCHING,
    PLANNER_METRIC,
    PREFIX_INDEXES,
    SERVICES,
    SHAPES,
    STANDBYS,
    STEP_MODELS,
)
from emulator.scenario.speculative_checks import METHODS
from emulator.scenario.traces import NAMED_TRACES

__all__ = ["form_groups", "label_of", "unit_of"]

#: Units by the end of a key's name, the longest ending first.
_UNIT_ENDINGS = (
    ("_bytes_per_token", "bytes per token"), ("_tb_s", "TB/s"), ("_gb_s", "GB/s"), ("_tflops", "TFLOPS"),
    ("_gb", "GB"), ("_qps", "requests/s"), ("_tokens", "tokens"), ("_bytes", "bytes"), ("_b", "billion"),
    ("_cv", "coefficient of variation"), ("_s", "s"),
)
#: Units the name does not carry, or carries wrongly for its meaning.
_UNITS = {
    "qps": "requests/s", "tokens": "tokens", "output_tokens": "tokens", "share": "share of traffic, 0-1",
    "worker_units": "GPUs", "units": "GPUs per host", "count": "hosts", "mbu": "share, 0-1", "mfu": "share, 0-1",
    "gpu_memory_utilization": "share, 0-1", "prefill_token_s": "s per token", "prefill_attn_s": "s per token²",
    "decode_seq_s": "s per sequence", "kv_token_s": "s per token", "step_base_s": "s", "max_num_seqs": "sequences", "max_batched_tokens": "tokens per step",
    "kv_cache_tokens": "tokens, or auto", "close_after_s": "s, or never", "timeout_s": "s, or none",
    "trace_speedup": "x", "groups": "prefixes", "zipf_s": "Zipf exponent", "retries": "retries",
    "queue_limit": "requests, 0: none", "instances": "instances", "keys": "API keys", "layers": "layers",
    "kv_heads": "heads", "head_dim": "values per head", "target": "of the metric", "min_workers": "workers",
    "max_workers": "workers", "decider_threshold_tokens": "prompt tokens", "seed": "",
    "admission_slack": "x slo.ttft_s", "prefix_index_capacity": "(worker, prefix) pairs",
    "session_ttl_s": "s an idle session is remembered",
    "per_worker_qps": "requests/s a worker, or worked out from a target",
    "horizon_s": "s, warmup_s if left out", "window_s": "s of looks", "season_s": "s, the load's period",
    "experts": "routed experts a MoE layer", "experts_per_token": "routed experts a token",
    "shared_experts": "experts every token runs", "moe_layers": "layers", "expert_parallel": "GPUs, the worker's units",
    "pipeline_threshold_tokens": "prompt tokens, 0: off", "pipeline_workers": "prefill workers (stages)",
    "pipeline_chunk_tokens": "tokens, 0: the step budget", "pipeline_hop_s": "s a chunk a stage boundary",
    "pipeline_link_gb_s": "GB/s, 0: none",
}
#: Labels the name alone spells badly.
_LABELS = {
    "qps": "QPS", "peak_qps": "peak QPS", "ttft_s": "TTFT objective", "tpot_s": "TPOT objective",
    "mbu": "memory-bandwidth utilisation (MBU)", "mfu": "FLOPs utilisation (MFU)", "gpu": "GPU",
    "hbm_tb_s": "HBM bandwidth", "bf16_tflops": "BF16 compute", "memory_gb": "GPU memory",
    "params_b": "parameters", "active_params_b": "active parameters", "expert_params_b": "one expert's parameters",
    "experts_per_token": "experts a token", "expert_parallel": "expert parallelism", "output_tokens": "output tokens", "kv_cache_tokens": "KV cache",
    "max_num_seqs": "running sequences", "max_batched_tokens": "batched tokens", "tokens": "prompt tokens",
    "worker_units": "worker units", "kv_transfer_gb_s": "KV transfer", "kv_bytes_per_token": "KV size",
    "decider_threshold_tokens": "prefill skipped up to", "prefill_workers": "prefill pool",
    "decode_workers": "decode pool", "workers": "layout (MODEL@UNIT, ...)", "count": "hosts", "units": "units",
    "at_s": "at", "duration_s": "duration", "sample_s": "frame interval", "block_tokens": "KV block",
    "prefix_tokens": "prefix length", "zipf_s": "popularity skew", "step_base_s": "each step's base time",
    "prefill_token_s": "prefill, per prompt token", "prefill_attn_s": "prefill attention, per chunk token pair",
    "decode_seq_s": "decode, per running sequence", "kv_token_s": "decode, per context token",
    "gpu_memory_utilization": "GPU memory the engine takes",
    "admission": "admission rule", "admission_slack": "predicted TTFT allowed",
    "prefix_index": "prefix index of the router", "prefix_index_capacity": "prefix index size",
    "prefix_index_ttl_s": "prefix index staleness",
    "session_affinity": "session affinity (a prefix group's requests to one worker)",
    "session_ttl_s": "session memory",
    "target_ttft_s": "planner's TTFT target", "target_tbt_s": "planner's TBT target",
    "per_worker_qps": "planner's per-worker rate", "predictor": "planner's predictor",
    "window_s": "planner's window", "horizon_s": "planner predicts ahead", "season_s": "load repeats every",
    "draft_tokens": "drafted tokens", "draft_step_s": "draft pass", "draft_seq_s": "draft pass, per sequence",
    "pipeline_threshold_tokens": "pipelined above", "pipeline_workers": "pipeline stages",
    "pipeline_chunk_tokens": "pipeline chunk", "pipeline_hop_s": "pipeline hop between stages",
    "pipeline_link_gb_s": "pipeline stage link",
}
#: Keys written as a word or a number.
_WORDS = {"close_after_s": "never", "kv_cache_tokens": "auto", "timeout_s": "none"}

#: The worker's keys by group; a worker key not listed goes to the first.
_WORKER_GROUPS = (
    ("batching", "Batching and KV cache", ("batching", "batch_s", "service", "service_cv", "max_num_seqs",
                                           "max_batched_tokens", "kv_cache_tokens")),
    ("step", "Step model", ("step_model", "step_base_s", "prefill_token_s", "prefill_attn_s", "decode_seq_s",
                            "kv_token_s")),
    ("efficiency", "Efficiencies", ("mbu", "mfu")),
    ("prefix", "Prefix caching", ("prefix_cache", "block_tokens")),
)


def label_of(name: str) -> str:
    """A key's label: ``peak_qps`` is "peak QPS", ``health_check_s`` "health check"."""
    if name in _LABELS:
        return _LABELS[name]
    if name.endswith("_cv"):
        return f"{label_of(name[:-3])} variation"
    for ending, _ in _UNIT_ENDINGS:
        if name.endswith(ending) and len(name) > len(ending):
            name = name[: -len(ending)]
            break
    return name.replace("_", " ")


def unit_of(name: str) -> str:
    """A key's unit as a reader expects it, or "" for a name, a count or a switch."""
    if name in _UNITS:
        return _UNITS[name]
    for ending, unit in _UNIT_ENDINGS:
        if name.endswith(ending):
            return unit
    return ""


def _choices(data: dict[str, Any]) -> dict[str, list[str]]:
    models = list(data.get("models") or {}) if isinstance(data.get("models"), dict) else []
    pools = sorted({str(h["pool"]) for h in data.get("hosts") or [] if isinstance(h, dict) and h.get("pool")})
    return {
        "traffic.shape": list(SHAPES), "traffic.arrival": list(ARRIVALS), "traffic.trace": list(NAMED_TRACES),
        "batching": list(BATCHING), "service": list(SERVICES), "step_model": list(STEP_MODELS),
        "dispatcher.standby": list(STANDBYS), "dispatcher.policy": list(catalog.policy_names()),
        "dispatcher.admission": list(ADMISSIONS), "dispatcher.prefix_index": list(PREFIX_INDEXES),
        "hardware.gpu": list(GPUS), "arch.model": list(MODEL_SHAPES),
        "arch.experts_read": list(EXPERTS_READ), "autoscaler.metric": [*AUTOSCALE_METRICS, PLANNER_METRIC],
        "autoscaler.predictor": list(PREDICTORS),
        "autoscaler.model": models, "prefill_workers": pools, "decode_workers": pools,
    }


def _get(data: Any, parts: list[Any]) -> Any:
    node = data
    for part in parts:
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            return None
    return node


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return str(value)


class _Builder:
    def __init__(self, data: dict[str, Any], spec: Any) -> None:
        self.data = data
        self.spec = spec
        self.choices = _choices(data)

    def field(self, path: str, f: dataclasses.Field[Any], written: Any, used: Any) -> dict[str, Any]:
        name = f.name
        kind = "number"
        options = None
        table = path.rsplit(".", 1)[0].split("[")[0]
        for key in (f"{table}.{name}", f"{table.rsplit('.', 1)[-1]}.{name}", name):
            if key in self.choices:
                options = self.choices[key]
                break
        type_text = str(f.type)
        if options is not None:
            kind = "select"
        elif type_text == "bool":
            kind, options = "bool", ["true", "false"]
        elif name in _WORDS:
            kind = "text"
        elif type_text.startswith("str") or type_text.startswith("tuple[WorkerSlot"):
            kind = "list" if name == "workers" else "text"
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        default = f.default if f.default is not dataclasses.MISSING else None
        if used is None:
            used = default
        if name in _WORDS and used is None:
            used = _WORDS[name]
        label, unit = label_of(name), unit_of(name)
        return {
            "path": path, "name": name, "label": label, "unit": "" if unit == label else unit, "kind": kind,
            "options": options, "value": _plain(written), "used": _plain(used),
            "required": not has_default, "optional": "None" in type_text,
        }

    def fields(self, prefix: str, cls: type, written: Any, spec_obj: Any,
               only: tuple[str, ...] | None = None, skip: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        out = []
        for f in dataclasses.fields(cls):
            if f.name in skip or (only is not None and f.name not in only):
                continue
            value = written.get(f.name) if isinstance(written, dict) else None
            used = getattr(spec_obj, f.name, None) if spec_obj is not None else None
            path = f"{prefix}.{f.name}" if prefix else f.name
            out.append(self.field(path, f, value, used))
        return out


def _pool_autoscalers(b: _Builder, data: dict[str, Any], spec: Any) -> list[dict[str, Any]]:
    """An item per pool with its own ``[pools.NAME.autoscaler]`` (the SLO planner's
    keys among them), as written and as the emulator reads it."""
    raw = data.get("pools")
    if not isinstance(raw, dict):
        return []
    items = []
    for name, table in raw.items():
        written = table.get("autoscaler") if isinstance(table, dict) else None
        if not isinstance(written, dict):
            continue
        own = spec.pool(name) if spec is not None else None
        items.append({"title": f"Autoscaler of pool {name}", "remove": f"pools.{name}.autoscaler",
                      "fields": b.fields(f"pools.{name}.autoscaler", sp.AutoscalerSpec, written,
                                         own.autoscaler if own is not None else None)})
    return items


def _from_catalog(fields: list[dict[str, Any]], source: Any) -> None:
    """Fill the value used of keys left out from the catalog entry they fall back to
    (a GPU's memory, a model's layers), as numbers a reader reads."""
    for f in fields:
        value = getattr(source, f["name"], None)
        if f["used"] is None and value is not None and not isinstance(value, str):
            f["used"] = float(value) if not isinstance(value, int) else value


def form_groups(data: dict[str, Any] | None, spec: Any = None) -> list[dict[str, Any]]:
    """The form for a scenario as written (``data``, the TOML read as a dict), with
    the values the emulator uses from ``spec`` (its ``Scenario``, None when it does
    not validate). Each group is ``{"key", "title", "fields"}``, or with ``items``
    (one per model, host group or fault: ``{"title", "remove", "fields"}``) and
    ``add`` (the table a new item is written as); ``remove`` names an optional
    table the config has, so the group can take it out."""
    data = data if isinstance(data, dict) else {}
    b = _Builder(data, spec)
    models: dict[str, Any] = data["models"] if isinstance(data.get("models"), dict) else {}
    hosts = [h for h in data.get("hosts") or [] if isinstance(h, dict)] if isinstance(data.get("hosts"), list) else []
    faults = [f for f in data.get("faults") or [] if isinstance(f, dict)] if isinstance(data.get("faults"), list) else []
    spec_models = spec.models if spec is not None else {}
    worker = data.get("worker") if isinstance(data.get("worker"), dict) else {}
    spec_worker = spec.worker if spec is not None else None

    def table(key: str) -> Any:
        value = data.get(key)
        return value if isinstance(value, dict) else {}

    groups: list[dict[str, Any]] = []
    run = [b.field(f.name, f, data.get(f.name), getattr(spec, f.name, None))
           for f in dataclasses.fields(sp.Scenario) if f.name in ("duration_s", "seed", "sample_s")]
    groups.append({"key": "run", "title": "Run", "fields": run})
    groups.append({"key": "traffic", "title": "Traffic", "fields": b.fields(
        "traffic", sp.Traffic, table("traffic"), spec.traffic if spec is not None else None)})

    def model_items(title: str, sub: str | None, cls: type, skip: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        items = []
        for name, m in models.items():
            m = m if isinstance(m, dict) else {}
            written = m.get(sub) if sub else m
            spec_m = spec_models.get(name)
            spec_obj = getattr(spec_m, sub, None) if sub and spec_m is not None else spec_m
            prefix = f"models.{name}.{sub}" if sub else f"models.{name}"
            items.append({"title": f"{title} {name}", "model": name,
                          "remove": prefix if sub and isinstance(written, dict) else None,
                          "fields": b.fields(prefix, cls, written if isinstance(written, dict) else {}, spec_obj,
                                             skip=skip)})
        return items

    model_group: dict[str, Any] = {"key": "models", "title": "Models", "items": model_items(
        "Model", None, sp.ModelSpec, ("name", "worker_overrides", "arch", "prefixes", "disaggregated")),
        "add": {"table": "models.{name}", "values": {"share": 0, "worker_units": 1, "tokens": 500},
                "label": "Add model"}}
    for item in model_group["items"]:
        item["remove"] = f"models.{item['model']}"
        overrides = (models.get(item["model"]) or {}).get("worker")
        if isinstance(overrides, dict):
            # The model's own [models.NAME.worker] keys, over [worker].
            own = [f for f in dataclasses.fields(sp.WorkerSpec)
                   if f.name in overrides and f.name not in ("kv_tiers", "speculative")]
            spec_w = spec.worker_for(item["model"]) if spec is not None else None
            item["fields"] += [dict(b.field(f"models.{item['model']}.worker.{f.name}", f, overrides.get(f.name),
                                            getattr(spec_w, f.name, None)), label=f"its own {label_of(f.name)}")
                               for f in own]
    groups.append(model_group)
    groups.append({"key": "arch", "title": "Model architecture", "items": model_items("Architecture of", "arch",
                                                                                      sp.ArchSpec)})
    hardware = table("hardware")
    groups.append({"key": "hardware", "title": "Hardware", "remove": "hardware" if "hardware" in data else None,
                   "fields": b.fields("hardware", sp.HardwareSpec, hardware,
                                      spec.hardware if spec is not None else None,
                                      skip=("gpu_memory_utilization",))})  # an efficiency: shown there
    # A validated scenario names a catalog GPU and model, or gives every number.
    if spec is not None and spec.hardware is not None:
        _from_catalog(next(g for g in groups if g["key"] == "hardware")["fields"], spec.hardware.accelerator())
    for item in next(g for g in groups if g["key"] == "arch")["items"]:
        spec_m = spec_models.get(item["model"])
        if spec_m is not None and spec_m.arch is not None:
            _from_catalog(item["fields"], spec_m.arch.shape())
    groups.append({"key": "slo", "title": "Service-level objectives", "remove": "slo" if "slo" in data else None,
                   "fields": b.fields("slo", sp.SloSpec, table("slo"), spec.slo if spec is not None else None)})
    # kv_tiers is a list of tables: its own group, a tier an item (below); speculative
    # a table of its own keys, its own group.
    placed = {n for _, _, names in _WORKER_GROUPS for n in names} | {"kv_tiers", "speculative"}
    for i, (key, title, names) in enumerate(_WORKER_GROUPS):
        extra = tuple(f.name for f in dataclasses.fields(sp.WorkerSpec) if f.name not in placed) if i == 0 else ()
        group: dict[str, Any] = {"key": key, "title": title, "fields": b.fields(
            "worker", sp.WorkerSpec, worker, spec_worker, only=names + extra)}
        if key == "efficiency":
            group["fields"] += b.fields("hardware", sp.HardwareSpec, hardware,
                                        spec.hardware if spec is not None else None, only=("gpu_memory_utilization",))
        if key == "prefix":
            group["items"] = model_items("Shared prefixes of", "prefixes", sp.PrefixSpec)
        groups.append(group)
    groups.append(_tier_group(b, worker, spec_worker))
    groups.append(_speculative_group(b, worker, spec_worker))
    pools: dict[str, Any] = {"key": "pools", "title": "Pools and disaggregation",
                             "items": model_items("Disaggregation of", "disaggregated", sp.DisaggSpec)
                             + _pool_autoscalers(b, data, spec)}
    groups.append(pools)
    groups.append({"key": "dispatcher", "title": "Dispatcher", "fields": b.fields(
        "dispatcher", sp.DispatcherSpec, table("dispatcher"), spec.dispatcher if spec is not None else None,
        skip=("scorers",))})
    groups.append({"key": "client", "title": "Clients", "fields": b.fields(
        "client", sp.ClientSpec, table("client"), spec.client if spec is not None else None)})
    groups.append({"key": "gateway", "title": "Gateway", "fields": b.fields(
        "gateway", sp.GatewaySpec, table("gateway"), spec.gateway if spec is not None else None)})
    first_model = next(iter(models), "chat")
    host_items = []
    for i, h in enumerate(hosts):
        spec_h = spec.hosts[i] if spec is not None and i < len(spec.hosts) else None
        fields = b.fields(f"hosts[{i}]", sp.HostGroup, h, spec_h)
        for f in fields:
            if f["name"] == "workers" and spec_h is not None:
                f["used"] = [w.spelling() for w in spec_h.workers]
            if f["name"] == "pool":
                f["kind"] = "text"
        host_items.append({"title": f"Host group {i}", "remove": f"hosts[{i}]", "fields": fields})
    groups.append({"key": "hosts", "title": "Hosts", "items": host_items,
                   "add": {"table": "hosts", "values": {"count": 1, "units": 8, "workers": [f"{first_model}@0"]},
                           "label": "Add host group"}})
    groups.append({"key": "autoscaler", "title": "Autoscaler", "remove": "autoscaler" if "autoscaler" in data else None,
                   "fields": b.fields("autoscaler", sp.AutoscalerSpec, table("autoscaler"),
                                      spec.autoscaler if spec is not None else None)})
    fault_items = []
    for i, f in enumerate(faults):
        action = next((a for a in sp.FAULT_ACTIONS if a in f), sp.FAULT_ACTIONS[0])
        at = next(x for x in dataclasses.fields(sp.Fault) if x.name == "at_s")
        target = next(x for x in dataclasses.fields(sp.Fault) if x.name == "target")
        fault_items.append({"title": f"Fault {i}", "remove": f"faults[{i}]", "fields": [
            b.field(f"faults[{i}].at_s", at, f.get("at_s"), None),
            {"path": f"faults[{i}]", "name": "action", "label": "action", "unit": "", "kind": "fault-action",
             "options": list(sp.FAULT_ACTIONS), "value": action, "used": action, "required": True,
             "optional": False, "target": f"faults[{i}].{action}"},
            {**b.field(f"faults[{i}].{action}", target, f.get(action), None), "label": "target",
             "unit": "host:N, worker:MODEL:N, dispatcher:MODEL"},
        ]})
    groups.append({"key": "faults", "title": "Faults", "items": fault_items,
                   "add": {"table": "faults", "values": {"at_s": 60, "kill": "host:0"}, "label": "Add fault"}})
    return groups


def _tier_group(b: _Builder, worker: Any, spec_worker: Any) -> dict[str, Any]:
    """The ``[[worker.kv_tiers]]`` tables, one item each (a model's own tiers,
    ``[[models.NAME.worker.kv_tiers]]``, are edited in the TOML text)."""
    found = worker.get("kv_tiers") if isinstance(worker, dict) else None
    written: list[Any] = found if isinstance(found, list) else []
    used = tuple(getattr(spec_worker, "kv_tiers", ()) or ())
    items = []
    for i, t in enumerate(written):
        spec_t = used[i] if i < len(used) else None
        fields = b.fields(f"worker.kv_tiers[{i}]", sp.KvTierSpec, t if isinstance(t, dict) else {}, spec_t)
        for f in fields:
            if f["name"] == "name":
                f["kind"], f["options"] = "select", list(TIER_NAMES)
        shared = isinstance(t, dict) and t.get("shared") is True
        items.append({"title": f"Tier {i}" + (" (shared by the pool)" if shared else ""),
                      "remove": f"worker.kv_tiers[{i}]", "fields": fields})
    return {"key": "kv_tiers", "title": "KV tiers under the prefix cache", "items": items,
            "add": {"table": "worker.kv_tiers", "values": {"name": TIER_NAMES[min(len(written), 2)],
                                                           "capacity_gb": 100, "bandwidth_gb_s": 25},
                    "label": "Add KV tier"}}


def _speculative_group(b: _Builder, worker: Any, spec_worker: Any) -> dict[str, Any]:
    """The ``[worker.speculative]`` table's keys, edited in place, and the table
    added (k 3, alpha 0.7) or removed whole (a model's own,
    ``[models.NAME.worker.speculative]``, is edited in the TOML text)."""
    found = worker.get("speculative") if isinstance(worker, dict) else None
    written = found if isinstance(found, dict) else {}
    fields = b.fields("worker.speculative", sp.SpeculativeSpec, written, getattr(spec_worker, "speculative", None))
    for f in fields:
        f["unit"] = _SPECULATIVE_UNITS.get(f["name"], f["unit"])
        f["required"] = f["name"] in ("draft_tokens", "acceptance_rate")
        if f["name"] == "method":
            f["kind"], f["options"] = "select", list(METHODS)
    group: dict[str, Any] = {"key": "speculative", "title": "Speculative decoding", "fields": fields,
                             "remove": "worker.speculative" if found is not None else None}
    if found is None:
        group["add"] = {"table": "worker.speculative", "label": "Add speculative decoding",
                        "values": {"method": "eagle", "draft_tokens": 3, "acceptance_rate": 0.7}}
    return group


_SPECULATIVE_UNITS = {"draft_tokens": "tokens a step", "acceptance_rate": "share, 0-1 (below 1)",
                      "draft_step_s": "s a draft pass", "draft_seq_s": "s a draft pass, per sequence"}
