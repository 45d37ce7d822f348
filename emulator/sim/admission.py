"""SLO-aware admission (``admission = "predicted_ttft"``): an arrival is refused at once,
before it joins any queue, when its predicted time to first token exceeds
``admission_slack`` x ``slo.ttft_s``, as Mooncake's conductor rejects requests it
expects to miss their TTFT goal instead of letting them wait. A refused request is
shed with the reason "predicted SLO miss" (``shed_slo_miss``); its client may re-send
it after ``client.retry_backoff_s``, up to ``client.retries`` times.

The prediction, for the worker the request would go to (the pool's policy tells it
without choosing it, ``peek``):

1. the rest of the step that worker is running (a decode stretch is cut at the end of
   the step in progress, as a new request cuts it);
2. the prefill left of the requests ahead of it there: the prefills in progress (less
   the chunks of the step running), then the waiting queue, each less the prefix its
   cache holds now;
3. its own prompt less the prefix cached there, the first token coming at the end of
   the step that completes it. That step is costed full, the rest of its budget
   taken by a prompt that arrives later (chunked prefill packs steps, so on a busy
   worker a later arrival shares it), which makes a lone prompt's prediction the
   cost of whole steps.
4. with lower KV tiers (``worker.kv_tiers``), the prefix 2 and 3 find in a tier past
   the GPU cache is not prefilled, and its copy's seconds are added.

The work of 2 and 3 is cut into steps as the scheduler would, first come first served,
each step's budget ``max_batched_tokens`` less the worker's decoders (none under
``prefill_first``), and every step costed by the worker's step model
(``step_cost.step_time``), with the decoders held at their present count and contexts.
Under ``pull`` the request waits for whichever worker frees first: the requests the
router holds are shared out evenly over the pool's serving workers, and the prediction
is the least over those workers. For a split model the pool is the one the decider
picks; a request prefilled in the prefill pool adds its KV transfer (the prompt's KV
over the link) and one step of the decode worker the decode pool's policy would pick,
with its one prompt position left to run.

It leaves out what a router does not know at the arrival: later arrivals that
``max_num_seqs`` or a full KV cache hold back, preemptions, requests ahead that finish
decoding, and the wait for a decode worker's room or link.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, cast

import numpy as np

from emulator.scenario.pools import kv_bytes_per_token
from emulator.sim.histogram import LatencyHistogram
from emulator.sim.policies.base import PushPolicy
from emulator.sim.workers import kv_manager as kv
from emulator.sim.workers.entities import STEP, STRETCH, Seq
from emulator.sim.workers.step_cost import step_time
from emulator.sim.workers.stretch import first_step_ending_at_or_after

if TYPE_CHECKING:
    from emulator.sim.engine import Engine
    from emulator.sim.policies.base import DispatchPolicy
    from emulator.sim.router import Router
    from emulator.sim.workers.continuous import ContinuousWorkers
    from emulator.sim.workers.entities import Worker

#: Per-model frame figures of SLO-aware admission: requests refused a second, and the
#: mean predicted TTFT of the arrivals refused and of those admitted in the frame.
FRAME_KEYS = ("rejected_per_s", "rejected_predicted_ttft_s", "admitted_predicted_ttft_s")

RULE = "predicted_ttft"


class _Chunk:
    """A chunk's request as the step model reads it: where its chunk starts."""

    __slots__ = ("progress",)

    def __init__(self, progress: int) -> None:
        self.progress = progress


class _StepView:
    """A worker as the step model reads it, with the decoders a predicted prefill step
    carries (none under ``prefill_first``)."""

    __slots__ = ("spec", "roofline", "table", "n_dec", "ahead", "dec_base", "clock",
                 "r_weights", "r_kv", "r_token", "r_fixed", "r_comm", "r_wtab")

    def __init__(self, wk: Worker, n_dec: int) -> None:
        self.spec, self.roofline, self.table = wk.spec, wk.roofline, wk.table
        self.n_dec, self.ahead = n_dec, 1 if n_dec else 0
        self.dec_base, self.clock = wk.dec_base, wk.clock
        self.r_weights, self.r_kv, self.r_token = wk.r_weights, wk.r_kv, wk.r_token
        self.r_fixed, self.r_comm, self.r_wtab = wk.r_fixed, wk.r_comm, wk.r_wtab


def step_left(wk: Worker, now: float) -> float:
    """Seconds until ``wk``'s next step start: the rest of the step it runs (a stretch
    cut at the end of the step in progress); 0 when asleep or waking."""
    if wk.phase == STEP:
        return max(0.0, wk.t_end - now)
    if wk.phase == STRETCH:
        k = min(first_step_ending_at_or_after(wk, now), wk.steps)
        return max(0.0, wk.stretch_end(k) - now)
    return 0.0


