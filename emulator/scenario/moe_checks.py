"""Checks of a mixture of experts' keys in ``[models.NAME.arch]``: ``experts``,
``experts_per_token``, ``shared_experts``, ``moe_layers``, ``expert_params_b`` and
``expert_parallel``.

Each raises ``ScenarioError`` with the key path and the fix. ``checks`` calls ``values``
while it reads an arch table, ``check_shape`` once the shape is known and
``check_expert_parallel`` once the model's worker is resolved.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emulator.scenario.errors import ScenarioError

if TYPE_CHECKING:
    from emulator.scenario.checks import _Table
    from emulator.scenario.hardware import ModelShape
    from emulator.scenario.specs import HardwareSpec, ModelSpec, WorkerSpec

#: The keys that describe the experts (``expert_parallel`` is how they are served).
SHAPE_KEYS = ("experts", "experts_per_token", "shared_experts", "moe_layers", "expert_params_b")
#: ``experts_read``: the experts a step's tokens hit (expected under uniform routing), or
#: all of them every step (the model costed as if dense, for comparison).
EXPERTS_READ = ("hit", "all")
_EXAMPLE = "experts = 8, experts_per_token = 2, moe_layers = 32, expert_params_b = 0.176"


def values(t: _Table) -> dict[str, Any]:
    """The expert keys given in an arch table, typed."""
    out: dict[str, Any] = {}
    for name in ("experts", "experts_per_token", "moe_layers"):
        if t.has(name):
            out[name] = t.integer(name, low=1)
    if t.has("shared_experts"):
        out["shared_experts"] = t.integer("shared_experts", low=0)
    if t.has("expert_params_b"):
        out["expert_params_b"] = t.number("expert_params_b", positive=True)
    if t.has("expert_parallel"):
        out["expert_parallel"] = t.integer("expert_parallel", low=1)
    if t.has("experts_read"):
        out["experts_read"] = t.choice("experts_read", EXPERTS_READ)
    return out


def check_shape(t: _Table, shape: ModelShape) -> None:
    """A mixture's numbers fit together: all of them or none, k at most E, MoE layers
    at most the layers, the routed experts within the parameters and the active ones."""
    given = [k for k in SHAPE_KEYS if t.has(k) and k != "shared_experts"]
    if shape.experts == 0:
        if given or t.has("shared_experts"):
            missing = "experts" if "experts" not in given else given[0]
            raise ScenarioError(
                t.key(missing), "a mixture of experts needs every one of experts, experts_per_token, "
                "moe_layers and expert_params_b",
                f"give them all ({_EXAMPLE}), or name a catalog mixture such as model = \"Mixtral-8x7B\"",
            )
        for name in ("expert_parallel", "experts_read"):
            if t.has(name):
                raise ScenarioError(
                    t.key(name), "applies to a mixture of experts, but the model has none",
                    f"remove {name}, or describe the experts (experts, experts_per_token, "
                    "moe_layers, expert_params_b)",
                )
        return
    for name in ("experts_per_token", "moe_layers", "expert_params_b"):
        if not getattr(shape, name):
            raise ScenarioError(
                t.key(name), "missing: the model has experts", f"give it ({_EXAMPLE})",
            )
    if shape.experts_per_token > shape.experts:
        raise ScenarioError(
            t.key("experts_per_token"),
            f"{shape.experts_per_token} is more than the {shape.experts} routed experts",
            "a token picks at most every routed expert: lower experts_per_token or raise experts",
        )
    if shape.moe_layers > shape.layers:
        raise ScenarioError(
            t.key("moe_layers"), f"{shape.moe_layers} is more than the {shape.layers} layers",
            "count the layers whose MLP is a mixture (at most layers)",
        )
    routed = shape.routed_params_b
    if routed >= shape.params_b:
        raise ScenarioError(
            t.key("expert_params_b"),
            f"{shape.moe_layers} MoE layers x {shape.experts} experts x {float(shape.expert_params_b):g}B "
            f"= {float(routed):g}B is not less than params_b ({float(shape.params_b):g})",
            "expert_params_b is one expert in one layer: its gate, up and down projections "
            "(3 x hidden x expert intermediate size / 10^9)",
        )
    active = shape.params_b - routed + shape.moe_layers * shape.experts_per_token * shape.expert_params_b
    if abs(shape.active_params_b - active) > active / 10:
        raise ScenarioError(
            t.key("active_params_b"),
            f"{float(shape.active_params_b):g}B does not match the experts: params_b - routed experts + "
            f"MoE layers x experts_per_token x expert_params_b = {float(active):.4g}B",
            "give active_params_b within 10 % of that figure, or correct the expert numbers",
        )


def check_expert_parallel(model: ModelSpec, w: WorkerSpec, hardware: HardwareSpec | None) -> None:
    """``experts_read`` applies under the roofline step model; ``expert_parallel``
    spreads the experts over every GPU of the worker, under the roofline, with the link
    and the hidden size known."""
    arch = model.arch
    if arch is not None and arch.experts_read is not None and w.step_model != "roofline":
        where = ("models." + model.name + ".worker" if "step_model" in dict(model.worker_overrides)
                 else "worker")
        raise ScenarioError(
            f"models.{model.name}.arch.experts_read",
            f'needs step_model = "roofline", but {where}.step_model is "{w.step_model}"',
            f'set {where}.step_model = "roofline", or remove experts_read (the linear and table models '
            "carry the experts' cost in their fitted coefficients)",
        )
    if arch is None or (arch.expert_parallel or 1) == 1:
        return
    key = f"models.{model.name}.arch.expert_parallel"
    ep = arch.expert_parallel
    if ep != model.worker_units:
        raise ScenarioError(
            key, f"{ep} GPUs, but the worker has worker_units = {model.worker_units}",
            f"the experts spread over every GPU of the worker: set expert_parallel = {model.worker_units}, "
            "or remove it",
        )
    if w.step_model != "roofline":
        where = ("models." + model.name + ".worker" if "step_model" in dict(model.worker_overrides)
                 else "worker")
        raise ScenarioError(
            key, f'needs step_model = "roofline", but {where}.step_model is "{w.step_model}"',
            f'set {where}.step_model = "roofline" (the linear and table models carry the experts\' '
            "cost in their fitted coefficients), or remove expert_parallel",
        )
    shape = arch.shape()
    gpu = None if hardware is None else hardware.accelerator()
    if shape.hidden is None or gpu is None or gpu.link_bytes_per_s is None or gpu.collective_us is None:
        raise ScenarioError(
            key, "the all-to-all's cost needs the hidden size and the GPUs' link",
            "give arch.hidden_size (or a catalog model) and a catalog hardware.gpu (or hardware.link_gb_s "
            "and hardware.collective_us)",
        )
