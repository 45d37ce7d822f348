"""Request traces for replay: the Azure LLM inference CSV and a plain JSONL format.

Two formats, told apart by the file's extension (``.csv``; ``.jsonl``, ``.ndjson`` or
``.json``) or, for any other name, by whether the first non-blank line starts with
``{``:

* Azure LLM inference trace CSV, header ``TIMESTAMP,ContextTokens,GeneratedTokens``
  (more columns are allowed and ignored), timestamps like
  ``2023-11-16 18:15:46.6805900``. Fractions of up to 9 digits are read exactly as
  integer nanoseconds, so arrival gaps carry no float rounding from absolute times.
* JSONL, one object a line: ``{"arrival_s": 0.5, "prompt_tokens": 100,
  "output_tokens": 20, "model": "chat"}``; ``model`` is optional but must then be on
  every line or on none. A line may also name its shared prompt prefix:
  ``"prefix_id": "system-a", "prefix_tokens": 800`` (an id is a string or a whole
  number; the first ``prefix_tokens`` of the prompt are that prefix's, so at most
  ``prompt_tokens``). Lines without them have no shared prefix.

Arrivals are made relative to the first row (the first is 0.0) and must not go
backwards; equal times are fine. A token count of 0 is read as 1 (a request that
produced no token still occupies one step) and counted in ``Trace.raised_to_one``;
the 2023 Azure conversation trace has none. Blank lines are skipped.

Traces shipped with the package are named (``NAMED_TRACES``): ``traffic.trace =
"azure-conv-2023"`` is the conversation trace of the Azure LLM inference dataset 2023
(CC-BY 4.0; its attribution is in ``trace_data/README.md``).

Errors are ``TraceError``: one line naming the file and line, the problem and the fix.

Kept as one module: both formats end in one ``Trace`` and share its checks and its
errors; the named traces are the shipped instances of it.
"""

from __future__ import annotations

import csv
import datetime
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from emulator.scenario.errors import ScenarioError
from emulator.scenario.limits import MAX_TOKENS

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
JSONL_KEYS = ("arrival_s", "prompt_tokens", "output_tokens", "model", "prefix_id", "prefix_tokens")
_JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")

_TIMESTAMP = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
)
_NS_PER_S = 1_000_000_000
# A loop long enough to exhaust memory is a setting mistake, not a run.
MAX_REPLAY_ROWS = 50_000_000
#: Largest trace file a scenario may name (the Azure conversation trace is 0.7 MB).
MAX_TRACE_BYTES = 512 * 1024 * 1024


class TraceError(ScenarioError):
    """A mistake in a trace file (or a replay setting) that a user can fix: a
    ``ScenarioError`` whose ``path`` names the file and line (``azure.csv line 17``)."""


@dataclass(frozen=True, eq=False)
class Trace:
    """A request trace: per row arrival, prompt and output sizes, and optional model.

    The arrays are read-only. ``raised_to_one`` counts the token counts of 0 that were
    read as 1.
    """

    name: str
    arrival_s: np.ndarray  # float64, relative to the first row (first = 0.0), non-decreasing
    prompt_tokens: np.ndarray  # int64 >= 1
    output_tokens: np.ndarray  # int64 >= 1
    model: tuple[str, ...] | None
    raised_to_one: int = 0
    #: Per row, its shared prefix (ids numbered from 0 in order of first appearance; -1:
    #: none) and that prefix's tokens (0: none); None when no row names a prefix.
    prefix_group: np.ndarray | None = None
    prefix_tokens: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.arrival_s.shape[0])

    @property
    def duration_s(self) -> float:
        """Time from the first arrival to the last."""
        return float(self.arrival_s[-1]) if len(self) else 0.0

    @property
    def mean_gap_s(self) -> float | None:
        """Mean time between consecutive arrivals; None with fewer than two rows."""
        return self.duration_s / (len(self) - 1) if len(self) > 1 else None

    @property
    def mean_qps(self) -> float | None:
        """Arrivals per second over the trace (one per mean gap); None if undefined."""
        gap = self.mean_gap_s
        return 1.0 / gap if gap else None

    @property
    def mean_prompt_tokens(self) -> float:
        """Mean prompt size in tokens."""
        return float(self.prompt_tokens.mean())

    @property
    def mean_output_tokens(self) -> float:
        """Mean output size in tokens."""
        return float(self.output_tokens.mean())


