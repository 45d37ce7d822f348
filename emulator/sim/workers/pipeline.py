"""Pipelined prefill of long prompts (``pipeline_*`` of ``[models.NAME.disaggregated]``),
as Mooncake's chunked pipeline parallelism runs a long context over several prefill
nodes.

The last ``pipeline_workers`` = N workers of the model's prefill pool (layout order) are
one *pipeline group*, its stages 1..N in that order, each holding 1/N of the layers.
The group is reserved: the router sends it every prompt of more than
``pipeline_threshold_tokens`` tokens that the prefill pool would prefill, and the
pool's policy routes the other prompts among the pool's other workers only.

A prompt of P tokens runs in C = ceil(P / K) chunks of K = ``pipeline_chunk_tokens``
tokens (the last one shorter). Chunk i (0-based, starting at token i K) costs each stage

    f + (step(chunk i alone) - f) / N

where step is the worker's step model for a step holding that chunk only and f is the
step's fixed cost (``step_base_s`` under the linear model, the fixed cost a step under
the roofline, a(0) under a table): every stage launches its own step, while the
per-token, attention, weights and communication terms are per layer and split evenly.
Chunk i starts on stage s once stage s - 1 has finished it and its hop has passed:
``pipeline_hop_s``, plus with ``pipeline_link_gb_s`` its c tokens' activations (c x
hidden size x dtype bytes) over that link. And once stage s has finished
what it ran before (chunk i - 1, or the previous prompt's last chunk): each stage runs
one chunk at a time, prompts in the order the group admitted them. With equal chunk
costs c, no hop and an idle group the prompt's prefill ends (C + N - 1) c after its
admission; in general the recurrence above gives it exactly (``pipeline_schedule``).

KV: each stage keeps its layers' KV, ceil(P / N) tokens' worth of the model's KV per
stage, in its own KV budget. The group admits the prompts waiting for it in arrival
order when every stage's free KV (above its watermark) holds that share; a head that
does not fit blocks those behind it until a transfer frees KV. At the end of the last
chunk on stage N the prompt has its first token (its prefill TTFT) and is handed to a
decode worker as any prefilled request; the decode worker's link carries the whole
prompt's KV (the N stages send their layers' parts over it), and when it ends every
stage frees its share.

A client that gave up before its prompt was admitted leaves the group's queue; one that
gives up while its chunks run does not stop them (the stages' time is spent), and its
KV is freed when the prefill ends. A stage's death loses the group's waiting and
running prompts and strands the prefilled ones whose KV it holds; until every stage is
alive again the long prompts go to the pool's other workers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from emulator.scenario.pipeline_checks import activation_bytes
from emulator.sim.events import PIPELINE_DONE
from emulator.sim.histogram import LatencyHistogram
from emulator.sim.results import BUSY
from emulator.sim.workers import kv_manager as kv
from emulator.sim.workers.entities import GONE, INF, RUNNING, WAITING, Seq, Worker
from emulator.sim.workers.step_cost import step_time

if TYPE_CHECKING:
    from emulator.scenario.specs import DisaggSpec
    from emulator.sim.workers.disaggregated import DisaggregatedWorkers


def chunks_of(prompt: int, size: int) -> list[tuple[int, int]]:
    """A prompt's chunks: (start, tokens) pairs of at most ``size`` tokens."""
    return [(start, min(size, prompt - start)) for start in range(0, prompt, size)]


def pipeline_schedule(
    free_at: list[float], t: float, costs: list[float], hops: list[float],
    trace: list[tuple[int, float, float]] | None = None,
) -> float:
    """Schedule chunks of ``costs`` (each stage's time for each chunk; ``hops``: each
    chunk's time from one stage to the next) admitted at ``t`` on stages free at
    ``free_at`` (updated in place); returns when the last chunk ends on the last
    stage. ``trace`` collects (stage, start, end) of every chunk."""
    ready = [t] * len(costs)
    last = len(free_at) - 1
    for s in range(len(free_at)):
        end = free_at[s]
        for i, c in enumerate(costs):
            start = max(end, ready[i])
            end = start + c
            ready[i] = end + (hops[i] if s < last else 0.0)
            if trace is not None:
                trace.append((s, start, end))
        free_at[s] = end
    return ready[-1]


