"""Setting one key of a fleet config's TOML keeps its comments and layout."""

from __future__ import annotations

import tomllib
from importlib import resources

import pytest

from reviewer.fleets.toml_edit import TomlEditError, set_key

TOML = resources.files("reviewer.review.example").joinpath("chat-70b-fleet.toml").read_text("utf-8")


def test_it_replaces_a_keys_value_and_keeps_its_comment():
    out = set_key(TOML, "traffic.qps", 50)
    assert "qps = 50                      # about the trace's mean rate x 8" in out
    assert tomllib.loads(out)["traffic"]["qps"] == 50
    assert out.replace("qps = 50 ", "qps = 44 ") == TOML


@pytest.mark.parametrize(("path", "value"), [
    ("traffic.peak_qps", 70), ("hosts[0].count", 5), ("models.chat.arch.model", "Llama-3-8B"),
    ("autoscaler.min_workers", 1), ("duration_s", 120), ("slo.tpot_s", 0.01),
])
def test_it_adds_a_key_or_its_table_where_missing(path, value):
    out = set_key(TOML, path, value)
    node = tomllib.loads(out)
    for part in path.replace("[0]", ".0").split("."):
        node = node[int(part)] if part.isdigit() else node[part]
    assert node == value
    assert "# assumed by the reviewer" in out  # the other comments stay


def test_it_refuses_a_table_the_config_does_not_have():
    with pytest.raises(TomlEditError, match=r"hosts\[3\]"):
        set_key(TOML, "hosts[3].count", 2)