def read_trace(
    path: str | Path, *, max_rows: int | None = None, max_bytes: int | None = None
) -> Trace:
    """Read an Azure CSV or JSONL trace (see the module docstring).

    Reads at most ``max_rows`` rows; a file over ``max_bytes`` is refused before any
    of it is read.
    """
    p = Path(path)
    name = p.name or str(p)
    if max_rows is not None and max_rows < 1:
        raise TraceError(name, f"max_rows is {max_rows}", "ask for 1 row or more")
    try:
        size = p.stat().st_size
    except FileNotFoundError:
        raise TraceError(name, f"no such file ({p})", "check the path") from None
    except OSError as e:
        raise TraceError(name, f"cannot be read ({e.strerror})", "check the path") from None
    if p.is_dir():
        raise TraceError(name, f"is a directory ({p})", "give the path of a trace file")
    if max_bytes is not None and size > max_bytes:
        raise TraceError(
            name, f"is {size:,} bytes, over the limit of {max_bytes:,} bytes",
            "use a shorter trace or raise the limit",
        )
    try:
        with p.open("rb") as f:
            lines = _decoded_lines(name, f)
            if p.suffix.lower() in _JSONL_SUFFIXES:
                return _read_jsonl(name, lines, max_rows)
            if p.suffix.lower() == ".csv":
                return _read_azure(name, lines, max_rows)
            first = next(lines, None)
            if first is None:
                raise _empty(name)
            rest = _chain(first, lines)
            if first[1].lstrip().startswith("{"):
                return _read_jsonl(name, rest, max_rows)
            return _read_azure(name, rest, max_rows)
    except OSError as e:
        raise TraceError(name, f"cannot be read ({e.strerror})", "check its permissions") from None


