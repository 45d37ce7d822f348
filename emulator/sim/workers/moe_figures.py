"""What the ``continuous`` worker model tells about a mixture of experts under the
roofline: per frame, the mean routed experts a MoE layer's decode step hits and the mean
weights it reads, over the decode-only steps that ended in the frame (a stretch's steps
counted when it ends); and the same over the run for the summary.

A worker adds each decode-only step's weights term (``Worker.r_wtab`` at its batch) to
``moe_w`` and counts it in ``moe_steps``; the weights term is linear in the experts hit,
so the frame's mean term gives the mean experts hit and the mean bytes read exactly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from emulator.scenario import Scenario
    from emulator.sim.workers.entities import Worker

#: Per-model frame figures added when a model is a mixture of experts on the roofline:
#: mean experts hit a MoE layer per decode step, and mean GB of weights read per step.
MOE_FRAME_KEYS = ("moe_experts_hit", "moe_weights_gb")


class MoeFigures:
    """The frame figures of the models that are mixtures (``models``: their indices)."""

    def __init__(self, scenario: Scenario, names: list[str], models: set[int]) -> None:
        #: By model: the weights term with no expert read, that of one expert in every
        #: MoE layer, and the bytes a second the term divides (seconds to GB).
        self.terms: dict[int, tuple[float, float, float]] = {}
        for m in models:
            roof = scenario.roofline_for(names[m])
            assert roof is not None and roof.moe
            per_s = roof.units * roof.gpu.bytes_per_s * roof.mbu
            rest = roof.weight_bytes - roof.shape.routed_params_b * 10**9 * roof.dtype_bytes  # no expert read
            self.terms[m] = (float(rest / per_s),
                             float(roof.shape.moe_layers * roof.expert_bytes / per_s), float(per_s))
        self.mark: dict[int, tuple[int, float]] = dict.fromkeys(models, (0, 0.0))

    def add(self, model: int, workers: list[Worker], out: dict[str, Any]) -> None:
        """The frame's figures of ``model`` (None: not a mixture, or no decode step)."""
        if model not in self.terms:
            out.update(dict.fromkeys(MOE_FRAME_KEYS))
            return
        steps = sum(wk.moe_steps for wk in workers)
        total = sum(wk.moe_w for wk in workers)
        steps0, total0 = self.mark[model]
        self.mark[model] = (steps, total)
        if steps == steps0:
            out.update(dict.fromkeys(MOE_FRAME_KEYS))
            return
        out["moe_experts_hit"], out["moe_weights_gb"] = self._means(model, steps - steps0, total - total0)

    def summary(self, model: int, workers: list[Worker]) -> dict[str, Any]:
        """``model``'s figures over the run (``Outcomes.moe``; empty if not a mixture):
        its decode-only steps, the mean experts hit a MoE layer and weights read."""
        if model not in self.terms:
            return {}
        steps = sum(wk.moe_steps for wk in workers)
        hit, gb = self._means(model, steps, sum(wk.moe_w for wk in workers)) if steps else (None, None)
        return {"decode_steps": steps, "experts_hit_mean": hit, "weights_read_gb_mean": gb}

    def _means(self, model: int, steps: int, total: float) -> tuple[float, float]:
        """The mean experts hit and GB read of ``steps`` steps whose terms sum to ``total``."""
        rest, layer, per_s = self.terms[model]
        mean = total / steps
        return (mean - rest) / layer, mean * per_s / 1e9
