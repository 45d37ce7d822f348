"""The continuous worker model's KV manager: a worker's KV cache of
``kv_cache_tokens`` tokens, shared by the running requests' KV and (with
``worker.prefix_cache``) the cached prefix blocks, as vLLM's KV cache manager keeps it.

It owns reserving a request's KV at admission, growing the decoders' KV by a token a
step, freeing a request's KV, evicting unpinned cached blocks, and the choice of what
to preempt when the decoders' next tokens do not fit: the most recently admitted
running request, after every unpinned cached block is gone.

A worker's KV in use is ``kv_prefill + dec_base + n_dec * (clock + ahead) + cached``
(``Worker.kv_used``): the prefilling requests' reservations, the decoders' KV on the
decode clock (``ahead`` is 1 while a step that reserved their next tokens runs), and
the cached blocks.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from emulator.sim.workers.entities import RUNNING

if TYPE_CHECKING:
    from emulator.sim.workers.entities import Seq, Worker


def free_tokens(wk: Worker) -> int:
    """KV tokens free at ``wk`` now (a running step's reservations counted as used)."""
    return wk.spec.kv_cache_tokens - wk.kv_used()


def cached_prefix(wk: Worker, group: int, prefix: int, target: int) -> int:
    """Prefill tokens a request of prefix ``group`` finds in ``wk``'s prefix cache."""
    cache = wk.cache
    return cache.hit(group, prefix, target) if cache is not None and group >= 0 else 0


def reserve(wk: Worker, seq: Seq, hit: int = 0) -> None:
    """Admit ``seq``'s KV: its whole prefill target but the ``hit`` tokens of cached
    prefix, which it reads in place (its progress starts after them)."""
    seq.at = RUNNING
    seq.kv = seq.target - hit
    seq.progress = hit
    wk.kv_prefill += seq.kv
    if wk.cache is not None and seq.group >= 0:
        wk.cache.pin(seq.group)


def grow(wk: Worker) -> None:
    """Reserve the decoders' next tokens for the step that starts now."""
    wk.ahead = 1 if wk.n_dec else 0


def join(wk: Worker, s: Seq) -> None:
    """``s`` finished its prefill (at a step end): its KV grows on the decode clock."""
    wk.prefilling.remove(s)
    wk.kv_prefill -= s.kv
    s.join = wk.clock
    wk.dec_base += s.kv - s.join
    wk.n_dec += 1
    heapq.heappush(wk.finishing, (s.join + s.output - s.generated, s.order, s))


def leave(wk: Worker, s: Seq) -> None:
    """``s`` stops decoding: bring its tokens and KV up to date."""
    wk.dec_base -= s.kv - s.join
    wk.n_dec -= 1
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
        wk.kv_prefill -= s.kv
    s.kv = 0


def insert_prefix(wk: Worker, s: Seq) -> None:
    """``s`` finished its prefill: its prefix's new whole blocks move to the cache."""
    if wk.cache is not None and s.group >= 0:
        moved = wk.cache.insert(s.group, s.prefix)
        if moved:
            s.kv -= moved
            wk.kv_prefill -= moved
            wk.cached += moved


def evict_cached(
    wk: Worker, need: int, keep: int = -1, partial: bool = False, hit: int = 0
) -> int:
    """Evict unpinned prefix blocks for ``need`` more tokens, sparing those a request
    of group ``keep`` being admitted reuses (its ``hit`` tokens): only if that is
    enough, or as many as there are with ``partial``. Returns the tokens freed."""
    cache = wk.cache
    if cache is None:
        return 0
    spare = hit // cache.block
    if not partial and cache.evictable(keep, spare) < need:
        return 0
    freed = cache.evict(need, keep, spare)
    wk.cached -= freed
    return freed


def preempt_for_decoders(wk: Worker) -> list[Seq]:
    """Make room for the decoders' next tokens: evict unpinned cached blocks, then
    preempt the most recently admitted running requests (their KV freed) while the
    tokens do not fit. Returns the preempted requests in the order preempted."""
    total = wk.spec.kv_cache_tokens
    victims: list[Seq] = []
    while total - (wk.kv_prefill + wk.dec_base + wk.n_dec * wk.clock + wk.cached) < wk.n_dec:
        if wk.cached:  # evict unpinned cached blocks before preempting anything
            room = total - (wk.kv_prefill + wk.dec_base + wk.n_dec * wk.clock + wk.cached)
            if evict_cached(wk, wk.n_dec - room, partial=True):
                continue
        victim = wk.running.pop()
        free(wk, victim)
        victims.append(victim)
    return victims
