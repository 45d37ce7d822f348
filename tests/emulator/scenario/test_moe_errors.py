"""Mistakes in a mixture of experts' keys (``[models.NAME.arch]`` experts,
experts_per_token, shared_experts, moe_layers, expert_params_b, expert_parallel,
experts_read): one line naming the key path and the fix; sound keys survive a round
trip through TOML."""

from __future__ import annotations

from fractions import Fraction

import pytest

from emulator import ScenarioError, load_scenario
from emulator.scenario.hardware import MODEL_SHAPES
from emulator.scenario.presets import load_preset

DSV3 = load_preset("deepseek-v3-h200")
A = "models.chat.arch"
CUSTOM = "params_b = 40, layers = 24, kv_heads = 4, head_dim = 128, hidden_size = 4096"

MISTAKES = [
    ([f"{A}.experts_per_token=300"], f"{A}.experts_per_token", "300 is more than the 256 routed experts"),
    ([f"{A}.moe_layers=70"], f"{A}.moe_layers", "70 is more than the 61 layers"),
    ([f"{A}.expert_params_b=0.2"], f"{A}.expert_params_b", "is not less than params_b (671); "
     "expert_params_b is one expert in one layer"),
    ([f"{A}.active_params_b=100"], f"{A}.active_params_b", "does not match the experts"),
    ([f"{A}.experts=0"], f"{A}.experts", "must be at least 1"),
    ([f"{A}.shared_experts=-1"], f"{A}.shared_experts", "must be at least 0"),
    ([f'{A}.experts_read="some"'], f"{A}.experts_read", "is not one of hit, all"),
    ([f"{A}.expert_parallel=4"], f"{A}.expert_parallel",
     "4 GPUs, but the worker has worker_units = 8; the experts spread over every GPU of the worker: "
     "set expert_parallel = 8"),
    (['worker.step_model="linear"'], f"{A}.expert_parallel",
     'needs step_model = "roofline", but worker.step_model is "linear"'),
    (['worker.step_model="linear"', f"{A}.expert_parallel=1", f'{A}.experts_read="all"'], f"{A}.experts_read",
     'needs step_model = "roofline", but worker.step_model is "linear"'),
    (["hardware={memory_gb = 141, hbm_tb_s = 4.8, bf16_tflops = 989.4}"], f"{A}.expert_parallel",
     "the all-to-all's cost needs the hidden size and the GPUs' link"),
    ([f'{A}={{model = "Llama-3-70B", expert_parallel = 8}}'], f"{A}.expert_parallel",
     "applies to a mixture of experts, but the model has none; remove expert_parallel"),
    ([f'{A}={{model = "Llama-3-70B", experts_read = "all"}}'], f"{A}.experts_read",
     "applies to a mixture of experts, but the model has none"),
    ([f"{A}={{{CUSTOM}, experts = 64}}"], f"{A}.experts_per_token", "missing: the model has experts"),
    ([f"{A}={{{CUSTOM}, experts_per_token = 6, moe_layers = 24}}"], f"{A}.experts",
     "a mixture of experts needs every one of experts, experts_per_token, moe_layers and expert_params_b"),
]


@pytest.mark.parametrize(("overrides", "path", "text"), MISTAKES)
def test_it_names_the_key_and_the_fix_in_one_line(overrides: list[str], path: str, text: str) -> None:
    with pytest.raises(ScenarioError) as err:
        DSV3.with_overrides(overrides)
    assert err.value.path == path, str(err.value)
    assert text in str(err.value), str(err.value)
    assert "\n" not in str(err.value)


def test_the_preset_and_a_shape_given_by_numbers_survive_a_round_trip() -> None:
    again = load_scenario(DSV3.to_toml())
    assert again.to_dict() == DSV3.to_dict()
    roof = again.roofline_for("chat")
    assert roof is not None and roof.expert_parallel == 8 and roof.experts_read == "hit"
    custom = DSV3.with_overrides([
        f"{A}={{{CUSTOM}, active_params_b = 6.592, experts = 64, experts_per_token = 6, moe_layers = 24, "
        'expert_params_b = 0.024, shared_experts = 2, experts_read = "all", dtype_bytes = 1}',
        "models.chat.worker_units=8",
    ])
    again = load_scenario(custom.to_toml())
    assert again.to_dict() == custom.to_dict()
    shape = again.models["chat"].arch.shape()  # type: ignore[union-attr]
    assert (shape.experts, shape.experts_per_token, shape.shared_experts, shape.moe_layers) == (64, 6, 2, 24)
    assert shape.expert_params_b == Fraction("0.024")
    assert again.roofline_for("chat").experts_read == "all"  # type: ignore[union-attr]


def test_a_dense_scenario_writes_no_expert_key() -> None:
    sc = load_preset("roofline-70b-h100")
    arch = sc.to_dict()["models"]["chat"]["arch"]
    assert not {"experts", "expert_parallel", "experts_read", "moe_layers"} & set(arch)
    roof = sc.roofline_for("chat")
    assert roof is not None and not roof.moe and roof.weight_bytes_read(1) == roof.weight_bytes


def test_the_catalog_mixtures_add_up_to_their_published_counts() -> None:
    # Mixtral-8x7B: 32 layers x 8 experts x 3 x 4096 x 14336; 12.9B active.
    mixtral = MODEL_SHAPES["Mixtral-8x7B"]
    assert mixtral.routed_params_b == Fraction(32 * 8 * 3 * 4096 * 14336, 10**9)
    active = mixtral.params_b - mixtral.routed_params_b + 32 * 2 * mixtral.expert_params_b
    assert abs(active - mixtral.active_params_b) < Fraction(1, 10)
    # DeepSeek-V3: 58 MoE layers x 256 routed experts x 3 x 7168 x 2048; 37B active.
    ds = MODEL_SHAPES["DeepSeek-V3"]
    assert ds.routed_params_b == Fraction(58 * 256 * 3 * 7168 * 2048, 10**9)
    active = ds.params_b - ds.routed_params_b + 58 * 8 * ds.expert_params_b
    assert abs(active - ds.active_params_b) < 1
    assert 2 * ds.layers * ds.kv_heads * ds.head_dim == 2 * 61 * 576 // 2  # 576 cached values a layer
    # One token hits k experts; a very large batch all of them; two tokens 2k - k^2/E.
    assert ds.experts_hit(1) == 8 and ds.experts_hit(10**6) == 256
    assert float(ds.experts_hit(2)) == pytest.approx(16 - 64 / 256)
