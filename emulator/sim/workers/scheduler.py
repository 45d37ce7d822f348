"""The continuous worker model's scheduler: it plans one step of a worker and returns
the plan (the prefill chunks; the decoders run too), as a vLLM scheduler's step does.

At a step start at time t (after the expired requests left and landed handoffs
joined the running set):

1. Preempt while the decoders' next tokens do not fit (the KV manager chooses and
   frees): a preempted request's prefill target becomes prompt + tokens generated so
   far, and it goes to the front of the waiting queue (recompute). Then the decoders'
   next tokens are reserved.
2. The step's token budget is ``max_batched_tokens`` - |D|.

3. Running requests with prefill left take chunks of it, in admission order.
4. Handoffs to a decode worker reserve their KV (disaggregated serving).
5. Waiting requests are admitted in FIFO order (then, under ``pull``, the router's
   held ones) while budget, ``max_num_seqs`` and free KV allow; admission reserves
   the whole blocks of the prefill target and must leave the watermark's blocks
   free, and each admitted request takes a chunk. A head that
   does not fit blocks those behind it; when the worker's own head blocks, the held
   queue is not looked at either, and another worker is told of it.

That is ``scheduler = "mixed"``. Under ``"prefill_first"`` steps 2-5 come first with
the whole ``max_batched_tokens`` as the budget; if they give any chunk the step runs
only those (the decoders neither grow nor generate, and nothing is preempted), and if
not it is a decode step: 1, with nothing to admit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emulator.sim.workers import kv_manager as kv
from emulator.sim.workers.entities import WAITING

if TYPE_CHECKING:
    from emulator.sim.workers.continuous import ContinuousWorkers
    from emulator.sim.workers.entities import Seq, Worker

Plan = list[tuple["Seq", int]]  # the step's prefill chunks: (request, tokens)


class Scheduler:
    """Plans the steps of a continuous worker model's workers."""

    def __init__(self, model: ContinuousWorkers) -> None:
        self.model = model

    def plan(self, wk: Worker, t: float) -> Plan:
        """Worker ``wk``'s step starting at ``t``: preempt, chunk, admit (see the module
        docstring); returns the chunks. Nothing running afterwards: nothing to do.
        Under ``prefill_first`` a step with chunks runs no decoders (``wk.ahead`` stays
        0); one without is a decode step as under ``mixed``."""
        if wk.prefill_first and wk.n_dec:
            chunks = self.fill(wk, t, wk.spec.max_batched_tokens)
            if chunks:
                return chunks  # the decoders wait: no growth, no preemption
            self.make_room(wk)
            kv.grow(wk)
            return chunks
        n = wk.n_dec
        if n:
            # (Worker.kv_at(clock + 1), inlined for KV counted by the token: every step.)
            if wk.blk == 1:
                if wk.kv_prefill + wk.dec_base + n * (wk.clock + 1) + wk.cached > wk.kv_total:
                    self.make_room(wk)
            else:
                self.make_room(wk)
            # (Preemption may have taken decoders: the budget and the reserved next
            # tokens are those of the ones left.)
            n = wk.n_dec
        wk.ahead = 1 if n else 0
        return self.fill(wk, t, wk.spec.max_batched_tokens - n)

    def make_room(self, wk: Worker) -> None:
        """1. Preempt while the decoders' next tokens do not fit (recompute)."""
        if wk.kv_at(wk.clock + 1) > wk.kv_total:
            model = self.model
            for victim in kv.preempt_for_decoders(wk):
                victim.target = victim.prompt + victim.generated
                victim.progress = 0
                victim.at = WAITING
                wk.waiting.appendleft(victim)
                model.preemptions[wk.model] += 1

    def fill(self, wk: Worker, t: float, budget: int) -> Plan:
        """2-5. The step's prefill chunks from ``budget`` tokens: prefills in progress,
        handoffs, then admissions."""
        model = self.model
        spec, running, waiting = wk.spec, wk.running, wk.waiting
        d = wk.router
        chunks: Plan = []
        for s in wk.prefilling:
            if budget <= 0:
                break
            c = min(s.target - s.progress, budget)
            chunks.append((s, c))
            budget -= c
        if wk.incoming:
            model.handoffs.take(wk, t)  # type: ignore[union-attr]
        # 5. Admission: own queue first, then (pull) the router's held queue. An
        # admission leaves the watermark's blocks free.
        blocked = False
        total, wm = wk.kv_total, wk.wm
        if waiting:
            free = total - wk.kv_used()
            while waiting and budget > 0 and len(running) < spec.max_num_seqs:
                head = waiting[0]
                hit = kv.cached_prefix(wk, head.group, head.prefix, head.target) if wk.cache else 0
                need = kv.blocks(wk, head.target - hit)
                short = need + wm - free
                if short > 0:
                    freed = kv.evict_cached(wk, short, head.group, hit=hit) if wk.cached else 0
                    if not freed:
                        blocked = True
                        break
                    free += freed
                waiting.popleft()
                free -= need
                budget = self.admit(wk, head, chunks, budget, hit)
        if (
            not blocked
            and d.closed
            and not d.paused
            and d.policy.workers_take_held
            and wk.takes_held
            and not wk.draining
        ):
            d.drop_expired(t)
            while d.closed and budget > 0 and len(running) < spec.max_num_seqs:
                i = d.closed[0] - d.store.base
                target = int(d.store.tokens[i])
                group = int(d.store.group[i])
                hit = kv.cached_prefix(wk, group, int(d.store.prefix[i]), target) if wk.cache else 0
                short = kv.blocks(wk, target - hit) + wm - (total - wk.kv_used())
                if short > 0 and not (wk.cached and kv.evict_cached(wk, short, group, hit=hit)):
                    break
                budget = self.admit(wk, model.new_seq(wk, d, d.take_held()), chunks, budget, hit)
        if d.closed and not d.paused and d.policy.workers_take_held and wk.takes_held:
            # Its own head blocked, or the held head does not fit here: another
            # worker may take it at its next step start.
            model.work_held(wk.model, wk)
        return chunks

    @staticmethod
    def admit(wk: Worker, seq: Seq, chunks: Plan, budget: int, hit: int = 0) -> int:
        """``seq`` starts running with a chunk of the budget; ``hit`` of its prefill
        target is cached prefix, read in place and not computed. Returns the budget
        left."""
        kv.reserve(wk, seq, hit)
        wk.running.append(seq)
        wk.prefilling.append(seq)
        c = min(seq.target - seq.progress, budget)  # (less any prefix loaded from a tier)
        chunks.append((seq, c))
        if seq.group >= 0:
            wk.prefix_seen += seq.prefix
            wk.prefix_hit += seq.progress  # the GPU hit and any tier loads
        return budget - c
