"""``python -m emulator calibrate``: the fit recovers known coefficients, reports every
point's error on the shipped Splitwise measurements, sets the mislabelled batch-64 rows
aside, gives TOML a scenario accepts, and refuses bad files in one line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from token_scenarios import scenario

from emulator.analysis.calibration import DATA, Group, Point, fit, read_groups
from emulator.cli import main

ROOT = Path(__file__).resolve().parents[3]
HEADER = "model,hardware,prompt_size,batch_size,token_size,prompt_time,token_time,tensor_parallel\n"
TRUTH = {"step_base_s": 0.03, "prefill_token_s": 1e-4, "decode_seq_s": 2e-4, "kv_token_s": 1.5e-7}


def _exact_csv(tmp_path: Path, truth: dict[str, float], attn: float = 0.0) -> Path:
    """Step times computed from ``truth`` with the worker's own formula."""
    rows = []
    for p, b, t in [(128, 1, 128), (512, 1, 128), (2048, 1, 512), (8192, 1, 128),
                    (512, 4, 128), (512, 16, 1024), (512, 64, 128), (1024, 8, 4096)]:
        prompt = truth["step_base_s"] + truth["prefill_token_s"] * b * p + attn * b * p * p
        token = truth["step_base_s"] + truth["decode_seq_s"] * b + truth["kv_token_s"] * b * (p + t / 2)
        rows.append(f"m,gpu,{p},{b},{t},{prompt * 1e3!r},{token * 1e3!r},1\n")
    path = tmp_path / "exact.csv"
    path.write_text(HEADER + "".join(rows), encoding="utf-8")
    return path


