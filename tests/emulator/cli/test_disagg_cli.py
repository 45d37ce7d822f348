"""The run summary of a disaggregated fleet, as the command line prints it."""

from __future__ import annotations

import json

import pytest

from emulator import Summary
from emulator.cli.run import main


def test_it_prints_each_pools_figures_under_the_token_table(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "disagg-decode-undersized", "--set", "duration_s=30",
                 "--set", "faults=[{at_s=20, kill=\"worker:chat:0\"}]"])
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("disaggregated"))
    for column in ("prefill_ttft_p50", "decode_ttft_p50", "decode_tpot_p50", "transfers",
                   "stranded", "backlog_end"):
        assert column in lines[head]
    row = lines[head + 1].split()
    assert row[0] == "chat" and len(row) == 12
    assert float(row[1]) > 0.03  # one prefill of ~2,000 tokens at least
    assert int(row[7].replace(",", "")) > 300  # transfers
    assert "books balance: yes" in out


def test_its_json_summary_carries_the_pools(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "disagg-decode-undersized", "--set", "duration_s=20", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    pools = data["per_model"]["chat"]["pools"]
    assert pools["prefill_pool"] == "prefill" and pools["decode_pool"] == "decode"
    assert pools["transfers"] > 200 and pools["stranded"] == 0
    # The median prompt (lognormal, mean 2,000, cv 1) is 2,000 / sqrt(2) = 1,414 tokens:
    # 1,414 x 327,680 bytes at 50 GB/s is 9.3 ms.
    assert pools["transfer_s"]["p50"] == pytest.approx(0.00927, rel=0.15)
    assert "pools" not in data  # a per-model figure, not summed over the fleet
    assert Summary.from_dict(data).per_model["chat"].pools == pools


def test_it_prints_what_slo_aware_admission_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "pd-slo-admission", "--set", "duration_s=90"]) == 0
    out = capsys.readouterr().out
    [line] = [line for line in out.splitlines() if line.startswith("admission chat:")]
    assert "for a predicted TTFT over 2 s" in line and "goodput of the admitted" in line
    refused = int(line.split("refused ")[1].split(" ")[0].replace(",", ""))
    assert refused > 100
    assert main(["run", "pd-slo-admission", "--set", "duration_s=30", "--set",
                 "dispatcher.admission=queue_limit"]) == 0
    assert "admission chat:" not in capsys.readouterr().out


def test_it_prints_the_pipeline_groups_line_only_with_a_group(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "mooncake-long-context-pipeline", "--set", "duration_s=120"]) == 0
    out = capsys.readouterr().out
    [line] = [x for x in out.splitlines() if x.startswith("pipelined (chat)")]
    assert "over 65,536 tokens on workers 5, 6, 7" in line and "within the TTFT goal" in line
    assert main(["run", "mooncake-long-context-pipeline", "--set", "duration_s=30", "--set",
                 "models.chat.disaggregated.pipeline_threshold_tokens=0"]) == 0
    assert "pipelined" not in capsys.readouterr().out
