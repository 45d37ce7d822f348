"""Disaggregated scenarios: every new key gets a one-line error naming it and the fix,
pools read back as written, and scenarios without pools read back unchanged."""

from __future__ import annotations

import pytest
from scenarios import EXAMPLE

from emulator import ScenarioError, load_scenario
from emulator.scenario import Scenario
from emulator.scenario.pools import kv_bytes_per_token, worker_pools
from emulator.scenario.presets import load_preset

BASE = load_preset("disagg-decode-undersized")

# (override, expected key path, text the message must contain, text of the fix)
MISTAKES = [
    ('models.chat.disaggregated.decode_workers="dec"', "models.chat.disaggregated.decode_workers",
     '"dec" is a pool no host group provides', 'set pool = "dec" on a [[hosts]] group'),
    ('models.chat.disaggregated.prefill_workers="decode"',
     "models.chat.disaggregated.decode_workers", "is also the prefill pool", "its own pool"),
    ("models.chat.disaggregated.kv_transfer_gb_s=0", "models.chat.disaggregated.kv_transfer_gb_s",
     "must be greater than 0, not 0", "GB/s"),
    ("models.chat.disaggregated.kv_transfer_gb_s=-3", "models.chat.disaggregated.kv_transfer_gb_s",
     "must be greater than 0", "GB/s"),
    ("models.chat.disaggregated.decider_threshold_tokens=-1",
     "models.chat.disaggregated.decider_threshold_tokens", "must be at least 0", None),
    ("models.chat.disaggregated.kv_bytes_per_token=0",
     "models.chat.disaggregated.kv_bytes_per_token", "must be greater than 0", "bytes"),
    ("models.chat.disaggregated.speed=2", "models.chat.disaggregated.speed", "unknown key",
     "known keys here"),
    ('models.chat.worker.batching="static"', "models.chat.disaggregated",
     "applies to continuous batching", 'set batching = "continuous"'),
    ('dispatcher.policy="pull"', "dispatcher.policy",
     "holds requests for workers to take, and handoffs to the decode pool are pushed",
     '[pools.decode] policy = "least_loaded"'),
    ('pools.decode.policy="pull"', "pools.decode.policy", "holds requests",
     "round_robin, least_loaded, prefix_aware, weighted"),
    ('pools.spare.policy="pull"', "pools.spare", '"spare" is not a pool of a disaggregated model',
     "the pools are prefill, decode"),
    ("pools.prefill.speed=1", "pools.prefill.speed", "unknown key", "policy, queue_limit"),
    ("pools.prefill.queue_limit=-1", "pools.prefill.queue_limit", "must be at least 0", None),
    ('pools.decode.scorers={queue=1}', "pools.decode.scorers",
     'applies only to a policy that sums scorers, not "least_loaded"', 'policy = "weighted"'),
    ('pools.decode.policy="no_such"', "pools.decode.policy", "is not one of", None),
    ("pools=3", "pools", "must be a table", None),
    ('autoscaler={metric="queue",target=4,max_workers=8}', "autoscaler.model",
     "chat is split into pools prefill and decode, and each pool is scaled by its own",
     "[pools.prefill.autoscaler]"),
    ('pools.decode.autoscaler={metric="queue",target=4,max_workers=1,model="nope"}',
     "pools.decode.autoscaler.model", '"nope" names no model', None),
    ('pools.decode.autoscaler={metric="queue",target=4,max_workers=9}',
     "pools.decode.autoscaler.max_workers", "more than the hosts can place", None),
    ('hosts[1].pool="prefill"', "models.chat.disaggregated.decode_workers",
     '"decode" is a pool no host group provides', 'set pool = "decode"'),
    ('hosts[0].pool="p q"', "hosts[0].pool", "not a usable pool name", 'pool = "prefill"'),
    ('hosts[1].pool="spare"', "models.chat.disaggregated.decode_workers",
     "no host group provides", "set pool"),
]


def test_a_decode_pools_bound_without_a_decider_is_refused_not_ignored() -> None:
    # With no decider every arrival enters the prefill pool: the decode pool's bound
    # would bound nothing.
    with pytest.raises(ScenarioError) as err:
        BASE.with_overrides(
            ["models.chat.disaggregated.decider_threshold_tokens=0", "pools.decode.queue_limit=5"]
        )
    assert err.value.path == "pools.decode.queue_limit"
    assert "decider_threshold_tokens" in (err.value.fix or "")