def prefill_s(wk: Worker, work: list[tuple[int, int]]) -> float:
    """Seconds of the steps that prefill ``work`` on ``wk``, first come first served:
    (tokens left, tokens done) of each request in order, the last one's first token at
    the end of the step that completes it."""
    n_dec = 0 if wk.prefill_first else wk.n_dec
    budget = wk.spec.max_batched_tokens - n_dec
    if budget <= 0:
        return math.inf  # (decoders fill the budget: nothing is prefilled)
    view = cast("Worker", _StepView(wk, n_dec))
    total = 0.0
    i, (left, done) = 0, work[0]
    last = len(work) - 1
    while True:
        room = budget
        chunks: list[tuple[Seq, int]] = []
        while room > 0:
            c = left if left < room else room
            if c:
                chunks.append((cast(Seq, _Chunk(done)), c))
            room -= c
            left -= c
            done += c
            if left:
                break
            if i == last:
                if room:  # later arrivals may fill the rest of the budget
                    chunks.append((cast(Seq, _Chunk(0)), room))
                return total + step_time(view, chunks)
            i += 1
            left, done = work[i]
        total += step_time(view, chunks)


def worker_ttft(wk: Worker, now: float, prompt: int, group: int, prefix: int, shared: int = 0) -> float:
    """The predicted TTFT of a prompt sent to ``wk`` now (``shared``: tokens of the
    router's held queue this worker is expected to take first)."""
    work: list[tuple[int, int]] = []
    running = {s: c for s, c in wk.chunks} if wk.phase == STEP else {}
    for s in wk.prefilling:
        done = s.progress + running.get(s, 0)
        if s.target > done:
            work.append((s.target - done, done))
    cached = wk.cache is not None
    if wk.tier is not None:  # lower KV tiers: loads skip prefill but take their copy time
        return _ttft_with_tiers(wk, now, work, prompt, group, prefix, shared)
    for s in wk.waiting:
        hit = kv.cached_prefix(wk, s.group, s.prefix, s.target) if cached else 0
        work.append((s.target - hit, hit))
    if shared:
        work.append((shared, 0))
    hit = kv.cached_prefix(wk, group, prefix, prompt) if cached else 0
    work.append((max(1, prompt - hit), hit))
    return step_left(wk, now) + prefill_s(wk, work)


def _ttft_with_tiers(
    wk: Worker, now: float, work: list[tuple[int, int]], prompt: int, group: int, prefix: int,
    shared: int,
) -> float:
    """``worker_ttft`` at a worker with lower KV tiers: each waiting request's and the
    new one's prefix found in a tier is not prefilled, and its copy's seconds are
    added (they delay every step that admits one)."""
    load_s = 0.0
    for s in wk.waiting:
        hit = kv.cached_prefix(wk, s.group, s.prefix, s.target)
        tokens, seconds = kv.tier_hit(wk, s.group, s.prefix, s.target, hit)
        work.append((s.target - hit - tokens, hit + tokens))
        load_s += seconds
    if shared:
        work.append((shared, 0))
    hit = kv.cached_prefix(wk, group, prefix, prompt)
    tokens, seconds = kv.tier_hit(wk, group, prefix, prompt, hit)
    work.append((max(1, prompt - hit - tokens), hit + tokens))
    return step_left(wk, now) + prefill_s(wk, work) + load_s + seconds


