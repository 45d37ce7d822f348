"""What the ``continuous`` worker model tells about shared prefixes: the figures of
frames and the summary (prefix hit rate and prefill tokens saved, per model and per
worker), and the views of a worker that prefix-aware routing reads.

The hit rate is the share of the prefix tokens looked up at admissions (a request
readmitted after a preemption looks its prefix up again) that were found cached; the
prefill tokens saved are those found, since a hit is not computed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emulator.scenario.traces import load_trace
from emulator.sim.workers.base import WorkerModel
from emulator.sim.workers.entities import STRETCH
from emulator.sim.workers.kv_tiers import chain

if TYPE_CHECKING:
    from emulator.scenario import Scenario
    from emulator.sim.workers.entities import Worker
    from emulator.sim.workers.kv_tiers import Tier

#: Per-model frame figures added when a model has shared prefixes or a prefix cache.
PREFIX_FRAME_KEYS = ("prefix_hit_rate", "prefill_tokens_saved")
#: And when a model has lower KV tiers: the share of the prefix tokens looked up that
#: were loaded from a tier, and the seconds the loads took, over the frame.
TIER_FRAME_KEYS = ("tier_hit_rate", "tier_load_s")


def _rate(hit: int, seen: int) -> float | None:
    return hit / seen if seen else None


class PrefixFigures(WorkerModel):
    """The base of ``ContinuousWorkers`` (which fills ``workers``)."""

    workers: dict[int, Worker]

    def init_prefix_figures(self, scenario: Scenario, n_models: int) -> None:
        """Add the prefix figures to frames if any model has prefixes or a cache."""
        trace_prefixes = False
        if scenario.traffic.trace is not None:

            trace_prefixes = load_trace(scenario.traffic.trace).prefix_group is not None
        self.prefix_on = trace_prefixes or any(
            m.prefixes is not None or scenario.worker_for(name).prefix_cache
            for name, m in scenario.models.items()
        )
        if self.prefix_on:  # this fleet's frames carry more keys than the class's
            self.keys = (*self.frame_keys, *PREFIX_FRAME_KEYS)
        self.tiers_on = any(scenario.worker_for(name).kv_tiers for name in scenario.models)
        if self.tiers_on:
            self.keys = (*self.keys, *TIER_FRAME_KEYS)
        self._prefix_mark = [(0, 0)] * n_models  # (seen, hit) at the last frame
        self._tier_mark = [(0, 0.0)] * n_models  # (tokens loaded, seconds) at the last frame

    # -- figures ---------------------------------------------------------------------
    def prefix_totals(self, model: int) -> tuple[int, int]:
        """Prefix tokens ``model``'s workers looked up and found cached, so far."""
        seen = hit = 0
        for wk in self.workers.values():
            if wk.model == model:
                seen += wk.prefix_seen
                hit += wk.prefix_hit
        return seen, hit

    def add_prefix_figures(self, model: int, out: dict[str, Any]) -> None:
        """The frame's prefix figures of ``model``: hit rate and tokens saved in it."""
        seen, hit = self.prefix_totals(model)
        seen0, hit0 = self._prefix_mark[model]
        out["prefix_hit_rate"] = _rate(hit - hit0, seen - seen0)
        out["prefill_tokens_saved"] = hit - hit0
        self._prefix_mark[model] = (seen, hit)
        if self.tiers_on:
            loaded = load_s = 0.0
            for tier in self._tiers(model):
                loaded += tier.hit_tokens
                load_s += tier.load_s
            loaded0, load0 = self._tier_mark[model]
            out["tier_hit_rate"] = _rate(int(loaded - loaded0), seen - seen0)
            out["tier_load_s"] = load_s - load0
            self._tier_mark[model] = (int(loaded), load_s)

    def _tiers(self, model: int) -> list[Tier]:
        """Every lower tier of ``model``'s workers (a shared store once)."""
        tiers = [t for wk in self.workers.values() if wk.model == model for t in chain(wk.tier)]
        return list({id(t): t for t in tiers}.values())

    def tier_summary(self, model: int) -> dict[str, Any]:
        """``model``'s lower tiers over the run, by tier name (``Outcomes.kv_tiers``;
        empty without tiers): tokens loaded, their share of the prefix tokens looked
        up, the seconds the loads took (and for a store shared by a pool, the workers
        sharing it, ``shared_by``); and the GPU cache's own share."""
        tiers = self._tiers(model)
        if not tiers:
            return {}
        seen, hit = self.prefix_totals(model)
        out: dict[str, Any] = {}
        for tier in tiers:
            row = out.setdefault(tier.name, {"hit_tokens": 0, "load_s": 0.0})
            row["hit_tokens"] += tier.hit_tokens
            row["load_s"] += tier.load_s
            if tier.shared:  # a store shared by a pool: the workers that use it
                row["shared_by"] = row.get("shared_by", 0) + sum(
                    1 for wk in self.workers.values() if wk.model == model and tier in chain(wk.tier))
        loaded = sum(row["hit_tokens"] for row in out.values())
        for row in out.values():
            row["hit_rate"] = _rate(row["hit_tokens"], seen)
        return {"gpu": {"hit_tokens": hit - loaded, "hit_rate": _rate(hit - loaded, seen)}, **out}

    def worker_prefix_frame(self, w: int) -> float | None:
        """Worker ``w``'s prefix hit rate over the frame (None: nothing looked up)."""
        wk = self.workers[w]
        rate = _rate(wk.prefix_hit - wk.frame_hit, wk.prefix_seen - wk.frame_seen)
        wk.frame_seen, wk.frame_hit = wk.prefix_seen, wk.prefix_hit
        return rate

    def worker_prefix_rate(self, w: int) -> float | None:
        """Worker ``w``'s prefix hit rate over the run so far."""
        wk = self.workers[w]
        return _rate(wk.prefix_hit, wk.prefix_seen)

    # -- what routing reads ------------------------------------------------------------
    def prefix_fraction(self, w: int, group: int, prefix: int, prompt: int) -> float:
        """The share of a request's prefix that worker ``w`` holds cached now."""
        wk = self.workers[w]
        if wk.cache is None or group < 0 or prefix <= 0:
            return 0.0
        return wk.cache.hit(group, prefix, prompt) / prefix

    def load(self, w: int) -> int:
        """Requests at worker ``w``: waiting and running."""
        wk = self.workers[w]
        return len(wk.waiting) + len(wk.running)

    def waiting_in(self, workers: list[int]) -> int:
        """Requests waiting at ``workers`` (not admitted yet)."""
        mine = self.workers
        return sum(len(mine[w].waiting) for w in workers)

    def waiting_at(self, w: int) -> int:
        """Requests waiting at worker ``w`` (not admitted yet)."""
        return len(self.workers[w].waiting)

    def kv_busy(self, w: int) -> float:
        """The share of worker ``w``'s KV that running requests and pinned prefix blocks
        hold now (unpinned cached blocks are free to take)."""
        wk = self.workers[w]
        if wk.phase == STRETCH:  # the steps of the stretch done by now
            used = wk.kv_at(wk.clock + wk.ahead + wk.steps_by(self.queue.now_s))  # type: ignore[attr-defined]
        else:
            used = wk.kv_used()
        if wk.cache is not None:
            used -= wk.cache.evictable() // wk.blk
        return max(0.0, min(1.0, used / wk.kv_total))
