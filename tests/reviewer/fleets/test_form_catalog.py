"""The fleet editor's form is read from the emulator's scenario types: every key the
emulator reads is a field, with its label, unit, value as written and the value used
when it is left out."""

from __future__ import annotations

from importlib import resources

import pytest

from emulator.scenario import Scenario
from emulator.scenario.limits import loads_toml
from reviewer.fleets.form_catalog import form_groups, label_of, unit_of
from reviewer.fleets.provenance import markable_keys

PRESETS = resources.files("emulator.scenario.presets")


def _form(name: str) -> tuple[dict, list[dict]]:
    data = loads_toml(PRESETS.joinpath(name).read_text("utf-8"))
    return data, form_groups(data, Scenario.from_dict(data))


def _fields(groups: list[dict]) -> dict[str, dict]:
    out = {}
    for g in groups:
        for f in g.get("fields", []) + [f for item in g.get("items", []) for f in item["fields"]]:
            assert f["path"] not in out, f"{f['path']} is in the form twice"
            out[f["path"]] = f
    return out


@pytest.mark.parametrize("preset", ["autoscaled-diurnal.toml", "disagg-decode-undersized.toml",
                                    "prefix-heavy-chat.toml", "roofline-70b-h100.toml", "doc-as-written.toml",
                                    "prefix-router-estimated.toml", "spec-eagle-70b-h100.toml"])
def test_every_key_the_emulator_reads_is_a_field(preset: str) -> None:
    data, groups = _form(preset)
    fields = _fields(groups)
    # Worker overrides per model are shown where the config sets them; the rest of them
    # are the [worker] keys, and the dispatcher's scorers are a table of their own. The
    # hosts and the KV tiers are lists of tables, a group of items each.
    wanted = {k for k in markable_keys(data) if ".worker." not in k and k != "hosts"
              and not k.endswith(".scorers") and k != "dispatcher.scorers" and k != "worker.kv_tiers"}
    wanted.discard("hosts")
    assert wanted - set(fields) == set()
    assert {"hosts", "kv_tiers", "speculative"} <= {g["key"] for g in groups}


def test_the_groups_are_the_ones_a_reviewer_looks_for() -> None:
    _, groups = _form("disagg-decode-undersized.toml")
    assert [g["title"] for g in groups] == [
        "Run", "Traffic", "Models", "Model architecture", "Hardware", "Service-level objectives",
        "Batching and KV cache", "Step model", "Efficiencies", "Prefix caching", "KV tiers under the prefix cache",
        "Speculative decoding", "Pools and disaggregation",
        "Dispatcher", "Clients", "Gateway", "Hosts", "Autoscaler", "Faults"]


def test_a_field_has_its_unit_its_written_value_and_the_value_used_when_left_out() -> None:
    data, groups = _form("roofline-70b-h100.toml")
    fields = _fields(groups)
    gpu = fields["hardware.gpu"]
    assert gpu["kind"] == "select" and gpu["value"] == data["hardware"]["gpu"] and gpu["value"] in gpu["options"]
    assert fields["hardware.hbm_tb_s"]["unit"] == "TB/s"
    assert fields["worker.mbu"]["unit"] == "share, 0-1"
    assert fields["slo.tpot_s"]["unit"] == "s" and fields["slo.tpot_s"]["label"] == "TPOT objective"
    assert fields["traffic.peak_qps"]["unit"] == "requests/s"
    # Left out: no value, and the emulator's own as the one used.
    assert fields["dispatcher.health_check_s"]["value"] is None
    assert fields["dispatcher.health_check_s"]["used"] == 5.0
    assert fields["worker.prefix_cache"]["kind"] == "bool"
    assert fields["autoscaler.model"]["required"] and fields["autoscaler.model"]["options"] == list(data["models"])


def test_labels_and_units_come_from_the_key_name() -> None:
    assert (label_of("health_check_s"), unit_of("health_check_s")) == ("health check", "s")
    assert (label_of("kv_transfer_gb_s"), unit_of("kv_transfer_gb_s")) == ("KV transfer", "GB/s")
    assert (label_of("output_tokens_cv"), unit_of("output_tokens_cv")) == ("output tokens variation",
                                                                           "coefficient of variation")
    # A key nobody labelled still reads: its name less its unit.
    assert (label_of("brand_new_wait_s"), unit_of("brand_new_wait_s")) == ("brand new wait", "s")


def test_a_scenario_that_does_not_validate_still_has_its_form() -> None:
    data = loads_toml(PRESETS.joinpath("doc-as-written.toml").read_text("utf-8"))
    data["traffic"]["qps"] = -5
    fields = _fields(form_groups(data))
    assert fields["traffic.qps"]["value"] == -5


def test_a_catalog_gpu_or_model_gives_the_numbers_left_out() -> None:
    from emulator.scenario.hardware import GPUS, MODEL_SHAPES

    data, groups = _form("roofline-70b-h100.toml")
    fields = _fields(groups)
    gpu = GPUS[data["hardware"]["gpu"]]
    assert fields["hardware.hbm_tb_s"]["used"] == float(gpu.hbm_tb_s)
    model = next(iter(data["models"]))
    shape = MODEL_SHAPES[data["models"][model]["arch"]["model"]]
    assert fields[f"models.{model}.arch.layers"]["used"] == shape.layers


def test_the_router_prefix_index_is_a_choice_with_its_size_and_staleness() -> None:
    _, groups = _form("prefix-router-estimated.toml")
    fields = _fields(groups)
    index = fields["dispatcher.prefix_index"]
    assert index["kind"] == "select" and index["options"] == ["exact", "estimated"] and index["value"] == "estimated"
    assert fields["dispatcher.prefix_index_capacity"]["unit"] == "(worker, prefix) pairs"
    assert fields["dispatcher.prefix_index_ttl_s"]["unit"] == "s"
    hop = fields["dispatcher.proxy_hop_s"]
    assert hop["unit"] == "s" and hop["label"] == "proxy hop"
