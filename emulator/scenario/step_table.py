"""The ``table`` step model: step times read off a measured or profiled table.

A table row is one step and its time: ``n_dec`` decoding sequences whose contexts sum
to ``sum_ctx`` tokens, ``prefill_tokens`` in the step's prompt chunks and
``sum_chunk_attn`` (the sum over chunks of chunk x (chunk start + chunk)), and ``t_ms``.
That is the shape of a simulator's step log (``peers/vidur``'s step-time file). The
calibration CSVs (SplitwiseSim's ``perf_model.csv``, see ``emulator.analysis.calibration``)
give the same rows once read: a prompt point is a prefill-only step of batch x prompt
tokens, a token point a decode step of ``batch`` sequences at the mean context.

The model a table gives is

    t = a(n) + b x sum_ctx + P(prefill_tokens) + e x sum_chunk_attn

where ``a`` is piecewise linear in the number of decoders and ``P`` piecewise linear in
the prefill tokens (P(0) = 0), each between knots placed at the table's own sizes, and
``b`` (a token of context read) and ``e`` (attention) are single coefficients. The knots' values are a least-squares fit
on the relative error, so a 30 ms decode step counts as much as a 3 s prefill; between
knots the cost follows the table, which a single line cannot (matrix multiplications
cost in steps of their tile sizes). Beyond the table's largest sizes each piece goes on
along its last segment: a table should cover the sizes a fleet runs at, and ``calibrate``
says how well it fits. For a fixed batch a decode step is still a line in the contexts,
so the closed-form decode stretch holds as under the linear model.
"""

from __future__ import annotations

import csv
import gzip
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from emulator.scenario.errors import ScenarioError
from emulator.scenario.measurements import Group, read_groups, resolve_measurements

__all__ = ["NAMED_TABLES", "StepRow", "StepTable", "fit_table", "load_step_table", "read_step_rows"]

DATA = Path(__file__).resolve().parent / "step_tables"
#: Step-time tables shipped with the package (``step_tables/``, attribution beside).
NAMED_TABLES: dict[str, str] = {
    "vidur-llama2-70b-h100-tp4": "vidur-llama2-70b-h100-tp4.csv",
}
#: The calibration CSVs' columns (one configuration: a named group).
CALIBRATION_COLUMNS = ("prompt_size", "batch_size", "token_size", "prompt_time", "token_time")
STEP_COLUMNS = ("n_dec", "sum_ctx", "prefill_tokens", "sum_chunk_attn", "t_ms")
#: At most this many knots per piece: enough for tile steps, few enough to stay a fit.
MAX_KNOTS = 12
MAX_ROWS = 200_000


@dataclass(frozen=True)
class StepRow:
    """One step of a table: its sizes and its time in seconds."""

    n_dec: int
    sum_ctx: float
    prefill_tokens: int
    sum_chunk_attn: float
    t_s: float
    #: The KV the step reads (contexts, and each chunk's prompt so far) when the source
    #: says; else one chunk a step is assumed (``kv_read_tokens``).
    kv_read: float | None = None

    @property
    def kv_read_tokens(self) -> float:
        """Tokens of KV the step reads: given, or the decoders' contexts plus one chunk's
        start + chunk (its attention term over its length)."""
        if self.kv_read is not None:
            return self.kv_read
        return self.sum_ctx + (self.sum_chunk_attn / self.prefill_tokens if self.prefill_tokens else 0.0)


@dataclass(frozen=True)
class StepTable:
    """The fitted pieces: knots and values of a, b (over decoders) and P (over prefill
    tokens), and the attention coefficient ``e``; ``source`` says where it came from."""

    source: str
    n_knots: tuple[float, ...]
    a: tuple[float, ...]
    b: tuple[float, ...]
    p_knots: tuple[float, ...]
    p: tuple[float, ...]
    e: float
    rows: int
    median_error: float
    max_error: float

    def decode_terms(self, n: float) -> tuple[float, float]:
        """a(n) and b(n): a decode step of n sequences lasts a + b x their contexts."""
        return _interp(self.n_knots, self.a, n), _interp(self.n_knots, self.b, n)

    def prefill(self, tokens: float) -> float:
        """P(tokens): what the step's prompt chunks add, before their attention."""
        if tokens <= 0:
            return 0.0
        return _interp(self.p_knots, self.p, tokens)

    def step_s(self, n_dec: float, sum_ctx: float, prefill_tokens: float, sum_chunk_attn: float) -> float:
        """One step's time."""
        a, b = self.decode_terms(n_dec)
        return a + b * sum_ctx + self.prefill(prefill_tokens) + self.e * sum_chunk_attn

    def lookups(self, max_seqs: int, max_tokens: int) -> tuple[list[float], list[float], list[float]]:
        """a(n) and b(n) for n = 0..max_seqs and P(p) for p = 0..max_tokens, for the engine
        to index instead of interpolating every step."""
        a = [self.decode_terms(n)[0] for n in range(max_seqs + 1)]
        b = [self.decode_terms(n)[1] for n in range(max_seqs + 1)]
        p = [self.prefill(t) for t in range(max_tokens + 1)]
        return a, b, p