def _calibrate_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["calibrate", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_it_recovers_the_coefficients_of_exact_measurements(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _calibrate_json(capsys, str(_exact_csv(tmp_path, TRUTH)))
    (only,) = data["fits"]
    assert only["coefficients"] == pytest.approx(TRUTH, rel=1e-6)
    assert only["max_error"] < 1e-9
    assert not any(p["outlier"] for p in only["points"])


def test_it_recovers_the_attention_term_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _exact_csv(tmp_path, TRUTH, attn=3e-9)
    data = _calibrate_json(capsys, str(path), "--prefill-attn")
    assert data["fits"][0]["coefficients"] == pytest.approx({**TRUTH, "prefill_attn_s": 3e-9}, rel=1e-6)


def test_it_keeps_coefficients_non_negative_when_least_squares_would_not() -> None:
    # Decode time falling with context: plain least squares would give kv_token_s < 0.
    points = tuple(
        Point("token", p, 1, 128, 0.03 - 1e-7 * p, 1, 0.0) for p in (128, 1024, 4096, 8192)
    ) + (Point("prompt", 512, 1, None, 0.08, 1, 0.0),)
    result = fit(Group("m", "gpu", 1, points))
    assert min(result.coefficients.values()) >= 0.0
    assert result.coefficients["kv_token_s"] == 0.0


def test_it_reports_each_point_of_the_shipped_splitwise_measurements(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["calibrate", "splitwise-llama2-70b", "--hardware", "h100-80gb", "--tp", "4"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if re.match(r"(prompt|token) +P=", line)]
    # 13 prefill points (7 prompt sizes, 6 more batch sizes) and 19 decode points.
    assert len(rows) == 32
    for line in rows:
        assert re.search(r"\s[+-]\d+\.\d%$", line), line
    assert "token  P=512 B=64 T=128" in out
    assert "[worker]" in out and "step_base_s = " in out
    assert "not a physical model" in out


def test_it_reaches_the_median_error_the_readme_states(capsys: pytest.CaptureFixture[str]) -> None:
    data = _calibrate_json(capsys, "splitwise-llama2-70b", "--hardware", "h100-80gb", "--tp", "4")
    median = data["fits"][0]["median_error"]
    assert median < 0.05
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"median error of {median:.1%}" in readme


def test_it_sets_the_mislabelled_batch_64_prompt_rows_aside(
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = _calibrate_json(capsys, "splitwise-llama2-70b")
    assert len(data["fits"]) == 9
    for f in data["fits"]:
        flagged = [(p["kind"], p["prompt_size"], p["batch_size"]) for p in f["points"] if p["outlier"]]
        if f["tensor_parallel"] == 2:
            # Their prompt times are a tenth of batch 32's: another configuration.
            assert flagged == [("prompt", 512, 64)]
            (point,) = [p for p in f["points"] if p["outlier"]]
            assert point["error"] > 5.0
        else:
            assert flagged == []
        assert f["median_error"] < 0.07


def test_it_fits_an_outlier_when_told_to_keep_it(capsys: pytest.CaptureFixture[str]) -> None:
    kept = _calibrate_json(capsys, "splitwise-llama2-70b", "--hardware", "h100-80gb", "--tp", "2",
                           "--keep-outliers")["fits"][0]
    dropped = _calibrate_json(capsys, "splitwise-llama2-70b", "--hardware", "h100-80gb", "--tp", "2")["fits"][0]
    assert not any(p["outlier"] for p in kept["points"])
    assert kept["median_error"] > 2 * dropped["median_error"]


def test_it_says_each_group_is_fitted_on_its_own(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "splitwise-llama2-70b"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("splitwise-llama2-70b.csv holds 9 groups")
    assert "each is fitted on its own" in out
    assert out.count("[worker]") == 9


def test_it_gives_worker_toml_a_scenario_accepts(capsys: pytest.CaptureFixture[str]) -> None:
    data = _calibrate_json(capsys, "splitwise-llama2-70b", "--hardware", "h100-80gb", "--tp", "4")
    worker = tomllib.loads(data["fits"][0]["worker_toml"])["worker"]
    assert worker["batching"] == "continuous"
    sc = scenario(workers=2, duration_s=10.0, qps=1.0, worker=worker)
    assert sc.worker.step_base_s == pytest.approx(data["fits"][0]["coefficients"]["step_base_s"], rel=1e-3)


def test_it_averages_repeats_into_points() -> None:
    (group,) = [g for g in read_groups(str(DATA / "splitwise-llama2-70b.csv"))
                if g.hardware == "h100-80gb" and g.tp == 4]
    by_label = {p.label(): p for p in group.points}
    # The 512-token prefill was measured 5 times with each of 9 output lengths.
    assert by_label["prompt P=512 B=1"].repeats == 45
    assert by_label["token  P=512 B=1 T=128"].repeats == 15
    assert by_label["token  P=512 B=8 T=128"].measured_s == pytest.approx(0.03141, rel=1e-3)


def test_it_lists_the_groups_when_a_filter_matches_none(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "splitwise-llama2-70b", "--hardware", "h200", "--tp", "4"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --hardware h200, --tp 4: match no measurements; the file has ")
    assert "--model llama2-70b --hardware h100-80gb --tp 4" in err
    assert err.count("\n") == 1


BAD = [
    ("missing column", HEADER.replace(",token_time", "") + "m,g,512,1,128,60,1\n",
     'missing column "token_time"'),
    ("negative tokens", HEADER + "m,g,-512,1,128,60,30,1\n", "prompt_size -512 is below 1"),
    ("zero batch", HEADER + "m,g,512,0,128,60,30,1\n", "batch_size 0 is below 1"),
    ("bad time", HEADER + "m,g,512,1,128,fast,30,1\n", 'prompt_time "fast" is not a number'),
    ("negative time", HEADER + "m,g,512,1,128,60,-30,1\n", "token_time -30 is not a positive time"),
    ("short row", HEADER + "m,g,512,1,128,60\n", "has 6 fields, the header has 8"),
    ("empty file", "", "has no measurements"),
    ("header only", HEADER, "has no measurements"),
]


@pytest.mark.parametrize(("case", "body", "problem"), BAD, ids=[b[0] for b in BAD])
def test_it_refuses_a_bad_measurement_file_with_one_line_and_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, body: str, problem: str
) -> None:
    path = tmp_path / "m.csv"
    path.write_text(body, encoding="utf-8")
    assert main(["calibrate", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: m.csv")
    assert problem in captured.err and captured.err.count("\n") == 1


def test_it_refuses_an_unknown_name_listing_the_named_sets(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "splitwise-llama3"]) == 2
    err = capsys.readouterr().err
    assert "no such file and no named measurement set" in err and "splitwise-llama2-70b" in err


def test_it_shows_no_traceback_when_run_as_a_user_does(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_text(HEADER + "m,g,512,1,-128,60,30,1\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "emulator", "calibrate", str(path), "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: m.csv line 2: token_size -128 is below 1; token_size counts tokens or sequences: 1 or more"
    ]


def test_it_ships_the_measurements_with_their_mit_attribution() -> None:
    notice = (DATA / "README.md").read_text(encoding="utf-8")
    for fact in ("MIT License", "Pratyush Patel", "splitwise-sim", "perf_model.csv"):
        assert fact in notice
