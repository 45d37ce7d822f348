"""What the break and trace passes show about the system under review, read from
its scenario: the facts a run's charts need (which models batch continuously,
the SLOs, the scheduled faults), and the one-click changes the break pass offers
(with the comparison worth making under the scenario's own assumptions).

Pure functions of a scenario (an ``emulator.scenario.Scenario``, or its dict in
the TOML spelling for the page's config); nothing here touches the database.

Kept as one module: the trace path, the break controls, the policy equivalences and the
run facts all read the same scenario through the same helpers; what the emulator's typed
scenario can answer is meant to move there, which shrinks this module.
"""

from __future__ import annotations

import json
import math
import tomllib
from fractions import Fraction
from typing import Any

from emulator.analysis.numbers import show
from emulator.scenario import Scenario, ScenarioError
from emulator.scenario.overrides import apply_overrides
from emulator.sim.engine import Engine
from emulator.sim.policies import POLICY_REGISTRY

#: How much the break pass's QPS buttons scale the offered load.
QPS_FACTORS = (0.5, 1.5, 2.0)


def run_facts(scenario: Any) -> dict[str, Any]:
    """What a run's charts draw besides its frames: each model's batching, the SLOs,
    the scheduled faults (time and command) and the frame interval."""
    return {
        "batching": {m: scenario.worker_for(m).batching for m in scenario.models},
        "slo": {"ttft_s": scenario.slo.ttft_s, "tpot_s": scenario.slo.tpot_s, "tbt_s": scenario.slo.tbt_s},
        "faults": [{"at_s": f.at_s, "command": f"{f.action} {f.target}"} for f in scenario.faults],
        "sample_s": scenario.sample_s,
    }


def _worker(data: dict[str, Any], model: str) -> dict[str, Any]:
    """``[worker]`` with ``[models.NAME.worker]`` over it, as plain dicts."""
    base = data.get("worker") or {}
    spec = (data.get("models") or {}).get(model) or {}
    own = spec.get("worker") if isinstance(spec, dict) else None
    return {**base, **(own if isinstance(own, dict) else {})}


def _variable_service(worker: dict[str, Any]) -> bool:
    return worker.get("service", "constant") != "constant" and float(worker.get("service_cv") or 0) > 0


#: The policies that hand each batch to the worker that frees first when every batch
#: takes the same time: a cycle over identical workers reaches the one given work
#: longest ago, and pull gives it to the first idle worker.
ALIKE_UNDER_CONSTANT = ("round_robin", "pull")


def policy_equivalence(data: dict[str, Any], policies: list[str]) -> dict[str, Any] | None:
    """Whether dispatch policies give the same results on this scenario, and why.

    Under static batching with a constant batch time, round robin and pull start
    every batch at the same moment (see ``ALIKE_UNDER_CONSTANT``), so their runs are
    identical while nothing dies; least loaded can differ, since at a tie in queued
    batches it picks the lowest-numbered worker, not the one that frees first. They
    part at the first scheduled fault (what dies with a worker or dispatcher depends
    on where each policy left the batches), or when batch times vary. None when no
    two policies are alike.
    """
    alike = [p for p in policies if p in ALIKE_UNDER_CONSTANT]
    others = [p for p in policies if p not in ALIKE_UNDER_CONSTANT]
    policies = alike
    models = list(data.get("models") or {})
    if not models or len(policies) < 2:
        return None
    workers = [_worker(data, m) for m in models]
    if any(w.get("batching", "static") != "static" for w in workers):
        return None
    if any(_variable_service(w) for w in workers):
        return None
    faults = data.get("faults") or []
    deaths = [float(f.get("at_s", 0)) for f in faults if isinstance(f, dict) and f.get("kill")]
    until_s = min(deaths) if deaths else None
    service = workers[0].get("service", "constant")
    why = (
        f"Every model's batch time is constant (worker.service = \"{service}\"), so each worker "
        "finishes its batches in the order given, each in the same time: "
        f"{' and '.join(policies)} start every batch at the same moment and give identical runs"
    )
    why += (f" until the first scheduled fault (at {until_s:g} s): what is lost or orphaned when a "
            "dispatcher, worker or host dies depends on where each policy left the batches."
            if until_s is not None
            else ". They differ once batch times vary or something dies while holding batches.")
    if others:
        why += (f" ({', '.join(others)} can still differ: at a tie in queued batches it picks the "
                "lowest-numbered worker, not the one that frees first.)")
    return {
        "policies": list(policies),
        "why": why,
        "until_s": until_s,
        "differs_with": ["worker.service=\"lognormal\"", "worker.service_cv=0.5"],
    }


