"""The table step model, and the roofline's communication, against the shared step times."""

from __future__ import annotations

import csv
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest
from test_continuous import _check_against_reference
from token_reference import TableParams
from token_scenarios import WORKER, both, poisson_requests

from emulator.scenario import ScenarioError, load_scenario
from emulator.scenario.hardware import GPUS, MODEL_SHAPES, Roofline
from emulator.scenario.step_table import fit_table, load_step_table, read_step_rows

ROOT = Path(__file__).resolve().parents[3]
STEPS = ROOT / "emulator" / "scenario" / "step_tables" / "vidur-llama2-70b-h100-tp4.csv"
VIDUR = "vidur-llama2-70b-h100-tp4"


def _rows() -> list[dict[str, float]]:
    with STEPS.open(encoding="utf-8") as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


#: SHA-256 of the peer's step-time file (peers/vidur/step-times-llama2-70b-h100-tp4.csv).
PEER_FILE_SHA256 = "e118c3c36d55ceb6e71ee4e5c6565acd88827542471a6d7a0ee6262fd503c780"


def test_the_shipped_table_is_the_peers_file_unchanged() -> None:
    import hashlib

    assert hashlib.sha256(STEPS.read_bytes()).hexdigest() == PEER_FILE_SHA256
    shared = ROOT.parent / "shared" / "peers" / "vidur" / "step-times-llama2-70b-h100-tp4.csv"
    if shared.is_file():  # beside the shared material, the file itself too
        assert STEPS.read_bytes() == shared.read_bytes()


