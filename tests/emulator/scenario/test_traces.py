"""Traces read exactly, refuse bad files with one-line errors, and replay on a clock."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from emulator.scenario.traces import Trace, TraceError, read_trace, replay_times, write_jsonl

#: The conversation trace of the Azure LLM inference trace 2023, as the package ships it.
AZURE = Path(__file__).resolve().parents[3] / "emulator" / "scenario" / "trace_data" / "azure-conv-2023.csv"
HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


@pytest.fixture(scope="module")
def azure() -> Trace:
    return read_trace(AZURE)


def _csv(tmp_path: Path, *rows: str, name: str = "azure.csv") -> Path:
    path = tmp_path / name
    path.write_text(HEADER + "".join(r + "\n" for r in rows), encoding="utf-8")
    return path


def _jsonl(tmp_path: Path, *rows: object, name: str = "trace.jsonl") -> Path:
    path = tmp_path / name
    path.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows),
        encoding="utf-8",
    )
    return path


def _error(path: Path, **kw: int) -> str:
    with pytest.raises(TraceError) as info:
        read_trace(path, **kw)
    text = str(info.value)
    assert "\n" not in text
    return text


def _row(t: str, prompt: object = 10, output: object = 5) -> str:
    return f"2023-11-16 18:15:{t},{prompt},{output}"


# -- the real Azure trace ----------------------------------------------------------


def test_it_reads_every_row_of_the_real_azure_trace(azure: Trace) -> None:
    # The file has 19,366 data rows; `wc -l` prints 19366 because the last row has no
    # line break, which is easy to misread as header + 19,365.
    assert len(azure) == 19366
    assert azure.name == "azure-conv-2023.csv"
    assert azure.model is None
    assert azure.raised_to_one == 0
    assert list(azure.prompt_tokens[:4]) == [374, 396, 879, 91]
    assert list(azure.output_tokens[:4]) == [44, 109, 55, 16]
    assert (azure.prompt_tokens[-1], azure.output_tokens[-1]) == (197, 183)
    assert azure.arrival_s.dtype == np.float64 and azure.prompt_tokens.dtype == np.int64
    assert azure.arrival_s[0] == 0.0
    assert np.all(np.diff(azure.arrival_s) >= 0)
    assert 3400 < azure.duration_s < 3600  # 18:15:46 to 19:14:08
    assert azure.mean_qps == pytest.approx(5.53, abs=0.01)


def test_it_keeps_the_seventh_fractional_digit_of_azure_timestamps(azure: Trace) -> None:
    # 18:15:50.9951690 - 18:15:46.6805900, and two rows 2 microseconds apart (lines 6843-4),
    # which absolute float seconds since the epoch would blur.
    assert azure.arrival_s[1] == pytest.approx(4.314579, abs=1e-12)
    assert float(np.diff(azure.arrival_s).min()) == pytest.approx(2e-6, abs=1e-12)


def test_it_stops_after_max_rows(azure: Trace) -> None:
    head = read_trace(AZURE, max_rows=10)
    assert len(head) == 10
    assert np.array_equal(head.arrival_s, azure.arrival_s[:10])


def test_it_refuses_a_file_over_max_bytes_before_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    path.write_bytes(b"\xff" * 5000)  # not UTF-8: reading any of it would fail differently
    text = _error(path, max_bytes=4096)
    assert text == (
        "big.csv: is 5,000 bytes, over the limit of 4,096 bytes; "
        "use a shorter trace or raise the limit"
    )


# -- JSONL -------------------------------------------------------------------------


def test_it_round_trips_a_trace_through_jsonl(tmp_path: Path) -> None:
    source = read_trace(_csv(tmp_path, _row("46.6805900", 374, 44), _row("50.9951690", 396, 0)))
    path = tmp_path / "copy.jsonl"
    write_jsonl(source, path)
    copy = read_trace(path)
    assert copy.name == "copy.jsonl"
    assert copy.model is None
    for field in ("arrival_s", "prompt_tokens", "output_tokens"):
        assert np.array_equal(getattr(copy, field), getattr(source, field))
    assert list(copy.output_tokens) == [44, 1]  # the 0 was read as 1 ...
    assert source.raised_to_one == 1  # ... and counted


def test_it_reads_jsonl_models_and_makes_arrivals_relative_to_the_first(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path,
        {"arrival_s": 2.0, "prompt_tokens": 100, "output_tokens": 20, "model": "chat"},
        "",
        {"arrival_s": 2.5, "prompt_tokens": 7, "output_tokens": 3.0, "model": "code"},
    )
    trace = read_trace(path)
    assert list(trace.arrival_s) == [0.0, 0.5]
    assert list(trace.output_tokens) == [20, 3]
    assert trace.model == ("chat", "code")
    written = tmp_path / "again.jsonl"
    write_jsonl(trace, written)
    assert read_trace(written).model == ("chat", "code")


def test_it_tells_the_format_by_content_when_the_extension_says_nothing(tmp_path: Path) -> None:
    jsonl = _jsonl(tmp_path, {"arrival_s": 0, "prompt_tokens": 1, "output_tokens": 1}, name="t.txt")
    csv_file = _csv(tmp_path, _row("46.0"), name="t.log")
    assert len(read_trace(jsonl)) == 1
    assert len(read_trace(csv_file)) == 1


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("[1, 2]", "trace.jsonl line 2: is a JSON list, not an object"),
        ('{"arrival_s": 1, "prompt_tokens": 5}', 'trace.jsonl line 2: lacks "output_tokens"'),
        (
            '{"arrival_s": 1, "prompt_tokens": 5, "output_tokens": 2, "prio": 1}',
            'trace.jsonl line 2: unknown key "prio"; the keys are arrival_s, prompt_tokens, '
            "output_tokens, model",
        ),
        ('{"arrival_s": 1,', "trace.jsonl line 2: is not valid JSON"),
        (
            '{"arrival_s": 1, "prompt_tokens": 2.5, "output_tokens": 2}',
            "trace.jsonl line 2: prompt_tokens 2.5 is not a whole number",
        ),
        (
            '{"arrival_s": 1, "prompt_tokens": 5, "output_tokens": -1}',
            "trace.jsonl line 2: output_tokens -1 is negative",
        ),
        (
            '{"arrival_s": "soon", "prompt_tokens": 5, "output_tokens": 1}',
            'trace.jsonl line 2: arrival_s "soon" is not a number',
        ),
        (
            '{"arrival_s": 0.5, "prompt_tokens": 5, "output_tokens": 1}',
            "trace.jsonl line 2: arrival_s 0.5 is earlier than line 1's 1.0",
        ),
        (
            '{"arrival_s": 1, "prompt_tokens": 5, "output_tokens": 1, "model": "chat"}',
            'trace.jsonl line 2: has a "model" but line 1 has none',
        ),
    ],
)
def test_it_names_the_line_and_key_of_a_bad_jsonl_row(
    tmp_path: Path, line: str, expected: str
) -> None:
    good = {"arrival_s": 1.0, "prompt_tokens": 5, "output_tokens": 1}
    assert _error(_jsonl(tmp_path, good, line)).startswith(expected)


# -- Azure CSV errors --------------------------------------------------------------


def test_it_names_the_line_and_column_of_a_negative_token_count(tmp_path: Path) -> None:
    rows = [_row(f"{10 + i}.0") for i in range(15)] + [_row("30.0", -3)]
    assert _error(_csv(tmp_path, *rows)) == (
        'azure.csv line 17: ContextTokens "-3" is negative; '
        "token counts are whole numbers of 1 or more"
    )


def test_it_names_a_token_count_that_is_not_a_whole_number(tmp_path: Path) -> None:
    text = _error(_csv(tmp_path, _row("46.0"), _row("47.0", 10, "many")))
    assert text.startswith('azure.csv line 3: GeneratedTokens "many" is not a whole number')


def test_it_names_the_missing_column_and_what_the_header_has(tmp_path: Path) -> None:
    path = tmp_path / "azure.csv"
    path.write_text("TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.0,10\n", encoding="utf-8")
    assert _error(path) == (
        'azure.csv line 1: missing column "GeneratedTokens"; the header has TIMESTAMP, '
        "ContextTokens; an Azure trace needs TIMESTAMP,ContextTokens,GeneratedTokens"
    )


@pytest.mark.parametrize(
    ("stamp", "problem"),
    [("yesterday", "is not a date and time"), ("2023-11-16 25:00:00.0", "has no such time of day"),
     ("2023-02-30 10:00:00.0", "has no such date")],
)
def test_it_names_a_bad_timestamp(tmp_path: Path, stamp: str, problem: str) -> None:
    text = _error(_csv(tmp_path, _row("46.0"), f"{stamp},10,5"))
    assert text.startswith(f'azure.csv line 3: TIMESTAMP "{stamp}" {problem}')
    assert text.endswith("write times as YYYY-MM-DD HH:MM:SS.fffffff")


def test_it_names_the_line_whose_time_goes_backwards(tmp_path: Path) -> None:
    path = _csv(tmp_path, _row("46.0000000"), _row("46.0000000"), _row("45.9999999"))
    assert _error(path) == (
        "azure.csv line 4: TIMESTAMP 2023-11-16 18:15:45.9999999 is earlier than line 3's "
        "2023-11-16 18:15:46.0000000; sort the trace by TIMESTAMP"
    )


def test_it_names_a_row_with_the_wrong_number_of_fields(tmp_path: Path) -> None:
    text = _error(_csv(tmp_path, _row("46.0"), "2023-11-16 18:15:47.0,10"))
    assert text.startswith("azure.csv line 3: has 2 fields, the header has 3")


def test_it_refuses_an_empty_file_and_a_header_without_rows(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    assert _error(empty) == "empty.csv: has no requests; give a trace with at least one row"
    assert "has no requests" in _error(_csv(tmp_path))
    assert "has no requests" in _error(_jsonl(tmp_path, "", name="blank.jsonl"))


def test_it_refuses_a_missing_file_a_directory_and_bytes_that_are_not_utf8(
    tmp_path: Path,
) -> None:
    assert _error(tmp_path / "nope.csv").startswith("nope.csv: no such file (")
    assert _error(tmp_path).startswith(f"{tmp_path.name}: is a directory")
    latin = tmp_path / "latin.csv"
    latin.write_bytes(HEADER.encode() + b"2023-11-16 18:15:46.0,10,5\n\xe9t\xe9,1,1\n")
    assert _error(latin) == (
        "latin.csv line 3: is not UTF-8 text (byte 0xe9); save the trace as UTF-8"
    )


def test_it_reads_crlf_a_byte_order_mark_and_extra_columns(tmp_path: Path) -> None:
    path = tmp_path / "azure.csv"
    path.write_bytes(
        b"\xef\xbb\xbfTIMESTAMP,NumImages,ContextTokens,GeneratedTokens\r\n"
        b"2023-11-16 18:15:46.6805900,2,374,44\r\n2023-11-16 18:15:47,1,5,0\r\n"
    )
    trace = read_trace(path)
    assert list(trace.prompt_tokens) == [374, 5]
    assert trace.arrival_s[1] == pytest.approx(0.31941, abs=1e-12)
    assert trace.raised_to_one == 1


# -- replay ------------------------------------------------------------------------


def _small() -> Trace:
    return Trace(
        "small", np.array([0.0, 1.0, 3.0]), np.array([5, 6, 7]), np.array([1, 2, 3]), None
    )


def test_it_replays_with_gaps_divided_by_the_speedup_from_the_start_offset() -> None:
    rows, times = replay_times(_small(), speedup=2.0, start_s=10.0, until_s=100.0)
    assert list(rows) == [0, 1, 2]
    assert list(times) == [10.0, 10.5, 11.5]


def test_it_drops_rows_after_until_and_keeps_one_exactly_at_it() -> None:
    rows, times = replay_times(_small(), speedup=2.0, start_s=10.0, until_s=10.5)
    assert list(rows) == [0, 1]
    assert list(times) == [10.0, 10.5]
    rows, _ = replay_times(_small(), start_s=10.0, until_s=9.0)
    assert len(rows) == 0


def test_it_loops_starting_each_copy_one_mean_gap_after_the_last_arrival() -> None:
    # Duration 3, mean gap 1.5: copies start every 4.5 s of trace time.
    rows, times = replay_times(_small(), loop=True, until_s=10.0)
    assert list(rows) == [0, 1, 2, 0, 1, 2, 0, 1]
    assert list(times) == [0.0, 1.0, 3.0, 4.5, 5.5, 7.5, 9.0, 10.0]
    rows, times = replay_times(_small(), speedup=3.0, start_s=1.0, loop=True, until_s=4.0)
    assert list(rows) == [0, 1, 2, 0, 1, 2, 0]
    assert times == pytest.approx([1.0, 4 / 3, 2.0, 2.5, 17 / 6, 3.5, 4.0])


def test_it_keeps_the_trace_rate_when_looping_the_real_trace(azure: Trace) -> None:
    rows, times = replay_times(azure, speedup=4.0, loop=True, until_s=3 * azure.duration_s)
    assert np.all(np.diff(times) >= 0)
    qps = azure.mean_qps
    assert qps is not None
    assert len(rows) / times[-1] == pytest.approx(4.0 * qps, rel=0.01)


def test_it_refuses_a_gapless_loop_a_zero_speedup_and_an_endless_replay() -> None:
    one = Trace("one", np.array([0.0]), np.array([5]), np.array([1]), None)
    with pytest.raises(TraceError, match="cannot loop"):
        replay_times(one, loop=True, until_s=10.0)
    with pytest.raises(TraceError, match="speedup: is 0"):
        replay_times(_small(), speedup=0.0, until_s=10.0)
    with pytest.raises(TraceError, match="would replay"):
        replay_times(_small(), loop=True, until_s=1e12)