def valid_policies(data: dict[str, Any], policies: list[str]) -> list[str]:
    """The policies this scenario can run with (some route only continuous batching),
    the scenario's own first among them as given."""

    own = (data.get("dispatcher") or {}).get("policy", "round_robin")
    out = []
    for policy in policies:
        if policy == own:
            out.append(policy)
            continue
        trial = {**data, "dispatcher": {**(data.get("dispatcher") or {}), "policy": policy}}
        try:
            Scenario.from_dict(trial, max_requests=None)
        except ScenarioError:
            continue
        out.append(policy)
    return out


def break_controls(data: dict[str, Any] | None, policies: list[str],
                   analysis: dict[str, Any] | None = None) -> dict[str, Any]:
    """The break pass's one-click changes for a scenario dict, each a list of the
    overrides the run API takes, and the comparison worth running.

    Each control is ``{"key", "label", "options": [{"label", "overrides"}]}``; the
    option that is the scenario as written is left out. With the fleet version's
    stored ``analysis`` (its record's ``numbers.analysis``) the changes it points to
    are offered with its figures: the offered load at its capacity, the pool that
    binds scaled up, the host whose loss hurts most lost; and the suggestion is the
    one it calls for first (see ``_analysis_suggestion``).
    """
    if not data:
        return {"controls": [], "equivalent": None, "suggested": None}
    analysis = analysis or None
    policies = valid_policies(data, policies)
    dispatcher = data.get("dispatcher") or {}
    policy = dispatcher.get("policy", "round_robin")
    standby = dispatcher.get("standby", "cold")
    traffic = data.get("traffic") or {}
    qps = traffic.get("qps")
    duration = data.get("duration_s")
    faults = data.get("faults") or []
    workers = [_worker(data, m) for m in (data.get("models") or {})]
    variable = any(_variable_service(w) for w in workers)
    static = any(w.get("batching", "static") == "static" for w in workers)
    controls: list[dict[str, Any]] = [{
        "key": "dispatcher.policy", "label": "Policy",
        "options": [{"label": p, "overrides": [f"dispatcher.policy=\"{p}\""]} for p in policies if p != policy],
    }]
    has_dispatcher_fault = any(
        str(f.get("kill", "")).startswith("dispatcher") for f in faults if isinstance(f, dict)
    )
    controls.append({
        "key": "dispatcher.standby", "label": "Standby",
        "options": [{"label": s, "overrides": [f"dispatcher.standby=\"{s}\""]}
                    for s in ("cold", "replicated") if s != standby],
    })
    if static:
        controls.append({
            "key": "worker.service", "label": "Batch time",
            "options": [{"label": "constant", "overrides": ["worker.service=\"constant\"", "worker.service_cv=0"]}]
            if variable else
            [{"label": f"lognormal, cv {cv}", "overrides": ["worker.service=\"lognormal\"", f"worker.service_cv={cv}"]}
             for cv in (0.5, 1.0)],
        })
    if isinstance(qps, int | float) and qps > 0 and not traffic.get("trace"):
        options = [{"label": f"{_num(qps * f)} ({f}×)", "overrides": [f"traffic.qps={_num(qps * f)}"]}
                   for f in QPS_FACTORS]
        capacity = (analysis or {}).get("capacity_qps")
        if isinstance(capacity, int | float) and capacity > 0 and _num(capacity) != _num(qps):
            options.append({"label": f"{_qps(_num(capacity))} (the capacity)",
                            "overrides": [f"traffic.qps={_num(capacity)}"]})
        controls.append({"key": "traffic.qps", "label": "QPS", "options": options})
    admission = _admission_options(data, static)
    if admission:
        controls.append({"key": "dispatcher.admission", "label": "Admission", "options": admission})
    scale = _scale_options(data, analysis) if analysis else []
    if scale:
        controls.append({"key": "scale", "label": "Scale what binds", "options": scale})
    loss = _loss_option(data, analysis) if analysis else None
    if loss:
        controls.append({"key": "host_loss", "label": "Lose a host", "options": [loss]})
    if isinstance(duration, int | float) and duration > 0:
        # A run must outlast its scheduled faults.
        last_fault = max((float(f.get("at_s", 0)) for f in faults if isinstance(f, dict)), default=0.0)
        controls.append({
            "key": "duration_s", "label": "Duration",
            "options": [{"label": f"{_num(duration * f)} s", "overrides": [f"duration_s={_num(duration * f)}"]}
                        for f in (0.5, 2.0) if duration * f > last_fault],
        })
    if faults:
        controls.append({
            "key": "faults", "label": "Scheduled faults",
            "options": [{"label": f"without the {len(faults)} scheduled", "overrides": ["faults=[]"]}],
        })
    equivalent = policy_equivalence(data, policies)
    suggested = (_analysis_suggestion(analysis, scale, loss) if analysis else None) or _suggest(
        policy, policies, equivalent, faults, has_dispatcher_fault, standby)
    return {"controls": [c for c in controls if c["options"]], "equivalent": equivalent, "suggested": suggested}