def test_the_roofline_defaults_reproduce_the_peers_step_times() -> None:
    # Llama-2-70B on 4 H100 SXM at the default efficiencies a scenario's comments
    # propose (mbu 0.6, mfu 0.5), with the catalog's link and collective latency.
    roof = Roofline(GPUS["H100-SXM-80GB"], MODEL_SHAPES["Llama-2-70B"], 4, Fraction(2), Fraction(9, 10),
                    Fraction(3, 5), Fraction(1, 2))
    errors, without = [], []
    pure = replace(roof, gpu=replace(roof.gpu, link_gb_s=None))
    for r in _rows():
        # A step reads its decoders' contexts and each chunk's prompt so far (one chunk a
        # step here: its start + chunk is the attention term over the chunk).
        read = r["sum_ctx"] + (r["sum_chunk_attn"] / r["prefill_tokens"] if r["prefill_tokens"] else 0)
        tokens = r["n_dec"] + r["prefill_tokens"]
        measured = r["t_ms"] / 1000
        errors.append(abs(float(roof.step_s(Fraction(read), int(tokens))) / measured - 1))
        without.append(abs(float(pure.step_s(Fraction(read), int(tokens))) / measured - 1))
    errors.sort()
    without.sort()
    median, median_without = errors[len(errors) // 2], without[len(without) // 2]
    assert median < 0.15, median
    # Without the collectives the same roofline is a third too fast: the term is what
    # brings it close.
    assert median_without > 0.25 and median < median_without / 4


def test_a_table_fits_the_peers_steps_and_a_calibration_set_alike() -> None:
    vidur = load_step_table(VIDUR)
    assert vidur.rows == 577 and vidur.median_error < 0.05
    splitwise = load_step_table("splitwise-llama2-70b#h100-80gb/4")
    assert splitwise.rows == 32 and splitwise.median_error < 0.02
    # Between knots the table follows its steps, where one line misses the prefills
    # by up to a quarter (calibrate's linear fit: max 24%).
    assert splitwise.max_error < 0.05


def test_a_table_step_is_its_pieces() -> None:
    t = load_step_table(VIDUR)
    a, b = t.decode_terms(48)
    assert t.step_s(48, 76477, 260, 273000) == pytest.approx(a + b * 76477 + t.prefill(260) + t.e * 273000)
    assert t.prefill(0) == 0.0
    # The table's own step of 48 decoders and a 260-token chunk: 45.69 ms.
    assert t.step_s(48, 76477, 260, 273000) == pytest.approx(0.0456875, rel=0.1)


def test_the_engine_agrees_with_the_reference_under_a_table(tmp_path: Path) -> None:
    t = load_step_table(VIDUR)
    params = replace(WORKER, max_num_seqs=128, max_batched_tokens=512, kv_cache_tokens=60_000,
                     table=TableParams(t.n_knots, t.a, t.b, t.p_knots, t.p, t.e))
    requests = poisson_requests(qps=12, duration_s=60, prompt=512, output=128, prompt_cv=0.5, output_cv=0.5,
                                seed=5)
    summary, reference = both(requests, tmp_path, workers=1, duration_s=60, params=params,
                              worker={"step_model": "table", "step_table": VIDUR})
    assert reference.count("ok") > 500
    _check_against_reference(summary, reference)


def _scenario(tmp_path: Path, worker: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(
        'name = "t"\nduration_s = 10\n[traffic]\nqps = 1\n[models.m]\nshare = 1.0\nworker_units = 1\ntokens = 500\n'
        f'output_tokens = 50\n[worker]\nbatching = "continuous"\n{worker}\n'
        '[[hosts]]\ncount = 1\nunits = 1\nworkers = ["m@0"]\n', encoding="utf-8")
    return path


@pytest.mark.parametrize(("worker", "key", "says"), [
    ('step_model = "table"', "worker.step_model", "step_table ="),
    ('step_table = "vidur-llama2-70b-h100-tp4"', "worker.step_table", 'only with step_model = "table"'),
    ('step_model = "table"\nstep_table = "no-such-table"', "worker.step_table", "neither a named table"),
    ('step_model = "table"\nstep_table = "splitwise-llama2-70b"', "worker.step_table",
     "splitwise-llama2-70b#h100-80gb/4"),
])
def test_a_table_that_cannot_be_used_is_an_error_naming_the_key(tmp_path: Path, worker: str, key: str,
                                                                says: str) -> None:
    with pytest.raises(ScenarioError) as err:
        load_scenario(_scenario(tmp_path, worker), max_requests=None)
    assert err.value.path == key and says in str(err.value)


def test_a_csv_of_other_columns_is_an_error_naming_them(tmp_path: Path) -> None:
    bad = tmp_path / "steps.csv"
    bad.write_text("batch,time\n1,2\n", encoding="utf-8")
    with pytest.raises(ScenarioError, match="n_dec, sum_ctx, prefill_tokens, sum_chunk_attn, t_ms"):
        read_step_rows(str(bad))


def test_a_table_given_as_a_path_runs(tmp_path: Path) -> None:
    from emulator import Engine

    table = tmp_path / "steps.csv"
    table.write_bytes(STEPS.read_bytes())
    sc = load_scenario(_scenario(tmp_path, f'step_model = "table"\nstep_table = "{table}"'), max_requests=None)
    summary = Engine(sc).run()
    assert summary.ok > 0 and summary.tpot_s["p50"] > 0.02  # a 70B replica's decode steps


def test_too_few_steps_cannot_make_a_table() -> None:
    with pytest.raises(ScenarioError, match="at least 4 steps"):
        fit_table([], "empty")


def test_calibrate_puts_the_three_models_side_by_side_on_a_step_table() -> None:
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "emulator", "calibrate", VIDUR, "--gpu", "H100-SXM-80GB", "--arch", "Llama-2-70B",
         "--tp", "4", "--json"], capture_output=True, text=True, check=True, cwd=ROOT,
    )
    models = json.loads(out.stdout)["models"]
    assert models["steps"] == 577
    # The peer's notes give its own linear least-squares fit of these steps: median
    # 3.4 %, max 17.9 %.
    assert round(models["linear"]["median_error"], 3) == 0.034
    assert round(models["linear"]["max_error"], 3) == 0.179
    assert models["roofline"]["communication"] and models["roofline"]["median_error"] < 0.05
    assert models["table"]["median_error"] < models["linear"]["median_error"]


def test_calibrate_asks_for_all_three_names_for_a_tables_roofline() -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "emulator", "calibrate", VIDUR, "--gpu", "H100-SXM-80GB"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2 and "--gpu, --arch and --tp" in out.stderr
