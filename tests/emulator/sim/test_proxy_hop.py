"""``dispatcher.proxy_hop_s``: each pushed request reaches its worker that much later,
so at light load (no request ever waits for another) every TTFT and latency grows by
exactly the hop; and its mistakes are refused in one line naming the key and the fix."""

from __future__ import annotations

import pytest

from emulator import ScenarioError
from emulator.scenario.presets import load_preset
from emulator.sim.engine import Engine

LIGHT = load_preset("continuous-comfortable").with_overrides(["traffic.qps=0.05"])  # 10 s apart on average


@pytest.mark.parametrize("policy", ["round_robin", "least_loaded", "weighted"])
def test_at_light_load_each_request_takes_the_hop_more_to_its_first_token(policy: str) -> None:
    base = LIGHT.with_overrides([f"dispatcher.policy={policy}"])
    plain = Engine(base).run()
    hopped = Engine(base.with_overrides(["dispatcher.proxy_hop_s=0.25"])).run()
    assert plain.ok == hopped.ok >= 5 and plain.offered == hopped.offered
    for stat in ("mean", "max"):
        ttft, latency = plain.ttft_s[stat], plain.latency_s[stat]
        assert ttft is not None and latency is not None
        assert hopped.ttft_s[stat] == pytest.approx(ttft + 0.25, abs=1e-9)
        assert hopped.latency_s[stat] == pytest.approx(latency + 0.25, abs=1e-9)
    assert hopped.tpot_s["mean"] == pytest.approx(plain.tpot_s["mean"], abs=1e-12)


def test_a_hop_of_zero_is_the_default_and_is_not_written_back() -> None:
    assert LIGHT.dispatcher.proxy_hop_s == 0.0 and "proxy_hop_s" not in LIGHT.to_dict()["dispatcher"]
    sc = LIGHT.with_overrides(["dispatcher.proxy_hop_s=0.002"])
    assert sc.to_dict()["dispatcher"]["proxy_hop_s"] == 0.002


@pytest.mark.parametrize(("overrides", "text"), [
    (["dispatcher.proxy_hop_s=-0.1"], "-0.1 is not a number of seconds from 0 to 10; give the delay"),
    (["dispatcher.proxy_hop_s=11"], "11 is not a number of seconds from 0 to 10"),
    (['dispatcher.proxy_hop_s="fast"'], "'fast' is not a number of seconds"),
    (["dispatcher.policy=pull", "dispatcher.proxy_hop_s=0.01"],
     '"pull" holds them at the router; use a pushing policy'),
])
def test_each_mistake_names_the_key_and_the_fix(overrides: list[str], text: str) -> None:
    with pytest.raises(ScenarioError) as err:
        LIGHT.with_overrides(overrides)
    assert err.value.path == "dispatcher.proxy_hop_s" and text in str(err.value) and err.value.fix


def test_a_statically_batching_model_refuses_the_hop() -> None:
    with pytest.raises(ScenarioError) as err:
        load_preset("doc-as-written").with_overrides(["dispatcher.proxy_hop_s=0.01"])
    assert err.value.path == "dispatcher.proxy_hop_s" and "batches statically" in str(err.value)
