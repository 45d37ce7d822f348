"""SLO-aware admission's keys (``dispatcher.admission``, ``admission_slack`` and the same
in ``[pools.NAME]``): each mistake gets a one-line error naming the key and the fix,
the keys read back as written, and a scenario without them writes none."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulator import ScenarioError, load_scenario
from emulator.scenario import Scenario
from emulator.scenario.presets import load_preset

SPLIT = load_preset("pd-slo-admission")
WHOLE = load_preset("continuous-comfortable")

# (the scenario, overrides, expected key path, text the message must contain, text of the fix)
MISTAKES = [
    (SPLIT, ['dispatcher.admission="slo"'], "dispatcher.admission", '"slo" is not an admission rule',
     '"predicted_ttft"'),
    (SPLIT, ["dispatcher.admission=3"], "dispatcher.admission", "is not a string", None),
    (SPLIT, ["slo={tpot_s=0.1}"], "dispatcher.admission", "slo.ttft_s, which is not set",
     "set [slo] ttft_s"),
    (SPLIT, ["dispatcher.admission_slack=0"], "dispatcher.admission_slack", "must be greater than 0",
     None),
    (SPLIT, ["dispatcher.admission_slack=12"], "dispatcher.admission_slack", "over the limit of 10",
     "a factor on slo.ttft_s"),
    (SPLIT, ['dispatcher.admission="queue_limit"', "dispatcher.admission_slack=0.8"],
     "dispatcher.admission_slack", "no pool admits by it", 'dispatcher.admission = "predicted_ttft"'),
    (SPLIT, ['dispatcher.admission="queue_limit"', "pools.prefill.admission_slack=0.8"],
     "pools.prefill.admission_slack", 'pool prefill admits by "queue_limit"',
     '[pools.prefill] admission = "predicted_ttft"'),
    (SPLIT, ['pools.decode.admission="predicted_ttft"'], "pools.decode.admission",
     "with decider_threshold_tokens = 0 none is", "give the rule to pool prefill"),
    (SPLIT, ['pools.prefill.admission="eager"'], "pools.prefill.admission", "is not an admission rule",
     None),
    (WHOLE, ['dispatcher.admission="predicted_ttft"', "slo={tpot_s=0.1}"], "dispatcher.admission",
     "which is not set", 'admission = "queue_limit"'),
    (load_preset("doc-as-written"), ['dispatcher.admission="predicted_ttft"', "slo.ttft_s=2"],
     "dispatcher.admission", "but model small batches statically", 'set batching = "continuous"'),
    (WHOLE, ['pools.prefill.admission="predicted_ttft"'], "pools", "no model is split", None),
]


@pytest.mark.parametrize(("base", "overrides", "path", "text", "fix"), MISTAKES)
def test_it_names_each_key_and_its_fix_in_one_line(
    base: Scenario, overrides: list[str], path: str, text: str, fix: str | None
) -> None:
    with pytest.raises(ScenarioError) as err:
        base.with_overrides(overrides)
    message = str(err.value)
    assert "\n" not in message and err.value.path == path, message
    assert text in message, message
    if fix is not None:
        assert err.value.fix is not None and fix in err.value.fix, message


def test_the_keys_read_back_as_written_and_a_pool_overrides_the_dispatcher() -> None:
    sc = SPLIT.with_overrides([
        "dispatcher.admission_slack=0.8", 'pools.prefill.admission="queue_limit"',
        "models.chat.disaggregated.decider_threshold_tokens=2000", 'pools.decode.admission="predicted_ttft"',
        "pools.decode.admission_slack=1.5",
    ])
    assert sc.pool_admission("prefill") == ("queue_limit", 0.8)
    assert sc.pool_admission("decode") == ("predicted_ttft", 1.5)
    assert Scenario.from_dict(sc.to_dict()) == sc
    assert load_scenario(sc.to_toml()) == sc
    whole = WHOLE.with_overrides(['dispatcher.admission="predicted_ttft"'])
    assert whole.pool_admission(None) == ("predicted_ttft", 1.0)
    assert load_scenario(whole.to_toml()) == whole


def test_a_scenario_without_the_keys_writes_none() -> None:
    for name in ("continuous-comfortable", "doc-as-written", "pd-long-prompt-admission"):
        written = load_preset(name).to_dict()["dispatcher"]
        assert "admission" not in written and "admission_slack" not in written, name


def test_the_default_slack_written_beside_the_waiting_bound_is_accepted() -> None:
    text = (Path(__file__).resolve().parents[3] / "emulator" / "scenario" / "presets"
            / "pd-slo-admission.toml").read_text("utf-8")
    assert "admission_slack = 1.0" in text
    plain = load_scenario(text.replace('admission = "predicted_ttft"', 'admission = "queue_limit"'))
    assert plain.pool_admission("prefill") == ("queue_limit", 1.0)
    with pytest.raises(ScenarioError) as err:
        load_scenario(text.replace('admission = "predicted_ttft"', 'admission = "queue_limit"')
                      .replace("admission_slack = 1.0", "admission_slack = 0.9"))
    assert err.value.path == "dispatcher.admission_slack"
