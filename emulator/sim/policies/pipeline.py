"""Routing as a fixed pipeline, the shape of llm-d's endpoint picker: filters narrow the
candidate workers, scorers each give every candidate a score from 0 to 1, and a picker
chooses one. A pushing policy is a declared composition of the three
(``ComposedPolicy``): ``round_robin`` is the alive filter and the rotation picker;
``weighted`` the alive filter, its weighted scorers and the highest-score picker.

Filters. ``IN_POOL`` keeps the workers of the dispatcher's pool (a split model's pool
view has only its own); ``BELIEVED_ALIVE`` keeps those alive at the last health check
and not draining, the policy's ``rotation``, which health checks and the autoscaler keep
up to date, so it is read, not recomputed, at each pick. No rule today keeps a worker
out for lack of KV room: a request no worker could hold is refused before routing
(``Router.kv_limit``), and one that does not fit now waits at its worker.

Scorers (``SCORERS``, the names of ``[dispatcher.scorers]``): ``prefix``, the share of
the request's shared prefix the worker holds cached (under ``dispatcher.prefix_index
= "estimated"``, ``EstimatedPrefixScorer``: 1 where the router's own record of its
routings says the group went recently, 0 elsewhere; each pick is then recorded); ``queue``, 1 for the candidates
with the fewest waiting requests (a decode worker's handoffs waiting for room count),
0 for those with the most, linearly between, all 1 when equal; ``kv_free``, the share
of its KV that running requests and pinned prefix blocks leave free; ``running``, as
``queue`` over running requests; ``session``, 1 for the worker the request's session
was last routed to (see below).

Pickers. ``MaxScore``: the highest weighted sum of the scores, added in the order of
``SCORERS``; ties to the least loaded candidate (waiting plus running requests), then
the first in layout order. ``Rotation``: the next candidate in turn, whatever the
scores. ``LeastOutstanding``: the fewest units of work pushed and not heard back
about (the dispatcher's own count), the lowest index on ties.

Each composition has ``pick`` (choose, moving the picker's own state) and ``peek``
(the same choice, changing nothing), which admission and a split model's decider ask.

Session affinity (``dispatcher.session_affinity``, ``sessions.py``) comes after the
filters and before the scorers: a request whose session (prefix group) is pinned to
one of the candidates goes there, unscored; any other is picked as without it, and its
session pinned to the choice. The ``session`` scorer is its soft form: 1 for the
session's worker, weighed against the others.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from emulator.scenario.specs import DEFAULT_SCORERS
from emulator.sim.policies.base import PushPolicy
from emulator.sim.policies.prefix_index import EstimatedPrefixIndex
from emulator.sim.policies.sessions import SessionTable, session_peek, session_pick

if TYPE_CHECKING:
    from emulator.sim.engine import Engine
    from emulator.sim.intake import Intake as Dispatcher
    from emulator.sim.workers.continuous import ContinuousWorkers


# -- filters ---------------------------------------------------------------------------
class Filter(ABC):
    """Narrows the candidate workers (fleet indexes, in layout order) of one pick."""

    name: ClassVar[str]

    @abstractmethod
    def keep(self, policy: ComposedPolicy, work: Any, candidates: list[int]) -> list[int]:
        """The candidates that pass, in the order given."""


class InPool(Filter):
    """The workers of the pool the policy routes in."""

    name = "in_pool"

    def keep(self, policy: ComposedPolicy, work: Any, candidates: list[int]) -> list[int]:
        pool = policy.dispatcher.workers
        if candidates is pool:
            return pool
        members = set(pool)
        return [w for w in candidates if w in members]


class BelievedAlive(Filter):
    """The workers alive at the last health check and not draining (``rotation``)."""

    name = "believed_alive"

    def keep(self, policy: ComposedPolicy, work: Any, candidates: list[int]) -> list[int]:
        rotation = policy.rotation
        if candidates is policy.dispatcher.workers:
            return rotation  # the rotation is a subset of the pool, in its order
        members = set(rotation)
        return [w for w in candidates if w in members]


IN_POOL = InPool()
BELIEVED_ALIVE = BelievedAlive()


# -- scorers ---------------------------------------------------------------------------
class Scorer(ABC):
    """Gives each candidate a score from 0 to 1 for one request (a store row)."""

    name: ClassVar[str]
    #: It reads the workers' prefix caches (continuous workers only).
    reads_prefix_caches: ClassVar[bool] = False

    @abstractmethod
    def scores(self, policy: ComposedPolicy, row: int, candidates: list[int]) -> list[float]:
        """Each candidate's score, in the order of ``candidates``."""