def test_pools_on_a_fleet_with_no_split_model_are_refused() -> None:
    with pytest.raises(ScenarioError) as err:
        load_preset("prefix-heavy-chat").with_overrides(['pools.prefill.policy="pull"'])
    assert err.value.path == "pools"
    assert "[dispatcher] or [autoscaler]" in (err.value.fix or "")


def test_pool_tables_read_back_as_written() -> None:
    sc = BASE.with_overrides([
        "hosts[1].units=8", 'pools.prefill.policy="pull"', "pools.prefill.queue_limit=30",
        'pools.decode.policy="weighted"', "pools.decode.scorers={queue=1,running=2}",
        'pools.decode.autoscaler={metric="running",target=8,min_workers=1,max_workers=2}',
    ])
    assert sc.pool_policy("prefill") == "pull" and sc.pool_queue_limit("prefill") == 30
    assert sc.pool_policy("decode") == "weighted"
    assert sc.pool_scorers("decode") == (("queue", 1.0), ("running", 2.0))
    assert sc.pool_queue_limit("decode") == BASE.dispatcher.queue_limit
    scaler = sc.pool("decode").autoscaler  # type: ignore[union-attr]
    assert scaler is not None and (scaler.model, scaler.max_workers) == ("chat", 2)
    assert [p for p, _ in sc.autoscalers()] == ["decode"]
    assert Scenario.from_dict(sc.to_dict()) == sc
    assert load_scenario(sc.to_toml()) == sc
    # A fleet without pool tables writes none.
    assert "pools" not in BASE.to_dict()


@pytest.mark.parametrize(("override", "path", "text", "fix"), MISTAKES)
def test_it_names_each_key_and_its_fix_in_one_line(
    override: str, path: str, text: str, fix: str | None
) -> None:
    with pytest.raises(ScenarioError) as err:
        BASE.with_overrides([override])
    message = str(err.value)
    assert "\n" not in message and err.value.path == path, message
    assert text in message, message
    if fix is not None:
        assert err.value.fix is not None and fix in err.value.fix, message


def _data() -> dict:
    return BASE.to_dict()


def test_a_decider_without_pools_is_refused_with_its_fix() -> None:
    data = _data()
    data["models"]["chat"]["disaggregated"] = {"decider_threshold_tokens": 100}
    with pytest.raises(ScenarioError) as err:
        load_scenario_from(data)
    assert err.value.path == "models.chat.disaggregated.decider_threshold_tokens"
    assert "needs the model split into pools" in str(err.value)
    assert "prefill_workers" in (err.value.fix or "")


def test_a_model_without_kv_size_is_refused_with_its_fix() -> None:
    data = _data()
    del data["models"]["chat"]["arch"]
    with pytest.raises(ScenarioError) as err:
        load_scenario_from(data)
    assert err.value.path == "models.chat.disaggregated.kv_bytes_per_token"
    assert "[models.chat.arch]" in (err.value.fix or "")
    data["models"]["chat"]["disaggregated"]["kv_bytes_per_token"] = 1000.0
    assert kv_bytes_per_token(load_scenario_from(data).models["chat"]) == 1000.0


def test_a_group_of_a_split_model_without_a_pool_is_refused() -> None:
    data = _data()
    del data["hosts"][0]["pool"]
    with pytest.raises(ScenarioError) as err:
        load_scenario_from(data)
    assert err.value.path == "hosts[0]" and 'add pool = "prefill"' in str(err.value)


def test_a_pool_on_a_group_of_a_model_that_is_not_split_is_refused() -> None:
    text = EXAMPLE.read_text().replace("[[hosts]]\n", '[[hosts]]\npool = "prefill"\n', 1)
    with pytest.raises(ScenarioError) as err:
        load_scenario(text, max_requests=None)
    assert err.value.path == "hosts[0].pool" and "remove pool" in str(err.value)


def test_a_third_pool_of_a_split_model_is_refused() -> None:
    data = _data()
    data["hosts"].append({"count": 1, "units": 4, "workers": ["chat@0"], "pool": "spare"})
    with pytest.raises(ScenarioError) as err:
        load_scenario_from(data)
    assert err.value.path == "models.chat.disaggregated" and '"spare"' in str(err.value)


