"""The continuous worker model's KV manager: a worker's KV cache of
``kv_cache_tokens`` tokens in blocks of ``kv_block_tokens``, shared by the running
requests' KV and (with ``worker.prefix_cache``) the cached prefix blocks, as vLLM's
block manager keeps it.

It owns reserving a request's KV at admission (the whole blocks of its prefill target,
if the blocks left free stay above the ``kv_watermark``), growing the decoders' KV by
a token a step (a decoder whose blocks are full takes a new one), freeing a request's
blocks, evicting unpinned cached blocks, and the choice of what to preempt when the
decoders' next tokens do not fit: the most recently admitted running request, after
every unpinned cached block is gone. The watermark holds for admissions only, as in
vLLM: the decoders may grow into it.

A worker's KV in use (``Worker.kv_used``, in blocks) is the prefilling requests'
blocks, the decoders' on the decode clock (``ahead`` is 1 while a step that reserved
their next tokens runs) and the cached blocks. With ``kv_block_tokens = 1`` and no
watermark this is KV counted token by token.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from emulator.sim.workers import gaps, kv_tiers
from emulator.sim.workers.entities import RUNNING

if TYPE_CHECKING:
    from emulator.sim.workers.entities import Seq, Worker


def free_blocks(wk: Worker) -> int:
    """KV blocks free at ``wk`` now (a running step's reservations counted as used)."""
    return wk.kv_total - wk.kv_used()


def blocks(wk: Worker, tokens: int) -> int:
    """The whole blocks ``tokens`` of KV take at ``wk``."""
    b = wk.blk
    return tokens if b == 1 else -(-tokens // b)


def cached_prefix(wk: Worker, group: int, prefix: int, target: int) -> int:
    """Prefill tokens a request of prefix ``group`` finds in ``wk``'s prefix cache."""
    cache = wk.cache
    return cache.hit(group, prefix, target) if cache is not None and group >= 0 else 0


def tier_hit(wk: Worker, group: int, prefix: int, target: int, hit: int) -> tuple[int, float]:
    """Prefix tokens a request of ``group`` with ``hit`` tokens found in the GPU cache
    would load from the lower tiers past them, and the seconds the copies take."""
    if wk.tier is None or group < 0:
        return 0, 0.0
    size = wk.tier_block
    usable = min(prefix, target - 1) // size
    tokens, seconds = 0, 0.0
    for tier, n in kv_tiers.lookup(wk.tier, group, hit // size, usable):
        tokens += n * size
        seconds += n * size * tier.s_per_token
    return tokens, seconds


def load_from_tiers(wk: Worker, seq: Seq, hit: int) -> int:
    """Prefix tokens a request being admitted with ``hit`` tokens found in the GPU
    cache loads from the lower tiers past them (``kv_tiers.py``): their copies' seconds
    go to the worker's next step, and each tier counts its tokens and seconds."""
    assert wk.tier is not None
    size = wk.tier_block
    usable = min(seq.prefix, seq.target - 1) // size
    loaded = 0
    for tier, n in kv_tiers.lookup(wk.tier, seq.group, hit // size, usable):
        tokens = n * size
        seconds = tokens * tier.s_per_token
        tier.hit_tokens += tokens
        tier.load_s += seconds
        tier.runs.move_to_end(seq.group)  # used now: the most recent
        wk.load_due += seconds
        loaded += tokens
    return loaded


def reserve(wk: Worker, seq: Seq, hit: int = 0) -> None:
    """Admit ``seq``'s KV: its whole prefill target but the ``hit`` tokens of cached
    prefix, which it reads in place (its progress starts after them)."""
    seq.at = RUNNING
    seq.kv = seq.target - hit
    seq.progress = hit
    wk.kv_prefill += blocks(wk, seq.kv)
    if wk.cache is not None and seq.group >= 0:
        wk.cache.pin(seq.group)
        if wk.tier is not None:  # loaded blocks: in its KV, not computed
            seq.progress += load_from_tiers(wk, seq, hit)


def grow(wk: Worker) -> None:
    """Reserve the decoders' next tokens for the step that starts now."""
    wk.ahead = 1 if wk.n_dec else 0


def join(wk: Worker, s: Seq) -> None:
    """``s`` finished its prefill (at a step end): its KV grows on the decode clock."""
    wk.prefilling.remove(s)
    wk.kv_prefill -= blocks(wk, s.kv)
    s.join = wk.clock
    e = s.kv - s.join
    wk.dec_base += e
    wk.n_dec += 1
    if wk.blk > 1:
        q, p = divmod(e, wk.blk)
        wk.dq += q
        wk.dcnt[p] += 1
    heapq.heappush(wk.finishing, (s.join + s.output - s.generated, s.order, s))
    s.vet = -1
    wk.fresh.append(s)


def leave(wk: Worker, s: Seq) -> None:
    """``s`` stops decoding: bring its tokens, KV and last token's time up to date."""
    gaps.left(wk, s)
    e = s.kv - s.join
    wk.dec_base -= e
    wk.n_dec -= 1
    if wk.blk > 1:
        q, p = divmod(e, wk.blk)
        wk.dq -= q
        wk.dcnt[p] -= 1
    s.generated, s.kv = wk.tokens_of(s), wk.kv_of(s)
    s.join = -1


def free(wk: Worker, s: Seq) -> None:
    """Free the KV of ``s``, a running request already out of ``wk.running``."""
    if wk.cache is not None and s.group >= 0:
        wk.cache.unpin(s.group)
    if s.join >= 0:
        leave(wk, s)
    else:
        wk.prefilling.remove(s)
        wk.kv_prefill -= blocks(wk, s.kv)
    s.kv = 0


def free_held(wk: Worker, s: Seq) -> None:
    """Free the KV a prefill worker held for ``s``'s transfer (``s`` left its running
    set when its prefill ended); its group's blocks, which the transfer read, are
    released with it."""
    if wk.cache is not None and s.group >= 0:
        wk.cache.unpin(s.group)
    wk.kv_prefill -= blocks(wk, s.kv)
    s.kv = 0


def insert_prefix(wk: Worker, s: Seq) -> None:
    """``s`` finished its prefill: its prefix's new whole blocks move to the cache."""
    if wk.cache is not None and s.group >= 0:
        moved = wk.cache.insert(s.group, s.prefix)
        if moved:  # whole prefix blocks: whole KV blocks too
            s.kv -= moved
            wk.kv_prefill -= moved // wk.blk
            wk.cached += moved // wk.blk


def evict_cached(
    wk: Worker, need: int, keep: int = -1, partial: bool = False, hit: int = 0
) -> int:
    """Evict unpinned prefix blocks for ``need`` more KV blocks, sparing those a request
    of group ``keep`` being admitted reuses (its ``hit`` tokens): only if that is
    enough, or as many as there are with ``partial``. Returns the KV blocks freed."""
    cache = wk.cache
    if cache is None:
        return 0
    b = wk.blk
    spare = hit // cache.block
    if not partial and cache.evictable(keep, spare) < need * b:
        return 0
    freed = cache.evict(need * b, keep, spare) // b
    wk.cached -= freed
    return freed


def preempt_for_decoders(wk: Worker) -> list[Seq]:
    """Make room for the decoders' next tokens: evict unpinned cached blocks, then
    preempt the most recently admitted running requests (their KV freed) while the
    tokens do not fit. Returns the preempted requests in the order preempted."""
    total = wk.kv_total
    victims: list[Seq] = []
    while (over := wk.kv_at(wk.clock + 1) - total) > 0:
        # Evict unpinned cached blocks before preempting anything.
        if wk.cached and evict_cached(wk, over, partial=True):
            continue
        victim = wk.running.pop()
        free(wk, victim)
        victims.append(victim)
    return victims
