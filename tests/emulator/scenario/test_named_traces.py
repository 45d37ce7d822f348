"""The shipped trace ``azure-conv-2023``: named in a scenario, it replays exactly the
rows of the file it ships (count, sizes, times), with its attribution beside it."""

from __future__ import annotations

import csv
import datetime
from pathlib import Path

import numpy as np
import pytest
from token_scenarios import scenario

from emulator import Engine
from emulator.scenario import ScenarioError
from emulator.scenario.traces import NAMED_TRACES, TRACE_DATA, load_trace, resolve_trace
from emulator.sim.arrivals import ArrivalSource

SHIPPED = TRACE_DATA / "azure-conv-2023.csv"


def _file_rows() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Arrival (s from the first row), prompt and output tokens, read with csv and
    datetime: a second reader, independent of the one under test."""
    stamps, prompts, outputs = [], [], []
    with SHIPPED.open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            # datetime keeps microseconds; the file has 7 digits, so compare to 1 us.
            stamps.append(datetime.datetime.fromisoformat(row["TIMESTAMP"][:26]))
            prompts.append(int(row["ContextTokens"]))
            outputs.append(int(row["GeneratedTokens"]))
    t0 = stamps[0]
    arrival = np.array([(s - t0).total_seconds() for s in stamps])
    return arrival, np.array(prompts), np.array(outputs)


def test_it_ships_the_trace_with_its_cc_by_attribution() -> None:
    assert SHIPPED.is_file()
    notice = (TRACE_DATA / "README.md").read_text(encoding="utf-8")
    for fact in ("CC-BY 4.0", "AzurePublicDataset", "Splitwise", "ISCA 2024", "Pratyush Patel"):
        assert fact in notice


def test_it_resolves_the_name_to_the_shipped_file_from_any_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_trace("azure-conv-2023") == SHIPPED
    assert len(load_trace("azure-conv-2023")) == 19_366


def test_it_lists_the_named_traces_for_a_name_that_is_neither_name_nor_file() -> None:
    with pytest.raises(ScenarioError) as info:
        scenario(workers=1, duration_s=10.0, trace=Path("azure-conv-2024"))
    message = str(info.value)
    assert message.startswith("traffic.trace: ")
    assert "no such file" in message and "azure-conv-2023" in message
    assert "\n" not in message
    assert list(NAMED_TRACES) == ["azure-conv-2023"]


def test_it_replays_the_named_trace_as_the_file_says() -> None:
    arrival, prompts, outputs = _file_rows()
    sc = scenario(workers=24, duration_s=3600.0, trace=Path("azure-conv-2023"))
    assert sc.traffic.trace == "azure-conv-2023"
    replay = ArrivalSource(sc, np.random.default_rng(0)).replay
    assert replay is not None
    assert replay.time.size == arrival.size == 19_366
    np.testing.assert_array_equal(replay.tokens, prompts)
    np.testing.assert_array_equal(replay.output, outputs)
    np.testing.assert_allclose(replay.time, arrival, atol=1e-6, rtol=0)
    assert sc.expected_requests() == 19_366


def test_it_offers_every_row_of_the_named_trace_in_a_run() -> None:
    arrival, _, _ = _file_rows()
    speedup = 20.0
    sc = scenario(
        workers=24, duration_s=arrival[-1] / speedup + 1.0, trace=Path("azure-conv-2023"),
        traffic={"trace_speedup": speedup},
    )
    summary = Engine(sc).run()
    assert summary.offered == 19_366
    assert summary.balanced()
