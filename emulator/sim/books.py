"""One model's books: every request it was offered, and the outcome of each.

Outcomes are decided by what happens first. A request's client gives up at
``arrival + timeout_s``; ``sweep(t)`` marks every still-pending request whose deadline
has passed as ``timed_out``. Completions, losses and orphans only claim requests that
are still pending and within their deadline, so no request is counted twice. Counts
gather per frame (``frame``) and are added to the run's totals when the frame closes.

Under token-level serving a completion also carries the time of the request's first
token and its output length: the books keep time to first token (TTFT), time per
output token after the first (TPOT) and, with SLOs set, how many requests met them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from emulator.scenario import ClientSpec
from emulator.sim.arrivals import ArrivalSource
from emulator.sim.histogram import GapBook, LatencyHistogram
from emulator.sim.requests import LOST, OK, ORPHANED, PENDING, TIMED_OUT, RequestStore
from emulator.sim.results import OUTCOME_KEYS


@dataclass
class Counts:
    """Outcome counts of one model over some interval (the outcomes are
    ``emulator.sim.results.OUTCOME_KEYS``)."""

    offered: int = 0
    ok: int = 0
    shed: int = 0
    lost: int = 0
    timed_out: int = 0
    orphaned: int = 0
    retried: int = 0
    wasted_batches: int = 0
    batches: int = 0
    fill_sum: float = 0.0
    slo_met: int = 0  # delivered within every SLO set (token-level serving)
    # Of ``shed``, by reason (the rest were shed by the gateway's rate limit):
    shed_queue_full: int = 0  # refused at a waiting bound (``queue_limit``)
    shed_oversized: int = 0  # no worker's KV cache could hold them
    shed_slo_miss: int = 0  # their predicted TTFT missed the goal (``admission = "predicted_ttft"``)

    def add(self, other: Counts) -> None:
        """Add another interval's counts to these."""
        self.offered += other.offered
        self.ok += other.ok
        self.shed += other.shed
        self.lost += other.lost
        self.timed_out += other.timed_out
        self.orphaned += other.orphaned
        self.retried += other.retried
        self.wasted_batches += other.wasted_batches
        self.batches += other.batches
        self.fill_sum += other.fill_sum
        self.slo_met += other.slo_met
        self.shed_queue_full += other.shed_queue_full
        self.shed_oversized += other.shed_oversized
        self.shed_slo_miss += other.shed_slo_miss

    @property
    def shed_rate_limit(self) -> int:
        """Of ``shed``, those the gateway's rate limit refused."""
        return self.shed - self.shed_queue_full - self.shed_oversized - self.shed_slo_miss

    def finished(self) -> int:
        """Requests that got an outcome in the interval."""
        return sum(getattr(self, key) for key in OUTCOME_KEYS)


