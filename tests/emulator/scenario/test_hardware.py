"""The hardware and model-shape catalog, ``kv_cache_tokens = "auto"`` and the one-line
errors of ``[hardware]`` and ``[models.NAME.arch]``."""

from __future__ import annotations

from fractions import Fraction

import pytest

from emulator import ScenarioError, load_scenario
from emulator.scenario.hardware import GPUS, MODEL_SHAPES

SCENARIO = """
name = "hw"
[traffic]
qps = 1
[hardware]
gpu = "H100-SXM-80GB"
gpu_memory_utilization = 0.9
[models.chat]
share = 1.0
worker_units = {units}
tokens = 1000
output_tokens = 200
[models.chat.arch]
model = "Llama-2-70B"
dtype_bytes = 2
[worker]
batching = "continuous"
kv_cache_tokens = "auto"
[[hosts]]
units = 8
workers = ["chat@0"]
"""


def _scenario(units: int = 2, overrides: tuple[str, ...] = ()):
    text = SCENARIO.format(units=units).replace('kv_cache_tokens = "auto"', 'kv_cache_tokens = "auto"\nstep_model = "roofline"')
    return load_scenario(text).with_overrides(list(overrides))


def test_it_lists_the_catalog_the_issue_asks_for() -> None:
    assert {"A100-40GB", "A100-80GB", "H100-SXM-80GB", "H200-141GB", "B200", "L40S", "MI300X"} <= set(GPUS)
    assert {"Llama-2-7B", "Llama-2-70B", "Llama-3-8B", "Llama-3-70B", "Mixtral-8x7B", "BLOOM-176B"} <= set(MODEL_SHAPES)
    mixtral = MODEL_SHAPES["Mixtral-8x7B"]
    assert mixtral.active_params_b < mixtral.params_b  # a mixture of experts


@pytest.mark.parametrize("units", [2, 4])
def test_it_sizes_the_kv_cache_of_llama_2_70b_on_h100s_by_the_formula(units: int) -> None:
    s = _scenario(units)
    roof = s.roofline_for("chat")
    assert roof is not None
    assert roof.kv_bytes_per_token == 327_680  # 2 x 80 layers x 8 KV heads x 128 x 2 bytes
    usable = units * 80 * 10**9 * Fraction(9, 10)
    weights = Fraction("68.98") * 10**9 * 2
    expected = int((usable - weights) // 327_680)
    assert s.worker_for("chat").kv_cache_tokens == expected
    assert expected == {2: 18_432, 4: 457_885}[units]


def test_it_takes_numbers_given_directly_instead_of_the_catalog() -> None:
    s = load_scenario(SCENARIO.format(units=1).replace('gpu = "H100-SXM-80GB"', "memory_gb = 80\nhbm_tb_s = 2\nbf16_tflops = 500")
                      .replace('model = "Llama-2-70B"', "params_b = 7\nlayers = 32\nkv_heads = 8\nhead_dim = 128"))
    roof = s.roofline_for("chat")
    assert roof is not None and roof.gpu.hbm_tb_s == 2 and roof.shape.params_b == 7
    assert roof.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2
    assert s.worker_for("chat").kv_cache_tokens == (72 * 10**9 - 14 * 10**9) // 131_072


def test_it_reads_back_auto_and_the_new_tables() -> None:
    s = _scenario(4, ("worker.step_model=roofline", "worker.mfu=0.5"))
    data = s.to_dict()
    assert data["worker"]["kv_cache_tokens"] == "auto"
    assert data["hardware"]["gpu"] == "H100-SXM-80GB"
    assert data["models"]["chat"]["arch"]["model"] == "Llama-2-70B"
    assert load_scenario(s.to_toml()) == s


MISTAKES = [
    ('hardware.gpu="H900"', "hardware.gpu", "known GPUs: A100-40GB"),
    ('models.chat.arch.model="Llama-9"', "models.chat.arch.model", "known models: Llama-2-7B"),
    ("models.chat.worker_units=1", "models.chat.arch", "do not fit in 1 x 80 GB x gpu_memory_utilization 0.9 = 72.0 GB"),
    ("hardware.gpu_memory_utilization=1.5", "hardware.gpu_memory_utilization", "more than 1"),
    ("worker.mbu=0", "worker.mbu", "must be greater than 0"),
    ("worker.mfu=1.2", "worker.mfu", "more than 1"),
    ('worker.step_model="cubic"', "worker.step_model", "is not one of linear, roofline"),
    ('worker.kv_cache_tokens="lots"', "worker.kv_cache_tokens", 'or "auto"'),
    ("models.chat.arch.active_params_b=100", "models.chat.arch.active_params_b", "more than params_b"),
    ("hardware.speed=1", "hardware.speed", "unknown key"),
    ('worker.batching="static"', "worker.step_model", "applies to continuous batching"),
]


@pytest.mark.parametrize(("override", "path", "text"), MISTAKES)
def test_it_names_each_hardware_key_and_its_fix_in_one_line(override: str, path: str, text: str) -> None:
    with pytest.raises(ScenarioError) as err:
        _scenario(2, (override,))
    assert err.value.path == path and "\n" not in str(err.value)
    assert text in str(err.value), str(err.value)


def _without(table: str) -> str:
    lines, out, skipping = SCENARIO.format(units=2).splitlines(), [], False
    for line in lines:
        if line.startswith("["):
            skipping = line.strip() == table
        if not skipping:
            out.append(line)
    return "\n".join(out)


def test_it_says_auto_needs_hardware() -> None:
    with pytest.raises(ScenarioError) as err:
        load_scenario(_without("[hardware]"))
    assert err.value.path == "worker.kv_cache_tokens"
    assert "needs the GPU" in str(err.value) and "add [hardware]" in str(err.value)


def test_it_says_auto_needs_the_models_arch() -> None:
    with pytest.raises(ScenarioError) as err:
        load_scenario(_without("[models.chat.arch]"))
    assert err.value.path == "worker.kv_cache_tokens"
    assert "add [models.chat.arch]" in str(err.value)


def test_it_says_the_roofline_needs_the_models_arch() -> None:
    text = _without("[models.chat.arch]").replace('kv_cache_tokens = "auto"', 'step_model = "roofline"')
    with pytest.raises(ScenarioError) as err:
        load_scenario(text)
    assert err.value.path == "worker.step_model" and "needs the shape of model chat" in str(err.value)


def test_it_asks_for_every_number_when_no_gpu_is_named() -> None:
    text = SCENARIO.format(units=2).replace('gpu = "H100-SXM-80GB"', "memory_gb = 80")
    with pytest.raises(ScenarioError) as err:
        load_scenario(text)
    assert err.value.path == "hardware.hbm_tb_s" and "name a gpu" in str(err.value)


def test_it_reads_all_experts_but_computes_with_the_active_ones() -> None:
    s = _scenario(2, ('models.chat.arch.model="Mixtral-8x7B"',))
    roof = s.roofline_for("chat")
    assert roof is not None
    assert roof.weight_bytes == Fraction("46.7") * 10**9 * 2  # every expert is resident
    assert roof.token_compute_s == 2 * Fraction("12.9") * 10**9 / (2 * Fraction("989.4") * 10**12)
    assert roof.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2