def _admission_options(data: dict[str, Any], static: bool) -> list[dict[str, Any]]:
    """The other admission rule (and, under the predicted TTFT, a margin under the
    goal), for a fleet that batches continuously with a TTFT goal."""
    if static or (data.get("slo") or {}).get("ttft_s") is None:
        return []
    dispatcher = data.get("dispatcher") or {}
    if dispatcher.get("admission", "queue_limit") == "predicted_ttft":
        options = [{"label": "the waiting bound only (queue_limit)", "overrides": ['dispatcher.admission="queue_limit"']}]
        if dispatcher.get("admission_slack", 1.0) != 0.8:
            options.append({"label": "refuse at 0.8 x the TTFT goal", "overrides": ["dispatcher.admission_slack=0.8"]})
    else:
        options = [{"label": "refuse a predicted SLO miss (predicted_ttft)",
                    "overrides": ['dispatcher.admission="predicted_ttft"']}]
    return [o for o in options if _valid_with(data, o["overrides"])]


def _group_of_hosts(data: dict[str, Any]) -> list[int]:
    """The host group (index in ``hosts``) of each host, in the analysis's host order."""
    out: list[int] = []
    for i, group in enumerate(data.get("hosts") or []):
        if isinstance(group, dict):
            out += [i] * int(group.get("count") or 1)
    return out


def _binding(m: dict[str, Any]) -> dict[str, Any] | None:
    """A model's pool that binds in the analysis (its only pool when it has one)."""
    pools = m.get("pools") or []
    if m.get("binding_pool"):
        return next((p for p in pools if p["name"] == m["binding_pool"] or p["role"] == m["binding_pool"]), None)
    return pools[0] if len(pools) == 1 else None


def _scale_options(data: dict[str, Any], analysis: dict[str, Any]) -> list[dict[str, Any]]:
    """The host groups of each model's binding pool, scaled: to what carries the load
    to carry when the analysis finds the fleet short (at most 4×), else doubled. The
    model that saturates first comes first; an option that does not load is left out."""
    groups = _group_of_hosts(data)
    gap = (analysis.get("gaps") or {}).get("qps")
    models = analysis.get("models") or {}
    first = analysis.get("saturates_first")
    out = []
    for name in sorted(models, key=lambda n: n != first):
        m = models[name]
        pool = _binding(m)
        if pool is None or not pool.get("hosts") or m.get("share", 0) <= 0:
            continue
        indices = sorted({groups[h] for h in pool["hosts"] if h < len(groups)})
        if not indices:
            continue
        carries = name == first and isinstance(gap, int | float) and 1 < gap <= 4
        factor = gap if carries else 2.0
        counts = {i: int(data["hosts"][i].get("count") or 1) for i in indices}
        scaled = {i: max(n + 1, math.ceil(n * factor - 1e-9)) for i, n in counts.items()}
        overrides = [f"hosts[{i}].count={n}" for i, n in scaled.items()]
        if not _valid_with(data, overrides):
            continue
        what = f"{name} {pool['role']} pool" if m.get("split") else name
        before, after = sum(counts.values()), sum(scaled.values())
        out.append({
            "label": f"{what} on {before} → {after} hosts (binds at {_qps(m['capacity_qps'])})",
            "overrides": overrides, "model": name,
            "figures": {"capacity_qps": m["capacity_qps"], "binding_pool": m.get("binding_pool") or pool["name"],
                        "gap_qps": gap if carries else None},
        })
    return out


def _fault_text(fault: dict[str, Any]) -> str:
    """A scheduled fault as an inline TOML table."""
    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        return json.dumps(v) if isinstance(v, str) else f"{v!r}"

    return "{" + ", ".join(f"{k} = {value(v)}" for k, v in fault.items()) + "}"


def _loss_option(data: dict[str, Any], analysis: dict[str, Any]) -> dict[str, Any] | None:
    """The host whose loss hurts most in the analysis, lost a third of the way into the
    run (kept with the scheduled faults); None when a fault already kills it."""
    worst = analysis.get("worst_loss")
    duration = data.get("duration_s")
    if not worst or not isinstance(duration, int | float) or duration <= 0:
        return None
    target = f"host:{worst['host']}"
    faults = [f for f in data.get("faults") or [] if isinstance(f, dict)]
    if any(f.get("kill") == target for f in faults):
        return None
    at = _num(duration / 3)
    overrides = [f"faults=[{', '.join(_fault_text(f) for f in [*faults, {'at_s': at, 'kill': target}])}]"]
    if not _valid_with(data, overrides):
        return None
    down = worst.get("down") or []
    leaves = f"leaves {_qps(worst['fleet_qps'])}" + (f", {' and '.join(down)} down" if down else "")
    return {"label": f"{target} at {at:g} s ({leaves})", "overrides": overrides,
            "figures": {"host": worst["host"], "fleet_qps": worst["fleet_qps"], "down": list(down)}}