class PipelineGroup:
    """One model's pipeline group; see the module docstring."""

    def __init__(self, model: DisaggregatedWorkers, stages: list[Worker], split: DisaggSpec) -> None:
        self.model = model
        self.stages = stages
        self.n = len(stages)
        self.head, self.tail = stages[0], stages[-1]
        spec = self.head.spec
        self.chunk = split.pipeline_chunk_tokens or spec.max_batched_tokens
        self.hop = split.pipeline_hop_s
        #: Seconds a token's activations take over the stage link (0: no link given).
        self.act_s = 0.0
        if split.pipeline_link_gb_s:
            per_token = activation_bytes(model.sim.scenario.models[model.sim.names[self.head.model]])
            assert per_token is not None, "validation requires the model's hidden size"
            self.act_s = per_token / (split.pipeline_link_gb_s * 1e9)
        self.threshold = split.pipeline_threshold_tokens
        if self.tail.roofline:
            self.fixed = self.tail.r_fixed
        elif self.tail.table is not None:
            self.fixed = self.tail.table[0][0]
        else:
            self.fixed = spec.step_base_s
        self.free_at = [0.0] * self.n
        self.busy_s = [0.0] * self.n  # each stage's chunk seconds scheduled
        self.trace: list[tuple[int, float, float]] | None = None  # (tests) every chunk's run
        self.pipelined = 0  # prompts the group prefilled
        self.frame_done = 0
        self.frame_ttft: list[float] = []  # this frame's prefill TTFTs of pipelined prompts
        self.hist_prefill = LatencyHistogram()
        self.client_ttft: list[float] = []  # client TTFTs of pipelined prompts completed
        self.slo_ttft_s: float | None = model.sim.scenario.slo.ttft_s
        self.within_slo = 0
        self.delivered = 0
        self.halted = False  # a stage is dying: nothing is admitted
        self.schedule: Callable[..., None] = model.queue.scheduler(PIPELINE_DONE)
        for wk in stages:
            wk.takes_held = False  # never admits the router's held requests

    # -- routing ---------------------------------------------------------------------
    def takes(self, prompt: int) -> bool:
        """The group prefills a prompt of ``prompt`` tokens now: above the threshold,
        every stage alive, and its share fits a stage's KV at all."""
        if prompt <= self.threshold:
            return False
        state = self.model.fleet.state
        if any(state[wk.index] > BUSY for wk in self.stages):
            return False
        return all(kv.blocks(wk, -(-prompt // self.n)) + wk.wm <= wk.kv_total for wk in self.stages)

    def stage_cost(self, start: int, tokens: int) -> float:
        """One stage's time for a chunk of ``tokens`` starting at prompt token ``start``."""
        probe = Seq(-1, start + tokens, 0, INF, 0, start + tokens, progress=start)
        return self.fixed + (step_time(self.tail, [(probe, tokens)]) - self.fixed) / self.n

    def assign(self, work: int) -> None:
        """Request row ``work`` reaches the group (``ContinuousWorkers.assign``)."""
        d = self.head.router
        now = self.model.queue.now_s
        if not self.takes(int(d.store.tokens.item(work - d.store.base))):
            # A stage died while it was on its way (a proxy hop): it is lost there.
            d.lose(work, work + 1, now)
            return
        st, i = d.store, work - d.store.base
        prompt = st.tokens.item(i)
        self.head.serial += 1
        seq = Seq(work, prompt, st.output.item(i), INF, d.epoch, prompt, order=self.head.serial,
                  group=st.group.item(i), prefix=st.prefix.item(i), at=WAITING)
        if self.model.timeout is not None:
            seq.deadline = st.arrival.item(i) + self.model.timeout
        self.head.waiting.append(seq)
        self.model.fleet.backlog[self.head.index] = len(self.head.waiting)
        self.admit(now)

    def admit(self, t: float) -> None:
        """Admit the waiting prompts, in order, while every stage's KV holds their share."""
        waiting = self.head.waiting
        if not waiting or self.halted or any(self.model.fleet.state[wk.index] > BUSY for wk in self.stages):
            return
        while waiting:
            s = waiting[0]
            if s.deadline <= t:  # its client gave up (the books count it)
                waiting.popleft()
                s.at = GONE
                continue
            share = -(-s.prompt // self.n)
            if any(kv.free_blocks(wk) - kv.blocks(wk, share) < wk.wm for wk in self.stages):
                break
            waiting.popleft()
            s.at = RUNNING
            s.kv = share
            for wk in self.stages:
                wk.kv_prefill += kv.blocks(wk, share)
            self.head.running.append(s)
            chunks = chunks_of(s.prompt, self.chunk)
            costs = [self.stage_cost(start, c) for start, c in chunks]
            hops = [self.hop + self.act_s * c for _, c in chunks]
            for k in range(self.n):
                self.busy_s[k] += sum(costs)
            self.schedule(pipeline_schedule(self.free_at, t, costs, hops, self.trace), self, s)
        self.model.fleet.backlog[self.head.index] = len(waiting)

    # -- the prefill's end and the KV's release ------------------------------------------
    def done(self, s: Seq) -> None:
        """``s``'s last chunk ended on the last stage (``PIPELINE_DONE``)."""
        if s.at != RUNNING:
            return  # lost to a stage's death
        t = self.model.queue.now_s
        self.head.running.remove(s)
        if s.deadline <= t:  # its client gave up while the chunks ran
            self.release(s, t)
            s.at = GONE
            return
        self.pipelined += 1
        self.frame_done += 1
        arrival = self.head.router.store.arrival.item(s.row - self.head.router.store.base)
        self.frame_ttft.append(t - arrival)
        handoffs = self.model.handoffs
        assert handoffs is not None, "a pipeline group is a split model's"
        handoffs.hand_off(self.tail, s, t, owned=False)

    def release(self, s: Seq, t: float) -> None:
        """Every stage frees its share of ``s``'s KV; waiting prompts may then fit."""
        for wk in self.stages:
            wk.kv_prefill -= kv.blocks(wk, s.kv)
        s.kv = 0
        self.admit(t)

    def completed(self, s: Seq, arrival: float, d: Any) -> None:
        """A pipelined prompt completed at its decode worker: its client TTFT."""
        if s.epoch != d.epoch or (self.model.timeout is not None and s.first_token_s > arrival + self.model.timeout):
            return
        ttft = s.first_token_s - arrival
        self.delivered += 1
        self.client_ttft.append(ttft)
        if self.slo_ttft_s is None or ttft <= self.slo_ttft_s:
            self.within_slo += 1

    def kill(self, t: float) -> None:
        """A stage died (its handoffs were stranded already): the group's waiting and
        running prompts are lost, the other stages free their KV, and the stages are
        free from now."""
        d = self.head.router
        for s in (*self.head.running, *self.head.waiting):
            d.lose(s.row, s.row + 1, t)
            if s.at == RUNNING:
                for wk in self.stages:
                    wk.kv_prefill -= kv.blocks(wk, s.kv)
            s.kv = 0
            s.at = GONE
        self.head.running.clear()
        self.head.waiting.clear()
        self.model.fleet.backlog[self.head.index] = 0
        self.free_at = [t] * self.n
        self.halted = False

    # -- figures ---------------------------------------------------------------------
    def frame_figures(self) -> dict[str, Any]:
        values = np.array(self.frame_ttft)
        self.hist_prefill.add(values)
        out = {
            "pipelined": self.frame_done,
            "pipelined_prefill_max_s": float(values.max()) if len(values) else None,
        }
        self.frame_done = 0
        self.frame_ttft = []
        return out

    def summary(self, duration_s: float) -> dict[str, Any]:
        hist = LatencyHistogram()
        hist.merge(self.hist_prefill)
        hist.add(np.array(self.frame_ttft, dtype=np.float64))
        client = LatencyHistogram()
        client.add(np.array(self.client_ttft, dtype=np.float64))
        return {
            "stages": [wk.index for wk in self.stages],
            "threshold_tokens": self.threshold,
            "chunk_tokens": self.chunk,
            "pipelined": self.pipelined,
            "prefill_ttft_s": hist.stats(),
            "client_ttft_s": client.stats(),
            "delivered": self.delivered,
            "within_ttft_slo": self.within_slo,
            "stage_busy": [min(1.0, b / duration_s) if duration_s > 0 else 0.0 for b in self.busy_s],
            "waiting_end": len(self.head.waiting),
        }

