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


def test_it_removes_a_key_a_table_or_an_array_table_and_keeps_the_other_comments():
    from reviewer.fleets.toml_edit import add_table, remove_key, remove_table

    out = remove_key(TOML, "traffic.qps")
    assert "qps" not in tomllib.loads(out)["traffic"]
    assert "# about the trace's mean rate x 8" not in out  # its own line went with it
    assert [line for line in TOML.splitlines() if line not in out.splitlines()] == [
        line for line in TOML.splitlines() if line.lstrip().startswith("qps =")]
    assert remove_key(TOML, "worker.not_written_here") == TOML
    two = add_table(TOML, "hosts", {"count": 1, "units": 8, "workers": ["chat@0"]})
    assert tomllib.loads(remove_table(two, "hosts[0]"))["hosts"] == [{"count": 1, "units": 8, "workers": ["chat@0"]}]
    assert tomllib.loads(remove_table(two, "hosts[1]"))["hosts"] == tomllib.loads(TOML)["hosts"]
    assert "chat" not in tomllib.loads(remove_table(TOML, "models.chat")).get("models", {})
    with pytest.raises(TomlEditError, match="hosts\\[9\\]"):
        remove_table(TOML, "hosts[9]")


def test_it_adds_a_table_at_the_end():
    from reviewer.fleets.toml_edit import add_table

    out = add_table(TOML, "hosts", {"count": 1, "units": 8, "workers": ["chat@0"]})
    assert out.startswith(TOML.rstrip("\n"))
    assert tomllib.loads(out)["hosts"][-1] == {"count": 1, "units": 8, "workers": ["chat@0"]}
    assert 'workers = ["chat@0"]' in out
    with pytest.raises(TomlEditError, match="models.chat"):
        add_table(TOML, "models.chat", {"share": 1})
