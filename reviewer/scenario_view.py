"""What the break and trace passes show about the system under review, read from
its scenario: the facts a run's charts need (which models batch continuously,
the SLOs, the scheduled faults), and the one-click changes the break pass offers
(with the comparison worth making under the scenario's own assumptions).

Pure functions of a scenario (an ``emulator.scenario.Scenario``, or its dict in
the TOML spelling for the page's config); nothing here touches the database.
"""

from __future__ import annotations

from typing import Any

#: How much the break pass's QPS buttons scale the offered load.
QPS_FACTORS = (0.5, 1.5, 2.0)


def run_facts(scenario: Any) -> dict[str, Any]:
    """What a run's charts draw besides its frames: each model's batching, the SLOs,
    the scheduled faults (time and command) and the frame interval."""
    return {
        "batching": {m: scenario.worker_for(m).batching for m in scenario.models},
        "slo": {"ttft_s": scenario.slo.ttft_s, "tpot_s": scenario.slo.tpot_s},
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


def break_controls(data: dict[str, Any] | None, policies: list[str]) -> dict[str, Any]:
    """The break pass's one-click changes for a scenario dict, each a list of the
    overrides the run API takes, and the comparison worth running.

    Each control is ``{"key", "label", "options": [{"label", "overrides"}]}``; the
    option that is the scenario as written is left out.
    """
    if not data:
        return {"controls": [], "equivalent": None, "suggested": None}
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
        controls.append({
            "key": "traffic.qps", "label": "QPS",
            "options": [{"label": f"{_num(qps * f)} ({f}×)", "overrides": [f"traffic.qps={_num(qps * f)}"]}
                        for f in QPS_FACTORS],
        })
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
    suggested = _suggest(policy, policies, equivalent, faults, has_dispatcher_fault, standby)
    return {"controls": [c for c in controls if c["options"]], "equivalent": equivalent, "suggested": suggested}


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


def page_facts(data: dict[str, Any] | None) -> dict[str, Any]:
    """What the session page draws from its fleet's scenario dict: the break pass's
    controls (``breakControls``) and the trace pass's path (``tracePath``)."""
    from emulator.sim.policies import POLICY_REGISTRY

    policies = list(POLICY_REGISTRY)
    return {"breakControls": break_controls(data, policies), "tracePath": trace_path(data)}


def trace_path(data: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The request's path through the system the scenario describes (filled in below)."""
    return []
