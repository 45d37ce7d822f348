"""The doc-figure finder: the figures a design doc states, with the key each fits."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulator.analysis.doc_figures import conflicts, find_figures
from emulator.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[3]
SEED_DOC = (ROOT / "reviewer" / "review" / "example" / "design-doc.md").read_text()


def _by_key(text: str, scenario=None) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in find_figures(text, scenario):
        out.setdefault(f.key, []).append(f)
    return out


def test_it_finds_the_seed_docs_figures_with_the_keys_they_fit():
    scenario = load_scenario("doc-as-written", max_requests=None)
    found = _by_key(SEED_DOC, scenario)
    config = scenario.to_dict()
    expected = {
        "traffic.qps": config["traffic"]["qps"],
        "traffic.peak_qps": config["traffic"]["peak_qps"],
        "dispatcher.max_batch_tokens": config["dispatcher"]["max_batch_tokens"],
        "worker.batch_s": config["worker"]["batch_s"],
        "models.small.tokens": 500,
        "models.big.tokens": 500,
        "models.small.worker_units": 2,
        "hosts[0].units": 10,
        "hosts[0].count": 3,
        "dispatcher.policy": "round_robin",
    }
    for key, value in expected.items():
        assert any(f.value == value for f in found[key]), (key, [f.value for f in found.get(key, [])])
    # Each is linked to its sentence, at its place in the doc.
    batch = found["worker.batch_s"][0]
    assert batch.sentence == "A batch takes 1.5 seconds to process on either model."
    assert SEED_DOC[batch.start:batch.end] == batch.text == "1.5 seconds"


def test_it_reads_units_with_pint_into_the_keys_unit():
    found = _by_key("Time per output token (TPOT) of at most 8 ms. Each link moves 50 GB/s. "
                    "Four GPUs read 3.35 TB/s each. We run it with TP4.")
    assert found["slo.tpot_s"][0].value == pytest.approx(0.008)
    assert found["models.MODEL.disaggregated.kv_transfer_gb_s"][0].value == 50
    assert found["hardware.hbm_tb_s"][0].value == pytest.approx(3.35)
    assert found["models.MODEL.worker_units"][-1].value == 4


def test_it_words_a_wrapped_sentence_as_one_and_a_clause_decides_the_key():
    text = ("prompts carry the whole conversation, about 1,150 tokens on average,\n"
            "and answers average about 210 tokens.")
    scenario = load_scenario(ROOT / "reviewer" / "review" / "example" / "chat-70b-fleet.toml", max_requests=None)
    found = _by_key(text, scenario)
    assert found["models.chat.tokens"][0].value == 1150
    assert found["models.chat.output_tokens"][0].value == 210
    assert "\n" not in found["models.chat.tokens"][0].sentence


def test_a_figure_stated_twice_with_two_values_is_a_question_to_clarify():
    text = "A batch takes 1.5 seconds to process.\n\nLater on, each batch takes 2 seconds to process."
    found = conflicts(find_figures(text))
    assert [f["title"] for f in found] == ["The doc states worker.batch_s as 1.5 and as 2"]
    assert found[0]["severity"] == "clarify" and found[0]["inputs"] == ["worker.batch_s"]
    assert not conflicts(find_figures(SEED_DOC, load_scenario("doc-as-written", max_requests=None)))


def test_a_failure_is_not_a_count_of_hosts():
    found = _by_key("No request dropped when one host fails. We start with four hosts.")
    assert [f.value for f in found["hosts[0].count"]] == [4]
