"""The router's session table (``dispatcher.session_affinity``), in the manner of
llm-d's session-affinity scorer, which sends a request carrying a session token back
to the worker that served the session before.

A session is a prefix group: the requests sharing a prefix stand for the turns of one
conversation. The table keeps, per session, the worker its last request was routed to
and when; a session idle for more than ``session_ttl_s`` is forgotten. The routing
pipeline (``pipeline.ComposedPolicy``) asks it before its picker: while the session's
worker is among the candidates (believed alive, in the pool), the request goes there;
otherwise (the worker died, was drained, or the session is new or forgotten) the
policy picks as it would without affinity and the session is pinned to that worker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from emulator.sim.policies.pipeline import ComposedPolicy


class SessionTable:
    """Each session's worker and the time it was last routed."""

    __slots__ = ("kept", "pinned", "repinned", "sessions", "sticky", "ttl_s")

    def __init__(self, ttl_s: float, sticky: bool = True) -> None:
        self.ttl_s = ttl_s
        #: Pin (``session_affinity``); else only remembered, for the ``session`` scorer.
        self.sticky = sticky
        #: Session (prefix group) -> [worker, time last routed].
        self.sessions: dict[int, list[float]] = {}
        #: Requests sent to their session's worker; sessions pinned for the first time
        #: (or again after being forgotten); sessions moved off a worker no longer a
        #: candidate.
        self.kept = 0
        self.pinned = 0
        self.repinned = 0

    def worker(self, session: int, now_s: float) -> int | None:
        """The worker ``session`` is pinned to (None: none, or idle past the TTL)."""
        entry = self.sessions.get(session)
        if entry is None:
            return None
        if now_s - entry[1] > self.ttl_s:
            del self.sessions[session]
            return None
        return int(entry[0])

    def record(self, session: int, worker: int, now_s: float, had: int | None) -> None:
        """``session``'s request went to ``worker`` at ``now_s``; ``had`` is the worker
        it was pinned to (None: none)."""
        if had is None:
            self.pinned += 1
        elif had == worker:
            self.kept += 1
        else:
            self.repinned += 1
        entry = self.sessions.get(session)
        if entry is None:
            self.sessions[session] = [worker, now_s]
        else:
            entry[0], entry[1] = worker, now_s


def _pinned(policy: ComposedPolicy, row: int, found: list[int]) -> tuple[int, int | None, int | None]:
    """The request's session (-1: none), the worker it is pinned to, and that worker
    if it is among ``found`` and the table pins (else None)."""
    group = policy.request(row)[0]
    if group < 0:
        return group, None, None
    table = policy.sessions
    assert table is not None
    had = table.worker(group, policy.sim.now_s)
    return group, had, had if table.sticky and had is not None and had in found else None


def session_pick(policy: ComposedPolicy, work: Any) -> int:
    """``policy.pick`` with sessions: the session's worker while it is a candidate
    (under ``session_affinity``), else the policy's choice; the session is then
    recorded at the worker chosen."""
    found = policy.rotation if policy._plain else policy.candidates(work)
    group, had, w = _pinned(policy, work, found)
    if w is None:
        w = policy.chooser.pick(work, found, policy._score(work, found))
    else:
        policy.chooser.taken(w)
    if group >= 0:
        assert policy.sessions is not None
        policy.sessions.record(group, w, policy.sim.now_s, had)
    if policy.index is not None:
        policy._record(work, w)
    return w


def session_peek(policy: ComposedPolicy, work: Any) -> int:
    """``session_pick``'s choice, changing nothing."""
    found = policy.rotation if policy._plain else policy.candidates(work)
    w = _pinned(policy, work, found)[2]
    return w if w is not None else policy.chooser.peek(work, found, policy._score(work, found))


def summary(policy: Any) -> dict[str, int]:
    """The session counts of a model's routing (a split model's pools added up);
    empty without sessions."""
    tables = [t for p in (policy, getattr(policy, "prefill", None), getattr(policy, "decode", None))
              if (t := getattr(p, "sessions", None)) is not None]
    if not tables:
        return {}
    return {key: sum(getattr(t, key) for t in tables) for key in ("kept", "pinned", "repinned")}