def _analysis_suggestion(analysis: dict[str, Any], scale: list[dict[str, Any]],
                         loss: dict[str, Any] | None) -> dict[str, Any] | None:
    """The comparison the stored analysis calls for: when the fleet is short of the load
    to carry, the binding pool scaled to carry it; else when one host's loss takes a
    model down, that loss; None when it calls for neither."""
    gap = (analysis.get("gaps") or {}).get("qps")
    goal = (analysis.get("goals") or {}).get("qps")
    first = next((o for o in scale if o["figures"]["gap_qps"] is not None), None)
    if isinstance(gap, int | float) and gap > 1 and first is not None:
        f = first["figures"]
        return {"label": first["label"], "overrides": first["overrides"], "from_analysis": True,
                "why": f"The analysis puts {first['model']}'s capacity at {_qps(f['capacity_qps'])} "
                       f"({f['binding_pool']} binds), {gap:.3g}x short of the {_qps(goal)} to carry: "
                       "does scaling what binds carry it?"}
    if loss is not None and loss["figures"]["down"]:
        f = loss["figures"]
        return {"label": f"losing host:{f['host']}", "overrides": loss["overrides"], "from_analysis": True,
                "why": f"The analysis says losing host:{f['host']} takes {' and '.join(f['down'])} down "
                       f"(the fleet is left {_qps(f['fleet_qps'])}): see what the loss costs in a run."}
    return None


def _suggest(
    policy: str,
    policies: list[str],
    equivalent: dict[str, Any] | None,
    faults: list[Any],
    has_dispatcher_fault: bool,
    standby: str,
) -> dict[str, Any] | None:
    """The second run worth comparing with the scenario as written: a change that
    makes a difference under the scenario's own assumptions."""
    others = [p for p in policies if p != policy]
    other = "pull" if "pull" in others else (others[0] if others else None)
    if equivalent is None and other:
        return {"label": f"policy {other}", "overrides": [f"dispatcher.policy=\"{other}\""],
                "why": f"The policy decides which worker waits: compare {policy} with {other}."}
    if has_dispatcher_fault and standby != "replicated":
        return {"label": "a replicated standby", "overrides": ["dispatcher.standby=\"replicated\""],
                "why": "A dispatcher is scheduled to die: a replicated standby keeps its queue."}
    if equivalent is not None and equivalent["until_s"] is not None and other:
        return {"label": f"policy {other}", "overrides": [f"dispatcher.policy=\"{other}\""],
                "why": f"The runs match until {equivalent['until_s']:g} s and part at the fault."}
    if faults:
        return {"label": "no scheduled faults", "overrides": ["faults=[]"],
                "why": "The same system without its scheduled faults shows what the faults cost."}
    if equivalent is not None:
        return {"label": "variable batch times", "overrides": list(equivalent["differs_with"]),
                "why": "The doc assumes constant batch times, under which the policies are identical; "
                       "variable batch times show whether the design holds without that assumption."}
    return None


def _num(value: float) -> int | float:
    """A whole number as an int (for override text), else rounded to 3 decimals."""
    return int(round(value)) if abs(value - round(value)) < 1e-9 or value >= 100 else round(value, 3)