class ModelBooks:
    """The request store of one model and its outcome counts."""

    def __init__(self, index: int, name: str, client: ClientSpec, source: ArrivalSource) -> None:
        self.index = index
        self.name = name
        self.source = source  # where clients' re-sends go
        self.timeout = client.timeout_s
        self.retries = client.retries
        self.backoff = client.retry_backoff_s
        self.store = RequestStore()
        self.ingested = 0  # rows before this have reached the dispatcher (or were shed)
        self.swept = 0  # rows before this are past their client's deadline (if any)
        self.done: list[tuple[int, int, float, int]] = []  # completions not yet booked
        #: Record that a worker finished store rows ``[first, end)`` at ``t_s``: call it
        #: with ``(first, end, t_s, code)``, code OK or ORPHANED; the rows get it unless
        #: decided already, booked in bulk by ``book_done``. (The list's own append: this
        #: runs once per batch.)
        self.complete = self.done.append
        #: Record a request a continuous-batching worker finished: call it with
        #: ``(row, first_token_s, done_s, code, output_tokens, longest_gap_s)``; booked by
        #: ``book_done``.
        self.token_done: list[tuple[int, float, float, int, int, float]] = []
        self.complete_request = self.token_done.append
        self.frame = Counts()
        self.total = Counts()
        self.latencies: list[np.ndarray] = []
        self.hist = LatencyHistogram()
        self.ttfts: list[np.ndarray] = []
        self.tpots: list[np.ndarray] = []
        self.hist_ttft = LatencyHistogram()
        self.hist_tpot = LatencyHistogram()
        #: SLOs (set by the engine for token-level models; None: not set).
        self.slo_ttft_s: float | None = None
        self.slo_tpot_s: float | None = None
        self.slo_tbt_s: float | None = None
        #: Times between tokens (every gap between two output tokens of a request).
        self.tbt = GapBook()

    # -- outcomes ------------------------------------------------------------------
    def lose(self, start: int, end: int, now: float) -> None:
        """Rows ``[start, end)`` were dropped by a failure at ``now``."""
        b = self.store.base
        out = self.store.outcome[start - b : end - b]
        claim = out == PENDING
        if self.timeout is not None:
            claim &= self.store.arrival[start - b : end - b] + self.timeout >= now
        out[claim] = LOST
        self.frame.lost += int(np.count_nonzero(claim))

    def book_done(self) -> None:
        """Book the completions recorded since the last call, in bulk."""
        if self.token_done:
            self._book_tokens()
        if not self.done:
            return
        recs = np.array(self.done, dtype=np.float64)
        self.done.clear()
        st, b = self.store, self.store.base
        starts = recs[:, 0].astype(np.int64)
        lengths = recs[:, 1].astype(np.int64) - starts
        offs = np.cumsum(lengths) - lengths
        rows = np.arange(int(lengths.sum())) + np.repeat(starts - b - offs, lengths)
        t_done = np.repeat(recs[:, 2], lengths)
        code = np.repeat(recs[:, 3].astype(np.int8), lengths)
        arrival = st.arrival[rows]
        claim = st.outcome[rows] == PENDING
        if self.timeout is not None:
            claim &= arrival + self.timeout >= t_done
        st.outcome[rows[claim]] = code[claim]
        delivered = claim & (code == OK)
        n_ok = int(np.count_nonzero(delivered))
        self.frame.ok += n_ok
        self.frame.orphaned += int(np.count_nonzero(claim)) - n_ok
        if n_ok:
            self.latencies.append((t_done - arrival)[delivered])
        per_batch = np.add.reduceat(delivered.astype(np.int64), offs)
        self.frame.wasted_batches += int(np.count_nonzero(per_batch == 0))

    def _book_tokens(self) -> None:
        recs = np.array(self.token_done, dtype=np.float64)
        self.token_done.clear()
        st, b = self.store, self.store.base
        rows = recs[:, 0].astype(np.int64) - b
        first, t_done = recs[:, 1], recs[:, 2]
        code = recs[:, 3].astype(np.int8)
        output = recs[:, 4]
        arrival = st.arrival[rows]
        claim = st.outcome[rows] == PENDING
        if self.timeout is not None:
            claim &= arrival + self.timeout >= t_done
        st.outcome[rows[claim]] = code[claim]
        delivered = claim & (code == OK)
        n_ok = int(np.count_nonzero(delivered))
        frame = self.frame
        frame.ok += n_ok
        frame.orphaned += int(np.count_nonzero(claim)) - n_ok
        if not n_ok:
            return
        ttft = (first - arrival)[delivered]
        out = output[delivered]
        several = out > 1
        tpot = ((t_done[delivered] - first[delivered])[several]) / (out[several] - 1)
        self.latencies.append((t_done - arrival)[delivered])
        self.ttfts.append(ttft)
        self.tpots.append(tpot)
        if self.slo_ttft_s is not None or self.slo_tpot_s is not None or self.slo_tbt_s is not None:
            met = np.ones(n_ok, dtype=bool)
            if self.slo_ttft_s is not None:
                met &= ttft <= self.slo_ttft_s
            if self.slo_tpot_s is not None:
                per_token = np.zeros(n_ok)
                per_token[several] = tpot
                met &= per_token <= self.slo_tpot_s
            if self.slo_tbt_s is not None:
                met &= recs[:, 5][delivered] <= self.slo_tbt_s
            frame.slo_met += int(np.count_nonzero(met))

    def token_frame(self) -> tuple[np.ndarray, np.ndarray]:
        """This frame's TTFTs and TPOTs (added to the run's histograms)."""
        ttft = np.concatenate(self.ttfts) if self.ttfts else np.zeros(0)
        tpot = np.concatenate(self.tpots) if self.tpots else np.zeros(0)
        self.ttfts, self.tpots = [], []
        self.hist_ttft.add(ttft)
        self.hist_tpot.add(tpot)
        return ttft, tpot

    def sweep(self, t: float) -> None:
        """Requests whose client's deadline passed by ``t`` and still pending time out;
        clients whose request timed out, was lost or orphaned may re-send it."""
        if self.timeout is None:
            return
        st, b = self.store, self.store.base
        lo = self.swept - b
        hi = (
            int(np.searchsorted(st.arrival[lo : self.ingested - b], t - self.timeout, side="right"))
            + lo
        )
        if hi <= lo:
            return
        out = st.outcome[lo:hi]
        late = out == PENDING
        out[late] = TIMED_OUT
        self.frame.timed_out += int(np.count_nonzero(late))
        if self.retries:
            att = st.attempt[lo:hi]
            again = (late | (out == LOST) | (out == ORPHANED)) & (att < self.retries)
            if again.any():
                self.source.add_retries(
                    st.arrival[lo:hi][again] + self.timeout + self.backoff,
                    self.index,
                    st.tokens[lo:hi][again],
                    st.key[lo:hi][again],
                    att[again] + 1,
                    st.output[lo:hi][again],
                    st.group[lo:hi][again],
                    st.prefix[lo:hi][again],
                )
        self.swept = hi + b

    def first_needed_row(self) -> int:
        """First row the timeout sweep still has to visit: pending, or (with retries)
        lost or orphaned, whose client re-sends at its deadline."""
        st, b = self.store, self.store.base
        if self.timeout is None:
            return self.ingested
        out = st.outcome[self.swept - b : self.ingested - b]
        waiting = out == PENDING
        if self.retries:
            waiting |= (out == LOST) | (out == ORPHANED)
        hits = np.flatnonzero(waiting[: 1 << 20])
        return (
            self.swept + int(hits[0]) if hits.size else min(self.ingested, self.swept + (1 << 20))
        )

    def in_system(self) -> int:
        """Offered requests without an outcome yet."""
        st = self.store
        return int(np.count_nonzero(st.outcome[: self.ingested - st.base] == PENDING))

    def next_frame(self) -> tuple[Counts, np.ndarray]:
        """Close the frame's books: its counts and latencies, added to the totals."""
        counts = self.frame
        lat = np.concatenate(self.latencies) if self.latencies else np.zeros(0)
        self.total.add(counts)
        self.hist.add(lat)
        self.frame = Counts()
        self.latencies = []
        return counts, lat
