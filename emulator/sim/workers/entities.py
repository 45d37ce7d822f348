"""The continuous worker model's entities: a request at a worker (``Seq``) and a
worker's state (``Worker``), with the states each can be in.

Only state and the arithmetic of reading it live here; what changes it is the KV
manager (``kv_manager.py``), the scheduler (``scheduler.py``), the decode stretch
(``stretch.py``) and the worker model that ties them (``continuous.py``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

# Imported at run time (not only for type checking): a compiled build's dataclasses
# resolve their field types when the module loads.
from emulator.scenario import WorkerSpec
from emulator.sim.router import Router
from emulator.sim.workers.kv_tiers import Tier
from emulator.sim.workers.prefix_cache import PrefixCache
from emulator.sim.workers.stretch import first_step_ending_at_or_after

INF = float("inf")

# Where a request is (``Seq.at``).
GONE = 0  # left the worker (completed, expired, lost, handed off and released)
WAITING = 1  # in the worker's waiting queue
RUNNING = 2  # in its running set
# ... and, in disaggregated serving (``disaggregated.py``):
HELD = 3  # prefill side: prefilled, its KV held for the transfer
QUEUED = 4  # decode side: routed to a decode worker, no KV reserved yet
MOVING = 5  # decode side: KV reserved, the transfer under way
LANDED = 6  # decode side: KV arrived, joining at the worker's next step start

# What a worker is doing (``Worker.phase``): what its pending STEP_END ends.
ASLEEP = 0  # nothing pending (or dead)
STEP = 1  # one step
STRETCH = 2  # a stretch of decode-only steps
WAKING = 3  # was asleep and was handed a request: its step starts at this instant


@dataclass(slots=True, eq=False)
class Seq:
    """One request at a worker: its sizes and how far it got.

    While it decodes (``join >= 0``) its ``generated`` and ``kv`` are as of the worker's
    decode clock reaching ``join``; the worker's ``tokens_of`` and ``kv_of`` give them
    now.
    """

    row: int  # its row in the model's request store
    prompt: int
    output: int
    deadline: float  # when its client gives up (infinity: never)
    epoch: int  # the router's epoch when routed: an older one comes back orphaned
    target: int  # prefill target: the prompt, or prompt + generated after a preemption
    progress: int = 0  # prefill tokens done toward the target
    generated: int = 0  # output tokens generated (as of ``join`` while decoding)
    kv: int = 0  # KV tokens held (as of ``join`` while decoding; 0 unless running)
    first_token_s: float = -1.0
    at: int = 0  # GONE, WAITING, RUNNING (or a handoff state: HELD, QUEUED, MOVING, LANDED)
    join: int = -1  # the decode clock when it started decoding (-1: not decoding)
    order: int = 0  # a tie-breaker for heaps, unique per worker
    group: int = -1  # its shared-prefix group (-1: none)
    prefix: int = 0  # the tokens of its prompt that are the group's
    # Times between tokens (``gaps.py``): when its last token came (as of ``vet`` while
    # it decodes), its longest gap so far, and the decode clock from which the
    # worker's decode-step gaps are its own (-1: not yet, its first decode step is
    # still to come).
    last_s: float = 0.0
    max_gap: float = 0.0
    vet: int = -1


@dataclass(slots=True, eq=False)
class Worker:
    """One continuous-batching worker's state."""

    index: int
    model: int
    spec: WorkerSpec
    router: Router
    waiting: deque[Seq] = field(default_factory=deque)
    running: list[Seq] = field(default_factory=list)  # in admission order
    prefilling: list[Seq] = field(default_factory=list)  # running, prefill left
    n_dec: int = 0  # running requests decoding (|D|)
    clock: int = 0  # decode steps done
    dec_base: int = 0  # sum over decoding requests of kv - join: their KV is this + n clock
    # KV is counted in blocks of ``blk`` tokens (tokens when blk is 1): ``kv_total``
    # blocks, of which an admission leaves ``wm`` free. ``kv_prefill`` and ``cached``
    # are in blocks; the decoders' blocks come from ``dec_base`` (blk 1) or from
    # ``dq`` and ``dcnt`` (see ``dec_blocks``).
    blk: int = 1
    kv_total: int = 0
    wm: int = 0
    kv_prefill: int = 0  # KV blocks held by running requests still prefilling
    dq: int = 0  # sum over decoders of (kv - join) // blk
    dcnt: list[int] = field(default_factory=list)  # decoders by (kv - join) % blk
    #: ``scheduler = "prefill_first"``: a step with prefill work runs no decoders.
    prefill_first: bool = False
    # Times between tokens (``gaps.py``): the end of its last decode step, the
    # decoders that joined since, and (with ``slo.tbt_s``) the gaps' falling stack.
    t_dec: float = 0.0
    #: Books a (gap, count) pair: the model's ``GapBook.pairs.append``.
    gap_out: Callable[[tuple[float, int]], None] = field(default=lambda pair: None)
    fresh: list[Seq] = field(default_factory=list)
    track_gaps: bool = False
    gstack: list[tuple[int, float]] = field(default_factory=list)
    finishing: list[tuple[int, int, Seq]] = field(default_factory=list)  # (clock at end, order, seq)
    deadlines: list[tuple[float, int, Seq]] = field(default_factory=list)  # of all its requests
    ahead: int = 0  # 1 while a step that reserved the decoders' next tokens runs
    version: int = 0  # bumped when its pending STEP_END is replaced or it dies
    phase: int = 0  # ASLEEP (or dead), STEP, STRETCH or WAKING
    t0: float = 0.0  # the step's (or stretch's) start
    t_end: float = 0.0  # when its pending STEP_END fires
    chunks: list[tuple[Seq, int]] = field(default_factory=list)
    serial: int = 0
    busy: bool = False  # as last written to the fleet's state array
    draining: bool = False  # scaled down: takes no new requests, parks once empty
    shown_waiting: int = 0  # as last written to the fleet's backlog array
    # A stretch: n decoding requests, a and b of the step time, C, and its length.
    n: int = 0
    a: float = 0.0
    b: float = 0.0
    c: float = 0.0
    steps: int = 0
    # The roofline step model (``step_model = "roofline"``): a step lasts
    # max(r_weights + r_kv x KV tokens read, r_token x tokens computed) + r_fixed +
    # r_comm x tokens (the launch overhead and the tensor-parallel collectives).
    roofline: bool = False
    r_weights: float = 0.0
    r_kv: float = 0.0
    r_token: float = 0.0
    r_fixed: float = 0.0
    r_comm: float = 0.0
    # A mixture of experts under the roofline: the weights term by the step's tokens
    # (the experts they hit), replacing r_weights (None: a dense model).
    r_wtab: list[float] | None = None
    moe_steps: int = 0  # decode-only steps run, and their weights terms summed (moe_figures.py)
    moe_w: float = 0.0
    # The table step model (``step_model = "table"``): a(n) and b(n) by decoders, P(p)
    # by prefill tokens, and the attention coefficient (``emulator.scenario.step_table``).
    table: tuple[list[float], list[float], list[float], float] | None = None
    # Prefix caching (``worker.prefix_cache``): the cache, the tokens its blocks hold,
    # and prefix tokens looked up and found cached at admissions (totals, and at the
    # last frame).
    cache: PrefixCache | None = None
    cached: int = 0
    # Lower KV tiers (``kv_tiers.py``): the first (None: none), and the seconds of
    # tier loads the next step spends before it computes (its admissions' loads).
    tier: Tier | None = None
    tier_block: int = 16  # the prefix cache's block_tokens
    load_due: float = 0.0
    prefix_seen: int = 0
    prefix_hit: int = 0
    frame_seen: int = 0
    frame_hit: int = 0
    # Disaggregated serving (``emulator.sim.workers.disaggregated``): a prefill-pool
    # worker hands each prefilled request off; a decode worker takes handoffs in
    # (``incoming``: no KV reserved yet) and admits them once their KV arrived
    # (``landed``: reserved, joining at the next step start).
    hands_off: bool = False
    takes_held: bool = True  # admits from its router's held queue (False: a decode worker)
    incoming: deque[Seq] = field(default_factory=deque)
    landed: list[Seq] = field(default_factory=list)

    def kv_used(self) -> int:
        """KV blocks held now (a running step's reservations and cached prefix blocks
        included)."""
        if self.blk == 1:
            return self.kv_prefill + self.dec_base + self.n_dec * (self.clock + self.ahead) + self.cached
        return self.kv_prefill + self.dec_blocks(self.clock + self.ahead) + self.cached

    def kv_at(self, t: int) -> int:
        """KV blocks held when the decode clock reads ``t`` (the decoders' grown)."""
        return self.kv_prefill + self.dec_blocks(t) + self.cached

    def dec_blocks(self, t: int) -> int:
        """The decoders' KV blocks when the decode clock reads ``t``.

        A decoder with e = kv - join holds ceil((e + t) / blk) blocks; with e = blk q +
        p (0 <= p < blk) and t = blk T + s that is q + T + (0, 1 or 2: p + s = 0, p +
        s <= blk, p + s > blk), so the sum needs only the q sum and the decoders' count
        by p.
        """
        n = self.n_dec
        if self.blk == 1:
            return self.dec_base + n * t
        if not n:
            return 0
        big, s = divmod(t, self.blk)
        used = self.dq + n * big + n
        if not s:
            return used - self.dcnt[0]
        if s > 1:
            used += sum(self.dcnt[self.blk - s + 1 :])
        return used

    def dec_last_clock(self, avail: int) -> int:
        """The largest decode clock t at which the decoders' blocks fit in ``avail``
        (the decoders' blocks at t + blk are theirs at t plus one each)."""
        n, b = self.n_dec, self.blk
        if b == 1:
            return (avail - self.dec_base) // n
        cnt = self.dcnt
        big = (avail - self.dq - n + cnt[0]) // n  # the last whole period that fits
        used = self.dq + n * big + n  # at blk big + 1
        if used > avail:
            return b * big
        s = 1
        while s < b - 1:
            used += cnt[b - s]  # at blk big + s + 1
            if used > avail:
                break
            s += 1
        return b * big + s

    def tokens_of(self, s: Seq) -> int:
        """Output tokens ``s`` has generated (steps done)."""
        return s.generated + self.clock - s.join if s.join >= 0 else s.generated

    def kv_of(self, s: Seq) -> int:
        """KV tokens ``s`` holds (a running step's reservation included)."""
        return s.kv + self.clock + self.ahead - s.join if s.join >= 0 else s.kv

    def stretch_end(self, k: int) -> float:
        """T(k): when the stretch's k-th step ends."""
        return self.t0 + k * self.a + self.b * (k * self.c + self.n * k * (k - 1) / 2)

    def steps_by(self, t: float) -> int:
        """How many of the stretch's steps have ended by ``t`` (at most ``steps``)."""
        if t >= self.t_end:
            return self.steps
        k = first_step_ending_at_or_after(self, t)
        return k if self.stretch_end(k) <= t else k - 1