class Admission:
    """One model's SLO-aware admission (see the module docstring): ``admits(row)``
    predicts the arrival's TTFT and says whether it is admitted, and keeps the figures
    of those refused and admitted."""

    def __init__(self, sim: Engine, router: Router, limits: dict[int, float], transfer_s: float = 0.0) -> None:
        self.router = router
        self.queue = sim.queue
        self.model = cast("ContinuousWorkers", router.worker_model)
        #: The TTFT an arrival may be predicted, by the id of the pool policy that
        #: routes it (a pool without the rule is absent).
        self.limits = limits
        #: A prefilled prompt's KV transfer, per token (a split model; else 0).
        self.transfer_s = transfer_s
        self.rejected = 0
        self.admitted = 0
        self.hist_rejected = LatencyHistogram()
        self.hist_admitted = LatencyHistogram()
        self._frame_rejected: list[float] = []
        self._frame_admitted: list[float] = []
        self._last_frame_s = 0.0

    def _pool(self, row: int) -> tuple[DispatchPolicy, bool]:
        """The pool policy ``row`` goes to, and whether it is a split model's prefill pool."""
        routing = self.router.policy
        pool_of = getattr(routing, "pool_of", None)
        if pool_of is None:
            return routing, False
        return pool_of(row)  # type: ignore[no-any-return]

    def predict(self, row: int, policy: DispatchPolicy, prefill: bool) -> float | None:
        """The predicted TTFT of arrival ``row`` routed by ``policy`` (None: no worker
        to predict at, so the rule does not judge it)."""
        st, now = self.router.store, self.queue.now_s
        i = row - st.base
        prompt, group, prefix = st.tokens.item(i), st.group.item(i), st.prefix.item(i)
        table = self.model.workers
        if isinstance(policy, PushPolicy):
            if not policy.rotation:
                return None
            best = worker_ttft(table[policy.peek(row)], now, prompt, group, prefix)
        else:
            serving = [table[w] for w in policy.dispatcher.workers
                       if self.model.is_alive(w) and table[w].takes_held]
            if not serving:
                return None
            closed = self.router.closed
            held = 0
            if closed:
                rows = np.fromiter(closed, dtype=np.int64, count=len(closed)) - st.base
                held = int(st.tokens[rows].sum())
            shared = -(-held // len(serving))
            best = min(worker_ttft(wk, now, prompt, group, prefix, shared) for wk in serving)
        if prefill:
            best += prompt * self.transfer_s + self._decode_step(row, prompt)
        return best

    def _decode_step(self, row: int, prompt: int) -> float:
        """One step of the decode worker the decode pool would pick, with the prompt's
        last position to run."""
        decode = self.router.policy.decode  # type: ignore[attr-defined]
        if not decode.rotation:
            return 0.0
        wk = self.model.workers[decode.peek(row)]
        view = cast("Worker", _StepView(wk, 0 if wk.prefill_first else wk.n_dec))
        return step_time(view, [(cast(Seq, _Chunk(prompt - 1)), 1)])

    def admits(self, row: int) -> bool:
        """Whether arrival ``row`` is admitted; a refused one's prediction is kept."""
        policy, prefill = self._pool(row)
        limit = self.limits.get(id(policy))
        if limit is None:
            return True
        predicted = self.predict(row, policy, prefill)
        if predicted is None:
            return True
        if predicted > limit:
            self.rejected += 1
            self._frame_rejected.append(predicted)
            return False
        self.admitted += 1
        self._frame_admitted.append(predicted)
        return True

    # -- figures -------------------------------------------------------------------
    def frame_figures(self) -> dict[str, float | None]:
        """This frame's ``FRAME_KEYS`` (their predictions added to the run's)."""
        now = self.queue.now_s
        span = now - self._last_frame_s
        self._last_frame_s = now
        rej, adm = np.array(self._frame_rejected), np.array(self._frame_admitted)
        self._frame_rejected, self._frame_admitted = [], []
        self.hist_rejected.add(rej)
        self.hist_admitted.add(adm)
        return {
            "rejected_per_s": rej.size / span if span > 0 else 0.0,
            "rejected_predicted_ttft_s": float(rej.mean()) if rej.size else None,
            "admitted_predicted_ttft_s": float(adm.mean()) if adm.size else None,
        }

    def summary(self, now: float, finished: int, shed: int, slo_met: int) -> dict[str, object]:
        """The run's figures: the limits, the refused and admitted with their predicted
        TTFTs, and the goodput of the admitted (``finished`` less ``shed``)."""
        rej, adm = LatencyHistogram(), LatencyHistogram()
        rej.merge(self.hist_rejected)
        adm.merge(self.hist_admitted)
        rej.add(np.array(self._frame_rejected))
        adm.add(np.array(self._frame_admitted))
        admitted = finished - shed
        return {
            "rule": RULE,
            "limit_s": max(self.limits.values()),
            "rejected": self.rejected,
            "rejected_per_s": self.rejected / now if now > 0 else 0.0,
            "rejected_predicted_ttft_s": rej.stats(),
            "admitted_predicted_ttft_s": adm.stats(),
            "admitted_goodput": slo_met / admitted if admitted > 0 else None,
        }


def admission_for(sim: Engine, router: Router) -> Admission | None:
    """Model ``router``'s admission under the predicted-TTFT rule (None: none of its
    pools admits by it)."""
    sc = sim.scenario
    goal = sc.slo.ttft_s
    if goal is None:
        return None
    routing = router.policy
    split = sc.models[router.name].disaggregated
    limits: dict[int, float] = {}
    transfer_s = 0.0
    if split is None:
        rule, slack = sc.dispatcher.admission, sc.dispatcher.admission_slack
        if rule == RULE:
            limits[id(routing)] = slack * goal
    else:
        for name, policy in ((split.prefill_workers, routing.prefill),  # type: ignore[attr-defined]
                             (split.decode_workers, routing.decode)):  # type: ignore[attr-defined]
            rule, slack = sc.pool_admission(name)
            if rule == RULE:
                limits[id(policy)] = slack * goal
        per_token = kv_bytes_per_token(sc.models[router.name])
        assert per_token is not None, "validation requires the KV's size"
        transfer_s = per_token / (split.kv_transfer_gb_s * 1e9)
    if not limits:
        return None
    return Admission(sim, router, limits, transfer_s)