def _interp(knots: tuple[float, ...], values: tuple[float, ...], x: float) -> float:
    """Piecewise linear through (knots, values), going on along the end segments."""
    if len(knots) == 1:
        return values[0]
    i = int(np.searchsorted(knots, x, side="right")) - 1
    i = min(max(i, 0), len(knots) - 2)
    x0, x1 = knots[i], knots[i + 1]
    w = (x - x0) / (x1 - x0)
    return values[i] + w * (values[i + 1] - values[i])


def _hats(knots: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The hat basis of piecewise linear functions on ``knots`` at ``x`` (one column a
    knot), extended linearly beyond the ends."""
    out = np.zeros((len(x), len(knots)))
    if len(knots) == 1:
        out[:, 0] = 1.0
        return out
    i = np.clip(np.searchsorted(knots, x, side="right") - 1, 0, len(knots) - 2)
    w = (x - knots[i]) / (knots[i + 1] - knots[i])
    rows = np.arange(len(x))
    out[rows, i] = 1.0 - w
    out[rows, i + 1] = w
    return out


def _knots(values: np.ndarray, zero: bool) -> np.ndarray:
    """Knots at the table's sizes: every distinct size if there are few, else quantiles;
    0 first when ``zero``."""
    distinct = np.unique(values[values > 0])
    if len(distinct) > MAX_KNOTS - 1:
        distinct = np.unique(np.quantile(distinct, np.linspace(0, 1, MAX_KNOTS - 1)))
    knots = np.concatenate([[0.0], distinct]) if zero else distinct
    return np.unique(knots)


def fit_table(rows: list[StepRow], source: str) -> StepTable:
    """The pieces fitted to ``rows`` by least squares on the relative error."""
    if len(rows) < 4:
        raise ScenarioError("worker.step_table", f"{source} has {len(rows)} steps",
                            "a table needs at least 4 steps of different sizes")
    n = np.array([r.n_dec for r in rows], dtype=float)
    ctx = np.array([r.sum_ctx for r in rows])
    p = np.array([r.prefill_tokens for r in rows], dtype=float)
    attn = np.array([r.sum_chunk_attn for r in rows])
    t = np.array([r.t_s for r in rows])
    n_knots = _knots(n, zero=True)
    p_knots = _knots(p, zero=True)
    hn = _hats(n_knots, n)
    hp = _hats(p_knots, p)[:, 1:]  # P(0) = 0: no column for the first knot
    # One KV coefficient for every batch: a token of context costs its read whatever the
    # batch (a slope per batch size, fitted on the narrow range of contexts a table has
    # at that size, goes wild outside it).
    design = np.hstack([hn, ctx[:, None], hp, attn[:, None]])
    weight = 1.0 / t
    # Columns no row touches (a knot with no step near it) are left out of the solve.
    used = np.abs(design).sum(axis=0) > 0
    scale = np.abs(design[:, used]).max(axis=0)
    solution, *_ = np.linalg.lstsq(design[:, used] / scale * weight[:, None], t * weight, rcond=None)
    coef = np.zeros(design.shape[1])
    coef[used] = solution / scale
    k = len(n_knots)
    a, b = coef[:k], np.full(k, coef[k])
    pv = np.concatenate([[0.0], coef[k + 1:k + len(p_knots)]])
    e = float(coef[-1])
    if e < 0:  # attention costs time: a fit that says otherwise leaves it to the pieces
        keep = np.ones(design.shape[1], dtype=bool)
        keep[-1] = False
        sub = used & keep
        scale = np.abs(design[:, sub]).max(axis=0)
        solution, *_ = np.linalg.lstsq(design[:, sub] / scale * weight[:, None], t * weight, rcond=None)
        coef = np.zeros(design.shape[1])
        coef[sub] = solution / scale
        a, b = coef[:k], np.full(k, coef[k])
        pv = np.concatenate([[0.0], coef[k + 1:k + len(p_knots)]])
        e = 0.0
    errors = np.abs(design @ coef / t - 1)
    return StepTable(source, tuple(n_knots.tolist()), tuple(a.tolist()), tuple(b.tolist()),
                     tuple(p_knots.tolist()), tuple(pv.tolist()), e, len(rows),
                     float(np.median(errors)), float(errors.max()))


def _open(path: Path):  # type: ignore[no-untyped-def]
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open(encoding="utf-8")


def resolve_table(name_or_path: str) -> Path:
    """A named table, a calibration set's name, or a path."""
    if name_or_path in NAMED_TABLES:
        return DATA / NAMED_TABLES[name_or_path]
    try:
        return resolve_measurements(name_or_path.split("#", 1)[0])
    except ScenarioError:
        raise ScenarioError(
            "worker.step_table", f'"{name_or_path}" is neither a named table nor a readable file',
            f"name one of {', '.join(NAMED_TABLES)} or a calibration set, or give a CSV path",
        ) from None


def read_step_rows(name_or_path: str) -> list[StepRow]:
    """The steps of a table: a step-time file, or one configuration of a calibration CSV
    (``NAME#hardware/tp`` picks it when the file holds several)."""
    path = resolve_table(name_or_path)
    with _open(path) as f:
        header = next(csv.reader(f), [])
    if all(c in header for c in STEP_COLUMNS):
        return _step_rows(path)
    if all(c in header for c in CALIBRATION_COLUMNS):
        return _calibration_rows(name_or_path)
    raise ScenarioError(
        "worker.step_table", f"{path.name} has neither a step table's nor a calibration CSV's columns",
        f"give the columns {', '.join(STEP_COLUMNS)} (times in ms), or {', '.join(CALIBRATION_COLUMNS)}",
    )


def _step_rows(path: Path) -> list[StepRow]:
    out: list[StepRow] = []
    with _open(path) as f:
        for i, row in enumerate(csv.DictReader(f), start=2):
            if len(out) >= MAX_ROWS:
                raise ScenarioError("worker.step_table", f"{path.name} has more than {MAX_ROWS:,} steps",
                                    "give a table of fewer steps (a few hundred cover a fleet's sizes)")
            try:
                values = [float(row[c]) for c in STEP_COLUMNS]
            except (TypeError, ValueError):
                raise ScenarioError("worker.step_table", f"{path.name} line {i}: a size or time is not a number",
                                    f"every row gives {', '.join(STEP_COLUMNS)} as numbers") from None
            if not all(math.isfinite(v) and v >= 0 for v in values) or values[4] <= 0:
                raise ScenarioError("worker.step_table", f"{path.name} line {i}: negative, infinite or zero time",
                                    "sizes are 0 or more and t_ms is a positive time in milliseconds")
            out.append(StepRow(int(values[0]), values[1], int(values[2]), values[3], values[4] / 1000))
    return out


def _calibration_rows(name_or_path: str) -> list[StepRow]:
    name, _, pick = name_or_path.partition("#")
    groups = read_groups(name)
    if pick:
        hardware, _, tp = pick.partition("/")
        groups = [g for g in groups if g.hardware == hardware and (not tp or str(g.tp) == tp)]
    if len(groups) != 1:
        known = ", ".join(f"{name}#{g.hardware}/{g.tp}" for g in read_groups(name))
        raise ScenarioError(
            "worker.step_table",
            f'"{name_or_path}" ' + ("matches no configuration" if not groups else "holds several configurations"),
            f"pick one: {known}",
        )
    return group_rows(groups[0])


def group_rows(group: Group) -> list[StepRow]:
    """A calibration group's points as steps: a prompt point prefills batch x prompt
    tokens (each prompt reading its own), a token point decodes ``batch`` sequences at
    the mean context."""
    out = []
    for point in group.points:
        if point.kind == "prompt":
            tokens = point.batch_size * point.prompt_size
            out.append(StepRow(0, 0.0, tokens, float(point.batch_size * point.prompt_size**2), point.measured_s,
                               kv_read=float(tokens)))
        else:
            context = point.batch_size * (point.prompt_size + (point.token_size or 0) / 2)
            out.append(StepRow(point.batch_size, context, 0, 0.0, point.measured_s, kv_read=context))
    return out


@lru_cache(maxsize=16)
def load_step_table(name_or_path: str) -> StepTable:
    """The fitted table of ``name_or_path`` (fitted once per process)."""
    return fit_table(read_step_rows(name_or_path), name_or_path)