def spread(values: Sequence[int]) -> list[float]:
    """1 for the lowest of ``values``, 0 for the highest, linearly between (all 1 when
    they are equal): the queue and running scorers."""
    if not values:
        return []
    low = min(values)
    span = max(values) - low
    if span == 0:
        return [1.0] * len(values)
    return [(low + span - v) / span for v in values]


class PrefixScorer(Scorer):
    """The share of the request's shared prefix the worker holds cached now."""

    name = "prefix"
    reads_prefix_caches = True

    def scores(self, policy: ComposedPolicy, row: int, candidates: list[int]) -> list[float]:
        group, prefix, prompt = policy.request(row)
        fraction = policy.cw.prefix_fraction
        return [fraction(w, group, prefix, prompt) for w in candidates]


class EstimatedPrefixScorer(Scorer):
    """``prefix`` under ``dispatcher.prefix_index = "estimated"``: 1 for the candidates
    the router's own index (``EstimatedPrefixIndex``) says were sent the request's
    prefix group recently, 0 for the others and for a request without a prefix. It
    reads no worker's cache."""

    name = "prefix"
    reads_prefix_caches = True  # it stands in for the scorer that does

    def __init__(self, index: EstimatedPrefixIndex) -> None:
        self.index = index

    def scores(self, policy: ComposedPolicy, row: int, candidates: list[int]) -> list[float]:
        group, prefix, _ = policy.request(row)
        if group < 0 or prefix <= 0:
            return [0.0] * len(candidates)
        now = policy.sim.now_s
        holds = self.index.holds
        return [1.0 if holds(w, group, now) else 0.0 for w in candidates]


class QueueScorer(Scorer):
    """Fewest waiting requests best (handoffs waiting for room wait there too)."""

    name = "queue"

    def scores(self, policy: ComposedPolicy, row: int, candidates: list[int]) -> list[float]:
        table = policy.cw.workers
        return spread([len(table[w].waiting) + len(table[w].incoming) for w in candidates])


class KvFreeScorer(Scorer):
    """The share of the worker's KV left free (unpinned cached blocks count as free)."""

    name = "kv_free"

    def scores(self, policy: ComposedPolicy, row: int, candidates: list[int]) -> list[float]:
        busy = policy.cw.kv_busy
        return [1.0 - busy(w) for w in candidates]


class RunningScorer(Scorer):
    """Fewest running (active) requests best."""

    name = "running"

    def scores(self, policy: ComposedPolicy, row: int, candidates: list[int]) -> list[float]:
        table = policy.cw.workers
        return spread([len(table[w].running) for w in candidates])


class SessionScorer(Scorer):
    """1 for the worker the request's session (prefix group) was last routed to, within
    ``session_ttl_s``; 0 for the others and for a request without one (llm-d's
    session-affinity scorer; ``sessions.py``)."""

    name = "session"

    def scores(self, policy: ComposedPolicy, row: int, candidates: list[int]) -> list[float]:
        group = policy.request(row)[0]
        assert policy.sessions is not None, "a policy scoring sessions keeps their table"
        w = policy.sessions.worker(group, policy.sim.now_s) if group >= 0 else None
        return [1.0 if c == w else 0.0 for c in candidates]