def test_it_reads_pools_back_as_written() -> None:
    again = load_scenario(BASE.to_toml())
    assert again == BASE
    assert [h.pool for h in again.hosts] == ["prefill", "decode"]
    assert worker_pools(again) == ["prefill"] * 3 + ["decode"]
    spec = again.models["chat"].disaggregated
    assert spec is not None and spec.decider_threshold_tokens == 256
    assert kv_bytes_per_token(again.models["chat"]) == 327_680  # Llama-2-70B's
    assert BASE.with_overrides(["hosts[1].count=3"]).worker_count("chat") == 6


def test_the_docs_example_loads_unchanged_without_pools() -> None:
    s = load_scenario(EXAMPLE.read_text(), max_requests=None)
    data = s.to_dict()
    assert all("pool" not in h for h in data["hosts"])
    assert all("disaggregated" not in m for m in data["models"].values())
    assert load_scenario(s.to_toml(), max_requests=None) == s


def load_scenario_from(data: dict) -> Scenario:
    return Scenario.from_dict(data, max_requests=None)


def test_a_prefix_cache_and_cache_aware_routing_are_accepted_on_a_split_model() -> None:
    s = BASE.with_overrides(["worker.prefix_cache=true", 'dispatcher.policy="prefix_aware"',
                             'models.chat.disaggregated.decider="uncached"',
                             "models.chat.disaggregated.decider_max_prefill_queue=8"])
    split = s.models["chat"].disaggregated
    assert split is not None and (split.decider, split.decider_max_prefill_queue) == ("uncached", 8)
    assert s.worker.prefix_cache and s.dispatcher.policy == "prefix_aware"
    assert load_scenario(s.to_toml(), max_requests=None) == s


# The decider's keys: (overrides, key path, text of the message, text of the fix).
DECIDER_MISTAKES = [
    (['models.chat.disaggregated.decider="cached"'], "models.chat.disaggregated.decider",
     '"cached" is not a decider', '"uncached"'),
    (['models.chat.disaggregated.decider="uncached"'], "models.chat.disaggregated.decider",
     "has no prefix cache", "set prefix_cache = true"),
    (['models.chat.disaggregated.decider="uncached"', "worker.prefix_cache=true",
      "models.chat.disaggregated.decider_threshold_tokens=0"], "models.chat.disaggregated.decider",
     "would change nothing", "give decider_threshold_tokens"),
    (['models.chat.disaggregated.decider="uncached"', "worker.prefix_cache=true",
      'pools.prefill.policy="pull"'], "models.chat.disaggregated.decider",
     '"pull" (pool prefill) picks none in advance', 'set decider = "prompt"'),
    (["models.chat.disaggregated.decider_max_prefill_queue=-2"],
     "models.chat.disaggregated.decider_max_prefill_queue", "must be at least 0", None),
]


@pytest.mark.parametrize(("overrides", "path", "text", "fix"), DECIDER_MISTAKES)
def test_the_deciders_keys_name_themselves_and_the_fix(
    overrides: list[str], path: str, text: str, fix: str | None
) -> None:
    with pytest.raises(ScenarioError) as err:
        BASE.with_overrides(overrides)
    message = str(err.value)
    assert "\n" not in message and err.value.path == path, message
    assert text in message, message
    if fix is not None:
        assert err.value.fix is not None and fix in err.value.fix, message


def test_a_decider_key_without_pools_names_the_missing_pool() -> None:
    data = _data()
    data["models"]["chat"]["disaggregated"] = {"decider_max_prefill_queue": 4}
    with pytest.raises(ScenarioError) as err:
        load_scenario_from(data)
    assert err.value.path == "models.chat.disaggregated.decider_max_prefill_queue"
    assert "prefill_workers is missing" in str(err.value)


def test_a_fleet_autoscaler_on_a_split_model_points_to_the_pools_own() -> None:
    data = _data()
    data["autoscaler"] = {"model": "chat", "metric": "running", "target": 8,
                          "min_workers": 1, "max_workers": 4}
    with pytest.raises(ScenarioError) as err:
        load_scenario_from(data)
    assert err.value.path == "autoscaler.model", str(err.value)
    assert "each pool is scaled by its own autoscaler" in str(err.value)
    assert err.value.fix is not None and "[pools.prefill.autoscaler]" in err.value.fix
