"""How far measured step times sit above the pure roofline (mbu = mfu = 1).

For a group of measurements whose model and hardware the catalog knows, each point gets
its roofline floor: a prompt point is one prefill step that reads the weights and the
KV of its batch x prompt tokens and computes those tokens; a token point is one decode
step of ``batch`` sequences at context prompt + output / 2. The floor is physics at full
bandwidth and full FLOPs, so the ratio measured / floor says how much of the machine a
real engine leaves unused: it is never a prediction. The floor leaves the tensor-parallel
communication out (the GPU's link is not given to it): the collectives' latency is a
measured figure, not physics.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from emulator.analysis.calibration import Group, Point
from emulator.scenario.hardware import GPUS, MODEL_SHAPES, Roofline

#: Measurement spellings (SplitwiseSim's) to catalog names. A power-capped H100 has the
#: same memory bandwidth and peak FLOPs: the same floor.
HARDWARE = {
    "a100-80gb": "A100-80GB",
    "h100-80gb": "H100-SXM-80GB",
    "h100-80gb-pcap": "H100-SXM-80GB",
}
MODELS = {"llama2-70b": "Llama-2-70B", "llama2-7b": "Llama-2-7B"}


def roofline_for(group: Group, dtype_bytes: int = 2, *, communication: bool = False) -> Roofline | None:
    """The roofline of the group's model on its tensor-parallel GPUs, or None when the
    catalog does not know the model or the hardware; the floor's (no communication)
    unless ``communication``."""
    gpu = GPUS.get(HARDWARE.get(group.hardware, group.hardware))
    shape = MODEL_SHAPES.get(MODELS.get(group.model, group.model))
    if gpu is None or shape is None:
        return None
    return Roofline(
        gpu=gpu if communication else replace(gpu, link_gb_s=None, collective_us=None),
        shape=shape,
        units=group.tp,
        dtype_bytes=Fraction(dtype_bytes),
        memory_utilization=Fraction(9, 10),
    )


def floor_s(roofline: Roofline, point: Point) -> float:
    """The roofline floor of one measured step, in seconds."""
    if point.kind == "prompt":
        tokens = point.batch_size * point.prompt_size
        return float(roofline.step_s(tokens, tokens))
    context = Fraction(point.prompt_size) + Fraction(point.token_size or 0, 2)
    return float(roofline.step_s(point.batch_size * context, point.batch_size))


def floors(group: Group) -> list[float] | None:
    """Every point's roofline floor (None when the catalog cannot say)."""
    roofline = roofline_for(group)
    if roofline is None:
        return None
    return [floor_s(roofline, p) for p in group.points]