#: The scorers by name, in the order a weighted sum adds them.
SCORERS: dict[str, Scorer] = {
    s.name: s for s in (PrefixScorer(), QueueScorer(), KvFreeScorer(), RunningScorer(), SessionScorer())
}


# -- pickers ---------------------------------------------------------------------------
class Picker(ABC):
    """Chooses one of the candidates (never empty), made once per policy."""

    #: It reads the scorers' sums (the pipeline skips scoring for the others).
    reads_scores: ClassVar[bool] = False

    def __init__(self, policy: ComposedPolicy) -> None:
        self.policy = policy

    @abstractmethod
    def peek(self, row: Any, candidates: list[int], scores: list[float]) -> int:
        """The choice, changing nothing."""

    def pick(self, row: Any, candidates: list[int], scores: list[float]) -> int:
        """The choice, moving the picker's own state (a rotation, a count)."""
        return self.peek(row, candidates, scores)

    def pick_alive(self, work: Any) -> int:
        """``pick`` among the workers believed alive, with no score (a composition of
        the usual two filters and no scorer binds this as its ``pick``)."""
        return self.pick(work, self.policy.rotation, [])

    def peek_alive(self, work: Any) -> int:
        """``peek`` as ``pick_alive`` picks."""
        return self.peek(work, self.policy.rotation, [])

    def done(self, w: int) -> None:  # noqa: B027 (an optional hook: doing nothing is its default)
        """Work pushed to ``w`` left it (only for pickers that count)."""

    def taken(self, w: int) -> None:  # noqa: B027 (an optional hook: doing nothing is its default)
        """Work went to ``w`` without this picker choosing it (session affinity)."""

    def rotation_changed(self, old: list[int], alive: list[int]) -> None:  # noqa: B027 (an optional hook: doing nothing is its default)
        """The workers believed alive change from ``old`` to ``alive``."""


class MaxScore(Picker):
    """The highest score; the least loaded on ties, then the first in layout order."""

    reads_scores = True

    def peek(self, row: Any, candidates: list[int], scores: list[float]) -> int:
        # The first candidate with the greatest (score, -load), found without asking
        # the load of those below the top score (a pick runs once per request).
        top = max(scores)
        if scores.count(top) == 1:
            return candidates[scores.index(top)]
        load = self.policy.cw.load
        best, best_load = -1, 0
        for w, score in zip(candidates, scores, strict=True):
            if score == top:
                n = load(w)
                if best < 0 or n < best_load:
                    best, best_load = w, n
        return best

    pick = peek  # it keeps no state: one call less per request


class Rotation(Picker):
    """The next candidate in turn (busy or not)."""

    def __init__(self, policy: ComposedPolicy) -> None:
        super().__init__(policy)
        self.next = 0

    def peek(self, row: Any, candidates: list[int], scores: list[float]) -> int:
        return candidates[self.next % len(candidates)]

    def pick(self, row: Any, candidates: list[int], scores: list[float]) -> int:
        w = candidates[self.next % len(candidates)]
        self.next = (self.next + 1) % len(candidates)
        return w

    def pick_alive(self, work: Any) -> int:
        rotation = self.policy.rotation
        w = rotation[self.next % len(rotation)]
        self.next = (self.next + 1) % len(rotation)
        return w

    def peek_alive(self, work: Any) -> int:
        rotation = self.policy.rotation
        return rotation[self.next % len(rotation)]

    def rotation_changed(self, old: list[int], alive: list[int]) -> None:
        self.next = self.next % len(alive) if alive else 0