def replay_times(
    trace: Trace,
    *,
    speedup: float = 1.0,
    start_s: float = 0.0,
    loop: bool = False,
    until_s: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Row indexes into ``trace`` and their arrival times, up to and including ``until_s``.

    Row ``i`` arrives at ``start_s + arrival_s[i] / speedup``. With ``loop`` the trace
    repeats: copy ``k`` (from 0) is shifted by ``k * (duration_s + mean_gap_s)`` of
    trace time, i.e. each copy starts one mean gap after the previous copy's last
    arrival, so the looped stream keeps the trace's mean rate. Looping needs at least
    two rows that do not all arrive at the same instant.
    """
    if not (math.isfinite(speedup) and speedup > 0):
        raise TraceError(
            "speedup", f"is {speedup}", "use a positive number; 1 replays in real time"
        )
    if not (math.isfinite(start_s) and math.isfinite(until_s)):
        raise TraceError("replay", "start_s and until_s must be finite numbers", None)
    n = len(trace)
    empty = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64))
    if n == 0 or until_s < start_s:
        return empty
    if not loop:
        times = start_s + trace.arrival_s / speedup
        kept = np.flatnonzero(times <= until_s).astype(np.int64)
        return kept, times[kept]
    gap = trace.mean_gap_s
    if not gap:
        raise TraceError(
            f"{trace.name} replay",
            "cannot loop a trace whose requests all arrive at one instant",
            "replay it without loop",
        )
    period = trace.duration_s + gap
    copies = int((until_s - start_s) * speedup // period) + 1
    if copies * n > MAX_REPLAY_ROWS:
        raise TraceError(
            f"{trace.name} replay",
            f"looping until {until_s:g} s would replay {copies:,} copies of {n:,} requests",
            f"keep it under {MAX_REPLAY_ROWS:,} requests: lower until_s or the speedup",
        )
    shifts = np.repeat(np.arange(copies, dtype=np.float64) * period, n)
    rows = np.tile(np.arange(n, dtype=np.int64), copies)
    times = start_s + (np.tile(trace.arrival_s, copies) + shifts) / speedup
    keep = times <= until_s
    return rows[keep], times[keep]


def write_jsonl(trace: Trace, path: str | Path) -> None:
    """Write ``trace`` in the JSONL format, one request a line, so it reads back unchanged."""
    with Path(path).open("w", encoding="utf-8") as f:
        for i in range(len(trace)):
            row: dict[str, object] = {
                "arrival_s": float(trace.arrival_s[i]),
                "prompt_tokens": int(trace.prompt_tokens[i]),
                "output_tokens": int(trace.output_tokens[i]),
            }
            if trace.model is not None:
                row["model"] = trace.model[i]
            groups, shared = trace.prefix_group, trace.prefix_tokens
            if groups is not None and shared is not None and groups[i] >= 0:
                row["prefix_id"] = int(groups[i])
                row["prefix_tokens"] = int(shared[i])
            f.write(json.dumps(row) + "\n")


# -- reading lines -----------------------------------------------------------------


def _decoded_lines(name: str, f: IO[bytes]) -> Iterator[tuple[int, str]]:
    """Numbered non-blank lines, decoded one at a time so a bad byte names its line."""
    for lineno, raw in enumerate(f, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise TraceError(
                f"{name} line {lineno}", f"is not UTF-8 text (byte 0x{raw[e.start]:02x})",
                "save the trace as UTF-8",
            ) from None
        if lineno == 1:
            text = text.removeprefix("\ufeff")
        text = text.rstrip("\r\n")
        if text.strip():
            yield lineno, text


def _chain(first: tuple[int, str], rest: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    yield first
    yield from rest


def _empty(name: str) -> TraceError:
    return TraceError(name, "has no requests", "give a trace with at least one row")


# -- Azure CSV ---------------------------------------------------------------------


def _read_azure(name: str, lines: Iterator[tuple[int, str]], max_rows: int | None) -> Trace:
    header_line = next(lines, None)
    if header_line is None:
        raise _empty(name)
    header_no, header_text = header_line
    header = [h.strip() for h in next(csv.reader([header_text]))]
    for column in AZURE_COLUMNS:
        if column not in header:
            raise TraceError(
                f"{name} line {header_no}",
                f'missing column "{column}"; the header has {", ".join(header)}',
                f"an Azure trace needs {','.join(AZURE_COLUMNS)}",
            )
    at = [header.index(c) for c in AZURE_COLUMNS]
    times_ns: list[int] = []
    prompts: list[int] = []
    outputs: list[int] = []
    raised = 0
    previous: tuple[int, str] | None = None  # (line, timestamp text) of the last row
    for lineno, text in lines:
        where = f"{name} line {lineno}"
        fields = next(csv.reader([text]))
        if len(fields) != len(header):
            raise TraceError(
                where, f"has {len(fields)} fields, the header has {len(header)}",
                "give every row one value per column",
            )
        stamp, context, generated = (fields[i].strip() for i in at)
        t_ns = _timestamp_ns(where, stamp)
        if times_ns and t_ns < times_ns[-1]:
            assert previous is not None
            raise TraceError(
                where, f"TIMESTAMP {stamp} is earlier than line {previous[0]}'s {previous[1]}",
                "sort the trace by TIMESTAMP",
            )
        prompt, low_p = _tokens(where, "ContextTokens", context)
        output, low_o = _tokens(where, "GeneratedTokens", generated)
        raised += low_p + low_o
        times_ns.append(t_ns)
        prompts.append(prompt)
        outputs.append(output)
        previous = (lineno, stamp)
        if max_rows is not None and len(times_ns) >= max_rows:
            break
    if not times_ns:
        raise _empty(name)
    # Integer nanoseconds relative to the first row, so the float64 seconds keep every digit.
    t0 = times_ns[0]
    arrival = np.array([t - t0 for t in times_ns], dtype=np.int64) / _NS_PER_S
    return _trace(name, arrival, prompts, outputs, None, raised)


def _timestamp_ns(where: str, text: str) -> int:
    m = _TIMESTAMP.fullmatch(text)
    fix = "write times as YYYY-MM-DD HH:MM:SS.fffffff"
    if m is None:
        raise TraceError(where, f'TIMESTAMP "{text}" is not a date and time', fix)
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    try:
        ordinal = datetime.date(year, month, day).toordinal()
    except ValueError:
        raise TraceError(where, f'TIMESTAMP "{text}" has no such date', fix) from None
    if hour > 23 or minute > 59 or second > 59:
        raise TraceError(where, f'TIMESTAMP "{text}" has no such time of day', fix)
    fraction = (m.group(7) or "").ljust(9, "0")
    seconds = ordinal * 86400 + hour * 3600 + minute * 60 + second
    return seconds * _NS_PER_S + int(fraction)


_OVER_FIX = "a request's token count is a real prompt's or output's length; check the column"


def _tokens(where: str, column: str, text: str) -> tuple[int, int]:
    """The token count in ``text``, and 1 if a 0 was raised to 1 (else 0)."""
    fix = "token counts are whole numbers of 1 or more"
    if re.fullmatch(r"[+-]?\d+", text) is None:
        raise TraceError(where, f'{column} "{text}" is not a whole number', fix)
    value = int(text)
    if value < 0:
        raise TraceError(where, f'{column} "{text}" is negative', fix)
    if value > MAX_TOKENS:
        raise TraceError(where, f'{column} "{text}" is over the limit of {MAX_TOKENS:,} tokens', _OVER_FIX)
    return (1, 1) if value == 0 else (value, 0)


# -- JSONL -------------------------------------------------------------------------


def _read_jsonl(name: str, lines: Iterator[tuple[int, str]], max_rows: int | None) -> Trace:
    arrivals: list[float] = []
    prompts: list[int] = []
    outputs: list[int] = []
    models: list[str] = []
    groups: list[int] = []
    shared: list[int] = []
    ids: dict[object, int] = {}
    raised = 0
    first_line = 0
    previous_line = 0
    for lineno, text in lines:
        where = f"{name} line {lineno}"
        try:
            row = json.loads(text)
        except json.JSONDecodeError as e:
            raise TraceError(
                where, f"is not valid JSON ({e.msg})", "write one JSON object a line"
            ) from None
        except RecursionError:
            # Python's JSON reader recurses once per level of nesting.
            raise TraceError(
                where, "nests arrays or objects too deep to read",
                'write one flat object a line, like {"arrival_s": 0.5, "prompt_tokens": 100, '
                '"output_tokens": 20}',
            ) from None
        if not isinstance(row, dict):
            raise TraceError(
                where, f"is a JSON {_json_kind(row)}, not an object",
                'write one object a line, like {"arrival_s": 0.5, "prompt_tokens": 100, '
                '"output_tokens": 20}',
            )
        unknown = sorted(set(row) - set(JSONL_KEYS))
        if unknown:
            raise TraceError(
                where, f'unknown key "{unknown[0]}"', f"the keys are {', '.join(JSONL_KEYS)}"
            )
        for key in JSONL_KEYS[:3]:
            if key not in row:
                raise TraceError(
                    where, f'lacks "{key}"',
                    "every line needs arrival_s, prompt_tokens and output_tokens",
                )
        arrival = row["arrival_s"]
        if (
            isinstance(arrival, bool) or not isinstance(arrival, int | float)
            or not math.isfinite(arrival)
        ):
            raise TraceError(
                where, f"arrival_s {json.dumps(arrival)} is not a number", "give seconds, like 0.5"
            )
        if arrivals and arrival < arrivals[-1]:
            raise TraceError(
                where, f"arrival_s {arrival} is earlier than line {previous_line}'s {arrivals[-1]}",
                "sort the trace by arrival_s",
            )
        prompt, low_p = _json_tokens(where, "prompt_tokens", row["prompt_tokens"])
        output, low_o = _json_tokens(where, "output_tokens", row["output_tokens"])
        raised += low_p + low_o
        has_model = "model" in row
        if arrivals and has_model != bool(models):
            raise TraceError(
                where, f'has {"a" if has_model else "no"} "model" but line {first_line} has '
                f'{"none" if has_model else "one"}', 'give "model" on every line or on none',
            )
        if has_model:
            model = row["model"]
            if not isinstance(model, str) or not model:
                raise TraceError(
                    where, f"model {json.dumps(model)} is not a name",
                    'write it as a string, like "chat"',
                )
            models.append(model)
        group, tokens = _json_prefix(where, row, prompt, ids)
        groups.append(group)
        shared.append(tokens)
        if not arrivals:
            first_line = lineno
        arrivals.append(float(arrival))
        prompts.append(prompt)
        outputs.append(output)
        previous_line = lineno
        if max_rows is not None and len(arrivals) >= max_rows:
            break
    if not arrivals:
        raise _empty(name)
    arrival_s = np.array(arrivals, dtype=np.float64) - arrivals[0]
    trace = _trace(name, arrival_s, prompts, outputs, tuple(models) if models else None, raised)
    if not ids:
        return trace
    group_col, tokens_col = np.array(groups, dtype=np.int64), np.array(shared, dtype=np.int64)
    group_col.flags.writeable = tokens_col.flags.writeable = False
    return Trace(
        trace.name, trace.arrival_s, trace.prompt_tokens, trace.output_tokens, trace.model,
        trace.raised_to_one, prefix_group=group_col, prefix_tokens=tokens_col,
    )


def _json_prefix(where: str, row: dict, prompt: int, ids: dict[object, int]) -> tuple[int, int]:
    """A line's shared prefix: (its id's number, its tokens), or (-1, 0) for none."""
    has_id, has_tokens = "prefix_id" in row, "prefix_tokens" in row
    if not has_id and not has_tokens:
        return -1, 0
    if has_id != has_tokens:
        given, lacking = ("prefix_id", "prefix_tokens") if has_id else ("prefix_tokens", "prefix_id")
        raise TraceError(
            where, f'has "{given}" but lacks "{lacking}"', "give both prefix_id and prefix_tokens, or neither"
        )
    ident = row["prefix_id"]
    if isinstance(ident, float) and ident.is_integer():
        ident = int(ident)
    if isinstance(ident, bool) or not (isinstance(ident, int) or isinstance(ident, str) and ident):
        raise TraceError(
            where, f"prefix_id {json.dumps(ident)} is not an id", 'give a string or a whole number, like "system-a"'
        )
    tokens, _ = _json_tokens(where, "prefix_tokens", row["prefix_tokens"])
    if row["prefix_tokens"] == 0:
        raise TraceError(where, "prefix_tokens is 0", "give the prefix's tokens (1 or more), or drop prefix_id")
    if tokens > prompt:
        raise TraceError(
            where, f"prefix_tokens {tokens} is more than prompt_tokens {prompt}",
            "the prefix is the first part of the prompt: give at most prompt_tokens",
        )
    key = (type(ident).__name__, ident)
    return ids.setdefault(key, len(ids)), tokens


def _json_tokens(where: str, key: str, value: object) -> tuple[int, int]:
    fix = "token counts are whole numbers of 1 or more"
    # 100.0 is accepted: some writers (pandas) print whole floats that way.
    if (
        isinstance(value, bool) or not isinstance(value, int | float)
        or (isinstance(value, float) and not value.is_integer())
    ):
        raise TraceError(where, f"{key} {json.dumps(value)} is not a whole number", fix)
    if value > MAX_TOKENS:
        # Also before int(): a float this large may not be a count at all (inf, 1e400).
        raise TraceError(where, f"{key} {json.dumps(value)} is over the limit of {MAX_TOKENS:,} tokens", _OVER_FIX)
    count = int(value)
    if count < 0:
        raise TraceError(where, f"{key} {count} is negative", fix)
    return (1, 1) if count == 0 else (count, 0)


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    return "number" if not isinstance(value, bool) else "boolean"


def _trace(
    name: str, arrival_s: np.ndarray, prompts: list[int], outputs: list[int],
    models: tuple[str, ...] | None, raised: int,
) -> Trace:
    columns = (
        arrival_s.astype(np.float64), np.array(prompts, dtype=np.int64),
        np.array(outputs, dtype=np.int64),
    )
    for column in columns:
        column.flags.writeable = False
    return Trace(name, *columns, model=models, raised_to_one=raised)


#: Traces read so far, by resolved path, modification time and size: a scenario is
#: validated and then run (often several times) without reading its trace again.
_LOADED: dict[tuple[str, int, int], Trace] = {}


#: Traces shipped with the package, by name (files in ``trace_data/``, each with its
#: attribution in ``trace_data/README.md``).
NAMED_TRACES: dict[str, str] = {
    "azure-conv-2023": "azure-conv-2023.csv",
}
TRACE_DATA = Path(__file__).resolve().parent / "trace_data"


def resolve_trace(name_or_path: str, *, key: str = "traffic.trace") -> Path:
    """The file of a named trace (``azure-conv-2023``) or of a path.

    A shipped name wins over a file of the same name in the working directory, so a
    scenario means the same trace wherever it runs. Anything else must be an existing
    file; otherwise the error names ``key`` and lists the named traces.
    """
    if name_or_path in NAMED_TRACES:
        return TRACE_DATA / NAMED_TRACES[name_or_path]
    file = Path(name_or_path).expanduser()
    if not file.exists():
        raise TraceError(
            key, f'"{name_or_path}" is no such file and no named trace',
            f"give a trace file's path or one of the named traces: {', '.join(NAMED_TRACES)}",
        )
    return file


def load_trace(path: str, *, key: str = "traffic.trace") -> Trace:
    """The trace named or found at ``path`` (see ``resolve_trace``), read once and kept
    while the file is unchanged. Errors name ``key`` when there is no such trace."""
    file = resolve_trace(path, key=key)
    try:
        stat = file.stat()
    except OSError:
        raise TraceError(key, f'"{path}" is no such file', "give the path of a trace file") from None
    cache_key = (str(file.resolve()), stat.st_mtime_ns, stat.st_size)
    trace = _LOADED.get(cache_key)
    if trace is None:
        trace = read_trace(file, max_bytes=MAX_TRACE_BYTES)
        if len(_LOADED) >= 8:
            _LOADED.clear()
        _LOADED[cache_key] = trace
    return trace