def page_facts(data: dict[str, Any] | None, toml: str | None = None,
               record: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the session page draws from its fleet's scenario dict: the break pass's
    controls (``breakControls``), the trace pass's path (``tracePath``) and the keys a
    sweep offers with their default values (``sweepKeys``). ``toml`` is the fleet
    config as written: the path has only the components it names; its hop figures come
    from the fleet version's stored analysis ``record`` when given."""

    policies = list(POLICY_REGISTRY)
    written = written_tables(toml)
    analysis = ((record or {}).get("numbers") or {}).get("analysis")
    return {"breakControls": break_controls(data, policies, analysis), "tracePath": trace_path(data, written, analysis),
            "sweepKeys": sweep_keys(data)}


def written_tables(toml: str | None) -> set[str] | None:
    """The top-level keys and tables of a fleet config's TOML (None: no text, or not TOML)."""
    if not toml:
        return None
    try:
        return set(tomllib.loads(toml))
    except tomllib.TOMLDecodeError:
        return None


def _qps(value: Any) -> str:
    return show(None if value is None else Fraction(value), "QPS")


def _analysis_facts(analysis: dict[str, Any], model: str, roles: tuple[str, ...]) -> list[str]:
    """A model's capacity, per pool, and what the worst host's loss leaves, as the one
    analysis gives them."""
    m = (analysis.get("models") or {}).get(model)
    if not m:
        return []
    facts = [f"{model}: {p['role']} pool {_qps(p['capacity_qps'])}" for p in m["pools"] if p["role"] in roles
             and len(m["pools"]) > 1]
    if "whole" in roles or "decode" in roles:
        binding = f", {m['binding_pool']} binds" if m.get("binding_pool") else ""
        facts.append(f"{model}: capacity {_qps(m['capacity_qps'])}{binding}")
        worst = m.get("worst_loss")
        if worst is not None:
            facts.append(f"{model}: host:{worst['host']} lost leaves {_qps(worst['capacity_qps'])}"
                         + (" (down)" if worst["down"] else ""))
    return facts



#: How a sweep's default values scale a key's current value.
SWEEP_FACTORS = (0.25, 0.5, 1, 2, 4)
HOST_COUNT_FACTORS = (0.5, 1, 2, 4, 8)


def _valid_with(data: dict[str, Any], overrides: list[str]) -> bool:
    """Whether the scenario with ``overrides`` applied is one the emulator accepts."""

    try:
        Scenario.from_dict(apply_overrides(data, overrides), max_requests=None)
    except (ScenarioError, ValueError, TypeError, KeyError):
        return False
    return True


def _scaled(value: float, factors: tuple[float, ...], whole: bool) -> list[float]:
    out: list[float] = []
    for factor in factors:
        v = value * factor
        v = max(1, int(v)) if whole else float(f"{v:.3g}")
        if v not in out:
            out.append(v)
    return out


def sweep_keys(data: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The keys worth sweeping on this scenario, each with default values that keep it valid.

    Every host group's count, the offered load (without a trace) and the batching's
    worker keys that hold a number. Each key's ``values`` are the candidates the
    emulator accepts with the scheduled faults kept, ``values_without_faults`` those it
    accepts with them dropped (fewer hosts than a fault names is valid only then).
    A key whose candidates all fail is left out, so the defaults always start a sweep.
    """
    def override_text(key: str, value: float) -> str:  # as a sweep spells its points
        return f"{key}={int(value) if float(value).is_integer() else value}"

    if not isinstance(data, dict) or not _valid_with(data, []):
        return []
    candidates: list[tuple[str, str, list[float]]] = []
    for i, group in enumerate(data.get("hosts") or []):
        if not isinstance(group, dict):
            continue
        n = int(group.get("count") or 1)
        models = sorted({str(s.get("model", "") if isinstance(s, dict) else s).split("@")[0]
                         for s in group.get("workers") or []})
        label = f"hosts[{i}].count ({n} host{'s' if n != 1 else ''} of {' + '.join(models) or 'no worker'})"
        candidates.append((f"hosts[{i}].count", label, _scaled(n, HOST_COUNT_FACTORS, whole=True)))
    traffic = data.get("traffic") or {}
    qps = traffic.get("qps")
    if isinstance(qps, int | float) and qps > 0 and not traffic.get("trace"):
        candidates.append(("traffic.qps", f"traffic.qps (offered load, {qps:g} QPS)",
                           _scaled(qps, SWEEP_FACTORS, whole=False)))
    worker = data.get("worker") or {}
    continuous = worker.get("batching") == "continuous"
    for key in ("kv_cache_tokens", "max_num_seqs", "max_batched_tokens") if continuous else ("batch_s",):
        value = worker.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            whole = isinstance(value, int)
            candidates.append((f"worker.{key}", f"worker.{key} ({value:g})", _scaled(value, SWEEP_FACTORS, whole)))
    max_batch = (data.get("dispatcher") or {}).get("max_batch_tokens")
    if not continuous and isinstance(max_batch, int | float) and max_batch > 0:
        candidates.append(("dispatcher.max_batch_tokens", f"dispatcher.max_batch_tokens ({max_batch:g})",
                           _scaled(max_batch, SWEEP_FACTORS, isinstance(max_batch, int))))
    keys = []
    for key, label, values in candidates:
        kept = [v for v in values if _valid_with(data, [override_text(key, v)])]
        dropped = [v for v in values if _valid_with(data, ["faults=[]", override_text(key, v)])]
        if kept or dropped:
            keys.append({"key": key, "label": label, "values": kept, "values_without_faults": dropped})
    return keys


def _workers_by_model(data: dict[str, Any]) -> dict[str, int]:
    """How many workers of each model the host groups place (``"chat@0"`` slots)."""
    counts: dict[str, int] = {}
    for group in data.get("hosts") or []:
        if not isinstance(group, dict):
            continue
        for slot in group.get("workers") or []:
            model = str(slot.get("model", "") if isinstance(slot, dict) else slot).split("@")[0]
            counts[model] = counts.get(model, 0) + int(group.get("count") or 0)
    return counts


def _seconds(value: Any) -> str:
    return "none" if value in (None, "none", "never") else f"{value} s"


def _pools(spec: dict[str, Any]) -> dict[str, Any] | None:
    """A model's ``[models.NAME.disaggregated]`` table when it names both pools."""
    pools = spec.get("disaggregated") if isinstance(spec, dict) else None
    if isinstance(pools, dict) and "prefill_workers" in pools and "decode_workers" in pools:
        return pools
    return None


def _pool_workers(data: dict[str, Any], model: str, pool: str) -> int:
    """Workers of ``model`` on the host groups of pool ``pool``."""
    count = 0
    for group in data.get("hosts") or []:
        if isinstance(group, dict) and group.get("pool") == pool:
            for slot in group.get("workers") or []:
                name = str(slot.get("model", "") if isinstance(slot, dict) else slot).split("@")[0]
                count += int(group.get("count") or 0) if name == model else 0
    return count


def _transfer_facts(model: str, pools: dict[str, Any]) -> list[str]:
    """The KV transfer's figures of a disaggregated model, in words where known."""
    lines = []
    for key, value in pools.items():
        if key in ("prefill_workers", "decode_workers"):
            continue
        if key == "kv_transfer_gb_s":
            lines.append(f"{model}: {value:g} GB/s a decode worker" if isinstance(value, int | float)
                         else f"{model}: {key} {value}")
        elif key == "decider_threshold_tokens":
            if pools.get("decider") == "uncached":
                lines.append(f"{model}: at most {value} tokens not cached on the picked prefill worker: on decode")
            else:
                lines.append(f"{model}: prompts of at most {value} tokens on decode")
        elif key == "decider":
            continue  # said with the threshold
        elif key == "decider_max_prefill_queue":
            if value:  # (0: no bound)
                lines.append(f"{model}: on decode while {value} wait for prefill")
        else:
            lines.append(f"{model}: {key} {value}")
    return lines or [f"{model}: prefill to decode"]


def _auto_kv_tokens(data: dict[str, Any], model: str) -> int | None:
    """A model's ``kv_cache_tokens = "auto"`` as the emulator resolves it from the
    hardware and the model's arch (None when the scenario does not load)."""

    try:
        return int(Scenario.from_dict(data, max_requests=None).worker_for(model).kv_cache_tokens)
    except (ScenarioError, KeyError, TypeError, ValueError):
        return None


def trace_path(data: dict[str, Any] | None, written: set[str] | None = None,
               analysis: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The request's path through the system the scenario describes, in order.

    Each hop is ``{"key", "label", "facts": [...]}``; its key is the hop findings are
    filed against. The client and routing always appear; the gateway when the
    config has a ``[gateway]`` table (``written``: the tables of the config as
    written, since a resolved scenario has every table); the dispatchers' queues
    only where requests wait in one (batches are closed there under static
    batching, and held there under pull), one queue per model's dispatcher;
    prefill and decode pools with the KV transfer between them for models served
    disaggregated, the workers for the others; the response path last.
    """
    if not data:
        return []
    models: dict[str, Any] = data.get("models") or {}
    dispatcher = data.get("dispatcher") or {}
    client = data.get("client") or {}
    gateway = data.get("gateway") or {}
    traffic = data.get("traffic") or {}
    placed = _workers_by_model(data)
    policy = dispatcher.get("policy", "round_robin")
    standby = dispatcher.get("standby", "cold")
    workers = {m: _worker(data, m) for m in models}
    static = [m for m in models if workers[m].get("batching", "static") == "static"]
    hops: list[dict[str, Any]] = [
        {"key": "client", "label": "Client", "facts": [
            f"timeout {_seconds(client.get('timeout_s', 60))}", f"retries {client.get('retries', 0)}",
            f"{_num(float(traffic.get('qps') or 0))} QPS offered" if not traffic.get("trace") else f"trace {traffic['trace']}"]},
    ]
    if "gateway" in (written if written is not None else data):
        hops.append({"key": "gateway", "label": "Gateway", "facts": [
            f"{gateway.get('instances', 2)} instances",
            f"limit {gateway['rate_limit_qps']}/s per key" if gateway.get("rate_limit_qps") else "no rate limit",
            "counters per instance" if gateway.get("shared_counter") is False else "shared counter"]})
    hops += [
        {"key": "routing", "label": f"Routing: {policy}", "facts": [
            *(f"{m}: {round(100 * float(spec.get('share', 0)))}% of traffic" for m, spec in models.items()),
            "workers pull work when idle" if policy == "pull" else "pushed to a chosen worker"]},
    ]
    if static or policy == "pull":
        # One dispatcher per model, each with its own queue (under pull every model's
        # requests wait in theirs; else only the statically batched models').
        queued_models = list(models) if policy == "pull" else static
        limit = dispatcher.get("queue_limit") or "unbounded"
        facts = [f"{m}: queue {limit}" for m in queued_models]
        if static:
            facts.append(f"batches of {dispatcher.get('max_batch_tokens', 10000)} tokens, "
                         f"close after {_seconds(dispatcher.get('close_after_s'))}")
        facts.append(f"standby {standby}, failover {_seconds(dispatcher.get('failover_s', 3.0))}")
        label = "Dispatcher queue" if len(queued_models) == 1 else f"{len(queued_models)} dispatchers, a queue each"
        hops.append({"key": "dispatcher", "label": label, "facts": facts})
    split = {m: _pools(spec) for m, spec in models.items()}
    disaggregated = [m for m in models if split[m]]
    together = [m for m in models if not split[m]]
    if disaggregated:
        def pool(m: str, side: str) -> str:
            size = split[m][side]  # type: ignore[index]
            if isinstance(size, str):  # a pool name: the host groups with pool = NAME
                n = _pool_workers(data, m, size)
                return f"{m}: {n} worker{'' if n == 1 else 's'} (pool \"{size}\")"
            return f"{m}: {size} worker{'' if size == 1 else 's'}"

        hops.append({"key": "prefill_pool", "label": "Prefill pool",
                     "facts": [pool(m, "prefill_workers") for m in disaggregated]
                     + [f for m in disaggregated for f in _analysis_facts(analysis or {}, m, ("prefill",))]})
        hops.append({"key": "kv_transfer", "label": "KV transfer",
                     "facts": [line for m in disaggregated for line in _transfer_facts(m, split[m])]})  # type: ignore[arg-type]
        hops.append({"key": "decode_pool", "label": "Decode pool",
                     "facts": [pool(m, "decode_workers") for m in disaggregated]
                     + [f for m in disaggregated for f in _analysis_facts(analysis or {}, m, ("decode",))]})
    if together:
        facts = []
        for m in together:
            w = workers[m]
            units = (models[m] or {}).get("worker_units", "?")
            facts.append(f"{m}: {placed.get(m, 0)} × {units} units")
            if w.get("batching", "static") == "static":
                facts.append(f"{m}: {w.get('batch_s', 1.5)} s per batch, {w.get('service', 'constant')}")
                if not analysis:
                    per_batch = int(dispatcher.get("max_batch_tokens", 10000)) // max(1, int(models[m].get("tokens") or 1))
                    batch_s = float(w.get("batch_s") or 1.5)
                    facts.append(f"{m}: capacity {_num(placed.get(m, 0) * per_batch / batch_s)} req/s")
            else:
                kv = w.get("kv_cache_tokens", 200000)
                facts.append(f"{m}: continuous, {w.get('max_num_seqs', 256)} seqs")
                if kv == "auto":
                    resolved = _auto_kv_tokens(data, m)
                    facts.append(f"{m}: KV {resolved:,} tokens a worker (what memory leaves)" if resolved
                                 else f"{m}: KV sized from memory")
                else:
                    facts.append(f"{m}: KV {kv} tokens a worker")
            facts += _analysis_facts(analysis or {}, m, ("whole",))
        hops.append({"key": "worker", "label": "Workers", "facts": facts})
    queued = static or policy == "pull"  # requests wait in a dispatcher's queue
    hops.append({"key": "response_path", "label": "Response path", "facts": [
        ("mapping survives failover" if standby == "replicated" else "mapping lost with the dispatcher")
        if queued else "tokens stream back through the router",
        f"client gives up after {_seconds(client.get('timeout_s', 60))}"]})
    return hops


#: Most simulated requests the comparisons tried at page time may cost, all together.
MEASURE_BUDGET = 3_000_000


def _headline(summary: dict[str, Any]) -> dict[str, Any]:
    offered = summary.get("offered") or 0
    share = (lambda n: n / offered) if offered else (lambda n: 0.0)
    return {
        "ok_share": share(summary.get("ok", 0)),
        "lost_share": share(summary.get("lost", 0) + summary.get("timed_out", 0) + summary.get("orphaned", 0)),
        "p99_s": (summary.get("latency_s") or {}).get("p99"),
        "goodput": summary.get("slo_goodput"),
        "exact": {k: summary.get(k) for k in ("ok", "timed_out", "lost", "orphaned", "shed")}
        | {"latency_s": summary.get("latency_s")},
    }


def _differs(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """A difference a reader sees in the run's table: half a point of requests served
    or failed, 5% of p99, or a point of goodput."""
    if abs(a["ok_share"] - b["ok_share"]) >= 0.005 or abs(a["lost_share"] - b["lost_share"]) >= 0.005:
        return True
    p, q = a["p99_s"], b["p99_s"]
    if (p is None) != (q is None) or (p and q and abs(p - q) >= 0.05 * max(p, q)):
        return True
    g, h = a["goodput"], b["goodput"]
    return g is not None and h is not None and abs(g - h) >= 0.01


def _describe(a: dict[str, Any], b: dict[str, Any]) -> str:
    def p99(v: float | None) -> str:
        return "none" if v is None else f"{v:.2f} s"

    text = f"ok {100 * a['ok_share']:.1f}% → {100 * b['ok_share']:.1f}%, p99 {p99(a['p99_s'])} → {p99(b['p99_s'])}"
    if a["goodput"] is not None and b["goodput"] is not None:
        text += f", goodput {100 * a['goodput']:.0f}% → {100 * b['goodput']:.0f}%"
    return text


def measured_comparison(data: dict[str, Any] | None, policies: list[str], seed: int | None = None,
                        analysis: dict[str, Any] | None = None) -> dict[str, Any]:
    """The break pass's advice checked by running the emulator: which policies give
    identical runs on this scenario (same seed), and the first comparison, in order
    of interest, whose run differs visibly from the scenario as written, with the
    measured difference. Falls back to ``break_controls``' reasoning when the runs
    would cost more than ``MEASURE_BUDGET`` simulated requests. With the stored
    ``analysis`` the comparison it calls for is tried first."""

    facts = break_controls(data, policies, analysis)
    out = {"equivalent": facts["equivalent"], "suggested": facts["suggested"], "measured": False}
    if not data:
        return out
    policies = valid_policies(data, policies)
    try:
        base_scenario = Scenario.from_dict(data, max_requests=None)
    except ScenarioError:
        return out
    candidates = _candidates(data, policies, facts)
    if base_scenario.expected_requests() * (1 + len(candidates)) > MEASURE_BUDGET:
        out["note"] = "not measured: the runs would be too large to try here"
        return out
    run_seed = base_scenario.seed if seed is None else seed

    def headline(overrides: list[str]) -> dict[str, Any] | None:
        try:
            scenario = Scenario.from_dict(apply_overrides(data, overrides), max_requests=None)
        except ScenarioError:
            return None
        engine = Engine(scenario, seed=run_seed)
        engine.advance_to(scenario.duration_s)
        return _headline(engine.summary().to_dict())

    base = headline([])
    assert base is not None
    policy = (data.get("dispatcher") or {}).get("policy", "round_robin")
    tried: dict[str, dict[str, Any] | None] = {}
    for c in candidates:
        tried[c["label"]] = headline(c["overrides"])
    same = [policy] + [c["policy"] for c in candidates
                       if c.get("policy") and tried[c["label"]] and tried[c["label"]]["exact"] == base["exact"]]
    if len(same) >= 2:
        rule = facts["equivalent"]
        why = rule["why"] if rule and set(same) <= set(rule["policies"]) else (
            f"{' and '.join(same)} gave identical runs on this scenario (seed {run_seed}), "
            "request for request.")
        out["equivalent"] = {**(rule or {"until_s": None, "differs_with": []}), "policies": same, "why": why}
    elif not (facts["equivalent"] and facts["equivalent"]["until_s"] is not None):
        # Alike until a scheduled fault is still worth saying; alike throughout it was not.
        out["equivalent"] = None
    out["suggested"] = None
    for c in candidates:
        result = tried[c["label"]]
        if result is not None and _differs(base, result):
            out["suggested"] = {"label": c["label"], "overrides": c["overrides"], "why": c["why"],
                                "measured": _describe(base, result)}
            break
    out["measured"] = True
    return out


def _candidates(data: dict[str, Any], policies: list[str], facts: dict[str, Any]) -> list[dict[str, Any]]:
    """The comparisons worth trying, most interesting first."""
    dispatcher = data.get("dispatcher") or {}
    policy = dispatcher.get("policy", "round_robin")
    faults = data.get("faults") or []
    out = [{"label": f"policy {p}", "policy": p, "overrides": [f"dispatcher.policy=\"{p}\""],
            "why": f"The policy decides which worker waits: {policy} against {p}."}
           for p in sorted((p for p in policies if p != policy), key=lambda p: p != "pull")]
    if any(str(f.get("kill", "")).startswith("dispatcher") for f in faults if isinstance(f, dict)) \
            and dispatcher.get("standby", "cold") != "replicated":
        out.append({"label": "a replicated standby", "overrides": ["dispatcher.standby=\"replicated\""],
                    "why": "A dispatcher is scheduled to die: a replicated standby keeps its queue."})
    if faults:
        out.append({"label": "no scheduled faults", "overrides": ["faults=[]"],
                    "why": "The same system without its scheduled faults shows what the faults cost."})
    suggested = facts["suggested"]
    if suggested and suggested.get("from_analysis") and not any(c["overrides"] == suggested["overrides"] for c in out):
        # The stored analysis's own suggestion (a binding pool scaled, a host lost): first.
        out.insert(0, {"label": suggested["label"], "overrides": suggested["overrides"], "why": suggested["why"]})
    equivalent = facts["equivalent"]
    if equivalent is not None:
        out.append({"label": "variable batch times", "overrides": list(equivalent["differs_with"]),
                    "why": "The doc assumes constant batch times; variable ones show whether the design "
                           "holds without that assumption."})
    qps = (data.get("traffic") or {}).get("qps")
    if isinstance(qps, int | float) and qps > 0 and not (data.get("traffic") or {}).get("trace"):
        out.append({"label": "1.5× the QPS", "overrides": [f"traffic.qps={_num(qps * 1.5)}"],
                    "why": "The load the doc expects, plus half: where does it give way?"})
    return out