class LeastOutstanding(Picker):
    """The fewest units of work pushed and not heard back about, lowest index on ties.

    The count is kept over the whole pool: a worker the filters leave out counts as
    infinitely loaded (it is set so when the rotation drops it), so the choice is one
    ``argmin`` over the pool rather than a pass over the candidates."""

    def __init__(self, policy: ComposedPolicy) -> None:
        super().__init__(policy)
        pool = policy.dispatcher.workers
        self.pool = pool
        self.outstanding = np.zeros(len(pool))
        for local, w in enumerate(pool):
            if not policy.workers.is_alive(w):  # an autoscaler's parked slot
                self.outstanding[local] = np.inf

    def peek(self, row: Any, candidates: list[int], scores: list[float]) -> int:
        return self.pool[int(np.argmin(self.outstanding))]

    def pick(self, row: Any, candidates: list[int], scores: list[float]) -> int:
        local = int(np.argmin(self.outstanding))
        self.outstanding[local] += 1
        return self.pool[local]

    # The candidates are read from the counts already: the same calls.
    def pick_alive(self, work: Any) -> int:
        local = int(np.argmin(self.outstanding))
        self.outstanding[local] += 1
        return self.pool[local]

    def peek_alive(self, work: Any) -> int:
        return self.pool[int(np.argmin(self.outstanding))]

    def taken(self, w: int) -> None:
        self.outstanding[self.policy.local_index[w]] += 1

    def done(self, w: int) -> None:
        local = self.policy.local_index[w]
        if np.isfinite(self.outstanding[local]) and self.outstanding[local] > 0:
            self.outstanding[local] -= 1

    def rotation_changed(self, old: list[int], alive: list[int]) -> None:
        known, live = set(old), set(alive)
        for local, w in enumerate(self.pool):
            if w not in live:
                self.outstanding[local] = np.inf
            elif w not in known:
                self.outstanding[local] = 0.0


