"""``python -m emulator trace-stats``: the figures of a trace, as text and JSON, and one
line with exit status 2 for every bad trace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from emulator.analysis.trace_stats import trace_stats
from emulator.cli import main
from emulator.scenario.traces import load_trace

ROOT = Path(__file__).resolve().parents[3]
HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def _csv(tmp_path: Path, body: str, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


def _stats_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["trace-stats", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_it_counts_minutes_and_lengths_of_a_small_trace_by_hand(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 3 requests in minute 0, 1 in minute 1, 2 in minute 2 (partial, the last).
    rows = [
        ("00:00:00", 10, 1), ("00:00:30", 20, 2), ("00:00:59.5", 30, 3),
        ("00:01:10", 40, 4), ("00:02:00", 50, 5), ("00:02:03", 1000, 6),
    ]
    body = HEADER + "".join(f"2023-11-16 {t},{p},{o}\n" for t, p, o in rows)
    data = _stats_json(capsys, str(_csv(tmp_path, body)))
    assert data["count"] == 6
    assert data["duration_s"] == pytest.approx(123.0)
    assert data["mean_qps"] == pytest.approx(5 / 123.0)
    rate = data["rate_over_time"]
    assert rate["per_minute_qps"] == pytest.approx([3 / 60, 1 / 60, 2 / 60])
    # The partial last minute is left out of mean, peak and lowest.
    assert rate["mean_minute_qps"] == pytest.approx(2 / 60)
    assert rate["peak_minute_qps"] == pytest.approx(3 / 60)
    assert rate["min_minute_qps"] == pytest.approx(1 / 60)
    prompt = data["prompt_tokens"]
    assert prompt["mean"] == pytest.approx(1150 / 6)
    assert prompt["p50"] == pytest.approx(35.0)
    assert prompt["max"] == 1000 and prompt["min"] == 10
    assert data["output_tokens"]["p99"] == pytest.approx(float(np.percentile([1, 2, 3, 4, 5, 6], 99)))


def test_it_reports_the_named_azure_trace_consistently_with_its_rows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = _stats_json(capsys, "azure-conv-2023")
    trace = load_trace("azure-conv-2023")
    assert data["count"] == len(trace) == 19_366
    assert sum(data["rate_over_time"]["per_minute_qps"]) * 60 == pytest.approx(19_366)
    assert data["rate_over_time"]["peak_minute_qps"] > 1.3 * data["rate_over_time"]["mean_minute_qps"]
    assert data["prompt_tokens"]["max"] == int(trace.prompt_tokens.max())
    assert data["output_tokens"]["p50"] == float(np.median(trace.output_tokens))
    assert data == json.loads(json.dumps(trace_stats(trace).to_dict()))


def test_it_prints_a_readable_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace-stats", "azure-conv-2023"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Trace azure-conv-2023.csv: 19,366 requests over ")
    assert "peak" in out and "minute by minute:" in out
    assert any(line.startswith("prompt ") for line in out.splitlines())
    assert any(line.startswith("output ") for line in out.splitlines())


def test_it_counts_requests_per_model_of_a_jsonl_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [{"arrival_s": i, "prompt_tokens": 5, "output_tokens": 2, "model": m}
            for i, m in enumerate(["a", "b", "a"])]
    path = _csv(tmp_path, "".join(json.dumps(r) + "\n" for r in rows), "t.jsonl")
    assert _stats_json(capsys, str(path))["models"] == {"a": 2, "b": 1}


BAD = [
    ("missing column", HEADER.replace(",GeneratedTokens", "") + "2023-11-16 00:00:00,5\n",
     'missing column "GeneratedTokens"'),
    ("negative tokens", HEADER + "2023-11-16 00:00:00,-5,3\n", 'ContextTokens "-5" is negative'),
    ("unsorted timestamps", HEADER + "2023-11-16 00:00:09,5,3\n2023-11-16 00:00:01,5,3\n",
     "is earlier than line 2's"),
    ("empty file", "", "has no requests"),
    ("header only", HEADER, "has no requests"),
]


@pytest.mark.parametrize(("case", "body", "problem"), BAD, ids=[b[0] for b in BAD])
def test_it_refuses_a_bad_trace_with_one_line_and_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, body: str, problem: str
) -> None:
    path = _csv(tmp_path, body)
    assert main(["trace-stats", str(path), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: t.csv")
    assert problem in captured.err
    assert captured.err.count("\n") == 1


def test_it_lists_the_named_traces_for_an_unknown_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace-stats", "azure-conv-2099"]) == 2
    err = capsys.readouterr().err
    assert err.startswith('error: trace: "azure-conv-2099" is no such file and no named trace')
    assert "azure-conv-2023" in err and err.count("\n") == 1


def test_it_shows_no_traceback_when_run_as_a_user_does(tmp_path: Path) -> None:
    path = _csv(tmp_path, HEADER + "2023-11-16 00:00:00,5,x\n")
    done = subprocess.run([sys.executable, "-m", "emulator", "trace-stats", str(path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        'error: t.csv line 2: GeneratedTokens "x" is not a whole number; '
        "token counts are whole numbers of 1 or more"
    ]