# -- compositions ----------------------------------------------------------------------
class ComposedPolicy(PushPolicy):
    """A pushing policy declared as filters, scorers and a picker.

    Subclasses set ``filters`` (applied in order to the pool's workers), ``picker`` (a
    ``Picker`` class, made per policy) and either ``weights`` (scorer name to weight) or
    ``uses_scorers`` (the weights of ``[dispatcher.scorers]``, ``DEFAULT_SCORERS`` when
    absent). Scorers of weight 0 are not asked.
    """

    filters: ClassVar[tuple[Filter, ...]] = (IN_POOL, BELIEVED_ALIVE)
    picker: ClassVar[type[Picker]]
    weights: ClassVar[dict[str, float]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Traits that follow from the composition are derived here, once, so the
        # registry copies them into the scenario layer's catalog as declared.
        super().__init_subclass__(**kwargs)
        cls.counts_done = cls.picker.done is not Picker.done
        cls.needs_prefix_caches = cls.uses_scorers or any(
            SCORERS[name].reads_prefix_caches for name, w in cls.weights.items() if w
        )

    def __init__(self, sim: Engine, dispatcher: Dispatcher) -> None:
        super().__init__(sim, dispatcher)
        self.cw: ContinuousWorkers = self.workers  # type: ignore[assignment]
        chosen = dict(dispatcher.scorers or DEFAULT_SCORERS) if self.uses_scorers else self.weights
        #: The scorers asked and their weights, in the order of ``SCORERS``.
        self.weighted: list[tuple[float, Scorer]] = [
            (chosen[name], scorer) for name, scorer in SCORERS.items() if chosen.get(name, 0.0)
        ]
        #: The router's own prefix index (``dispatcher.prefix_index = "estimated"``),
        #: which then scores ``prefix`` in place of the workers' caches.
        self.index: EstimatedPrefixIndex | None = None
        if getattr(dispatcher, "prefix_index", "exact") == "estimated" and any(
            s.name == "prefix" for _, s in self.weighted
        ):
            self.index = EstimatedPrefixIndex(dispatcher.prefix_index_capacity, dispatcher.prefix_index_ttl_s)
            guess = EstimatedPrefixScorer(self.index)
            self.weighted = [(w, guess if s.name == "prefix" else s) for w, s in self.weighted]
        self.chooser: Picker = self.picker(self)
        #: The two filters every shipped policy has leave the rotation itself.
        self._plain = self.filters == (IN_POOL, BELIEVED_ALIVE)
        self._score: Callable[[int, list[int]], list[float]] = (
            self.score if self.chooser.reads_scores else _no_scores
        )
        if self.counts_done:
            self.work_done = self.chooser.done  # type: ignore[method-assign]
        if not self._plain:
            self.offer = self._offer_filtered  # type: ignore[method-assign]
        if self._plain and not self.chooser.reads_scores:
            # Nothing to filter or score: bound once, as a pick runs once per batch or
            # request (round robin's and least loaded's hot path).
            self.pick = self.chooser.pick_alive  # type: ignore[method-assign]
            self.peek = self.chooser.peek_alive  # type: ignore[method-assign]
        if self.index is not None:
            self.pick = self._pick_recorded  # type: ignore[method-assign]
        #: Each session's worker (``dispatcher.session_affinity``; None: off).
        self.sessions: SessionTable | None = None
        sticky = bool(getattr(dispatcher, "session_affinity", False))
        if sticky or any(s.name == "session" for _, s in self.weighted):
            self.sessions = SessionTable(getattr(dispatcher, "session_ttl_s", 600.0), sticky)
            self.pick = lambda work: session_pick(self, work)  # type: ignore[method-assign]
            self.peek = lambda work: session_peek(self, work)  # type: ignore[method-assign]

    def request(self, row: int) -> tuple[int, int, int]:
        """The request's prefix group, prefix tokens and prompt tokens."""
        st = self.dispatcher.store
        i = row - st.base
        return st.group.item(i), st.prefix.item(i), st.tokens.item(i)

    def candidates(self, work: Any) -> list[int]:
        """The workers the filters leave for ``work`` (the rotation for the usual two)."""
        if self._plain:
            return self.rotation
        found = self.dispatcher.workers
        for f in self.filters:
            found = f.keep(self, work, found)
        return found

    def score(self, row: int, candidates: list[int]) -> list[float]:
        """Each candidate's weighted sum of the scores, added in the order of
        ``SCORERS`` (0 with no scorer)."""
        weighted = self.weighted
        if not weighted:
            return [0.0] * len(candidates)
        # The first term alone is the sum so far (0 + w x s is w x s, exactly).
        weight, scorer = weighted[0]
        first = scorer.scores(self, row, candidates)
        totals = first if weight == 1.0 else [weight * s for s in first]
        for weight, scorer in weighted[1:]:
            totals = [t + weight * s for t, s in zip(totals, scorer.scores(self, row, candidates), strict=True)]
        return totals

    def pick(self, work: Any) -> int:
        found = self.rotation if self._plain else self.candidates(work)
        return self.chooser.pick(work, found, self._score(work, found))

    def peek(self, work: Any) -> int:
        found = self.rotation if self._plain else self.candidates(work)
        return self.chooser.peek(work, found, self._score(work, found))

    def _pick_recorded(self, work: Any) -> int:
        """``pick``, recording the choice in the router's prefix index."""
        w = ComposedPolicy.pick(self, work)
        self._record(work, w)
        return w

    def _record(self, row: int, w: int) -> None:
        """The router sent request ``row`` to worker ``w``: its index remembers it."""
        group, prefix, _ = self.request(row)
        if group >= 0 and prefix > 0 and self.index is not None:
            self.index.record(w, group, self.sim.now_s)

    def _offer_filtered(self, work: Any) -> bool:
        """``offer`` for a composition with filters of its own: they may leave no
        candidate (the dispatcher then holds the work)."""
        if not self.rotation:
            return False
        found = self.candidates(work)
        if not found:
            return False
        if self.sessions is not None:
            w = session_pick(self, work)
        else:
            w = self.chooser.pick(work, found, self._score(work, found))
            if self.index is not None:
                self._record(work, w)
        self.assign(w, work)
        return True

    def rotation_changed(self, alive: list[int]) -> None:
        self.chooser.rotation_changed(self.rotation, alive)


def _no_scores(row: int, candidates: list[int]) -> list[float]:
    """The scores of a picker that reads none."""
    return []
