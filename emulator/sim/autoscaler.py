"""The autoscaler: one model's worker count follows a load metric, as a Kubernetes HPA
(or KEDA's scaler in front of one) does for vLLM-style inference pods.

A disaggregated model's pools are scaled each by its own (``[pools.NAME.autoscaler]``),
as Dynamo's planner scales prefill and decode workers separately: the same rules over
the pool's workers only, read through the pool's own routing (a decode worker's
handoffs waiting for room count as waiting; the router's held queue counts only for
a pool whose policy holds requests), new workers placed on the pool's hosts.

Every ``interval_s`` (an ``AUTOSCALE`` event, first at ``interval_s``) it reads, for
the model:

* ``queue``: requests waiting (the dispatcher's held queue plus the waiting queues of
  the workers that take new requests) per active worker;
* ``kv``: the mean fraction of the KV cache in use over the active workers;
* ``running``: running sequences per active worker.

The *load* is the metric times the active workers (waiting requests, the KV fractions
summed, running sequences), and the desired count is ``ceil(load / target)``, which is
the HPA's ``ceil(current x metric / target)``, at least 1 while any request waits (a
fleet scaled to zero wakes up), clamped to ``[min_workers, max_workers]``. It is
compared with the workers serving or warming up (dead ones do not count, so lost
capacity is replaced). A scale-down goes only as far as the highest count wanted at
the looks of the last ``stabilization_s`` (the HPA's scale-down stabilization window,
which keeps a fleet from flapping when its own size moves the metric). Unless a scale action happened less than ``cooldown_s`` ago:

* Scaling up places each new worker on free units of a live host (adjacent units, the
  spot the incremental placer of ``emulator.analysis.placement.fragment`` picks: the one
  that costs the fewest future large workers). It warms up for ``warmup_s`` (loading
  its weights; a ``WORKER_READY`` event) and then serves, idle, and routing sees it at
  once. No free block, or no slot left (every one of ``max_workers`` draining or dead
  on a live host), means no scale-up, reported as a ``blocked`` event. A slot whose
  worker died with its host is reused: the worker is recreated elsewhere.
* Scaling down takes workers still warming first (newest first; they park at once),
  then active ones with the fewest requests (highest index on ties). A worker scaled
  down takes no new requests and is parked, its units free again, when the requests
  it holds are done.

Faults: a host's death kills its workers as usual; a worker warming up on it dies too
and, if the host comes back before its slot is reused, loads its weights again from
the start. A draining worker that dies is parked at once. A worker whose slot was
reused elsewhere does not come back with its old host; the others do, and a fleet
then larger than wanted is scaled down at the next looks.

Every look is kept in ``samples`` (what was measured and decided) and every action in
``events``: ``up``, ``ready``, ``down``, ``parked``, ``blocked``, ``lost`` (died
warming up), ``rewarm``.
"""

from __future__ import annotations

import math
from collections import deque
from functools import partial
from typing import TYPE_CHECKING, Any

from emulator.analysis.placement.fragment import place_incremental
from emulator.scenario import AutoscalerSpec
from emulator.sim.events import AUTOSCALE, WORKER_READY
from emulator.sim.policies.base import PushPolicy
from emulator.sim.results import BUSY, DEAD, PARKED, WARMING
from emulator.sim.workers.continuous import ContinuousWorkers

if TYPE_CHECKING:
    from emulator.sim.engine import Engine

#: Per-model frame figures the autoscaler adds (None for models it does not scale).
FRAME_KEYS = ("active_workers", "warming_workers", "draining_workers", "parked_workers")

# A slot's phase (a dead worker keeps the phase it died in; ``Fleet.state`` says DEAD).
_PARKED, _WARMING, _ACTIVE, _DRAINING = 0, 1, 2, 3


class Autoscaler:
    """See the module docstring."""

    def __init__(self, sim: Engine, spec: AutoscalerSpec, pool: str | None = None) -> None:
        self.sim = sim
        self.spec = spec
        #: The pool scaled (None: the whole model, ``[autoscaler]``).
        self.pool = pool
        self.queue = sim.queue
        self.fleet = sim.fleet
        self.model = sim.names.index(spec.model)
        self.router = sim.disp[self.model]
        workers = sim.worker_models["continuous"]
        assert isinstance(workers, ContinuousWorkers), "validation scales continuous models only"
        self.workers = workers
        self.slots: list[int] = [
            w for w in self.router.workers if pool is None or self.fleet.pool[w] == pool
        ]
        #: The policy routing among the slots: a pool's own, or the model's.
        self.policy = self.router.policy
        of = getattr(self.router.policy, "of", None)
        if pool is not None and of is not None:
            self.policy = of[self.slots[0]]
        #: The hosts new workers may go on (None: any live host).
        self.hosts: set[int] | None = None
        if pool is not None:
            groups = [g for g in sim.scenario.hosts for _ in range(g.count)]
            self.hosts = {h for h, g in enumerate(groups) if g.pool == pool}
        self.label = spec.model if pool is None else f"{spec.model} pool {pool}"
        self.phase = {
            w: _PARKED if self.fleet.state[w] == PARKED else _ACTIVE for w in self.slots
        }
        self.version = dict.fromkeys(self.slots, 0)
        self.placed_at = dict.fromkeys(self.slots, 0.0)
        self.sizes = {n: m.worker_units for n, m in sim.scenario.models.items()}
        self.last_action_s = -math.inf
        self.wanted: deque[tuple[float, int]] = deque()  # (look time, count wanted), the window
        #: Every look at the metric: what was measured and what was decided.
        self.samples: list[dict[str, Any]] = []
        #: Every scale action, in time order.
        self.events: list[dict[str, Any]] = []
        self.worker_s = 0.0  # time integral of workers warming up, serving or draining
        self._tally_s = 0.0
        self.peak = self._holding()
        # One handler per kind for every autoscaler: a look carries its autoscaler, a
        # readiness its slot (each slot has one autoscaler, ``Engine.scaler_of``).
        self.queue.on(AUTOSCALE, _look)
        self.queue.on(WORKER_READY, partial(_ready, sim))
        if spec.interval_s <= sim.duration_s:
            self.queue.schedule(spec.interval_s, AUTOSCALE, self)

    # -- counts ----------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        """Workers of the model now: active (serving new requests), warming, draining,
        parked (slots on no host) and dead."""
        out = {"active": 0, "warming": 0, "draining": 0, "parked": 0, "dead": 0}
        state = self.fleet.state
        for w in self.slots:
            phase = self.phase[w]
            if phase == _PARKED:
                out["parked"] += 1
            elif state[w] == DEAD:
                out["dead"] += 1
            elif phase == _WARMING:
                out["warming"] += 1
            elif phase == _DRAINING:
                out["draining"] += 1
            else:
                out["active"] += 1
        return out

    def frame_figures(self, model: int) -> dict[str, Any]:
        """The figures of ``FRAME_KEYS`` for ``model`` (None unless it is scaled)."""
        if model != self.model:
            return dict.fromkeys(FRAME_KEYS)
        c = self.counts()
        return {
            "active_workers": c["active"],
            "warming_workers": c["warming"],
            "draining_workers": c["draining"],
            "parked_workers": c["parked"],
        }

    def summary(self) -> dict[str, Any]:
        """JSON-safe: the spec, the scale events, the counts now, the most workers held
        at once and the worker-seconds (warming up, serving or draining)."""
        self._tally()
        directions = [e["direction"] for e in self.events]
        return {
            "model": self.spec.model,
            **({"pool": self.pool} if self.pool is not None else {}),
            "metric": self.spec.metric,
            "target": self.spec.target,
            "events": list(self.events),
            "scaled_up": directions.count("up"),
            "scaled_down": directions.count("down"),
            "blocked": directions.count("blocked"),
            "workers_end": self.counts(),
            "peak_workers": self.peak,
            "worker_s": self.worker_s,
        }

    def _holding(self) -> int:
        """Workers serving, draining or warming up (alive and placed)."""
        state = self.fleet.state
        return sum(1 for w in self.slots if self.phase[w] != _PARKED and state[w] != DEAD)

    def _tally(self) -> None:
        """Bring ``worker_s`` up to now (called before anything changes the count)."""
        now = self.queue.now_s
        self.worker_s += self._holding() * (now - self._tally_s)
        self._tally_s = now

    def _note(self, direction: str, w: int | None, reason: str) -> None:
        fleet = self.fleet
        event: dict[str, Any] = {"t_s": self.queue.now_s, "direction": direction, "worker": w}
        if w is not None:
            event["host"] = int(fleet.host[w])
            event["first_unit"] = int(fleet.first_unit[w])
        event["reason"] = reason
        self.events.append(event)
        where = "" if w is None or fleet.host[w] < 0 else f" on host {int(fleet.host[w])}"
        worker = "" if w is None else f" worker {w}"
        said = reason if self.pool is None else f"pool {self.pool}: {reason}"
        self.sim.frame_events.append(f"scale {direction} {self.spec.model}{worker}{where}: {said}")
        self.peak = max(self.peak, self._holding())

    # -- the look --------------------------------------------------------------------
    def measure(self) -> dict[str, Any]:
        """What the metric reads now: active workers, waiting requests, the load."""
        d, state = self.router, self.fleet.state
        waiting = len(d.closed) if self.pool is None or self.policy.workers_take_held else 0
        running = 0
        kv = 0.0
        active = 0
        for w in self.slots:
            if self.phase[w] != _ACTIVE or state[w] > BUSY:
                continue
            active += 1
            wk = self.workers.workers[w]
            waiting += len(wk.waiting) + len(wk.incoming)
            used, n = self.workers.worker_figures(w)
            kv += used
            running += n
        metric = self.spec.metric
        load = float(waiting) if metric == "queue" else kv if metric == "kv" else float(running)
        return {"active": active, "waiting": waiting, "load": load,
                "metric": load / active if active else None}

    def desired(self, load: float, waiting: int) -> int:
        """ceil(load / target), at least 1 while requests wait, within the bounds."""
        want = math.ceil(load / self.spec.target)
        if waiting > 0:
            want = max(want, 1)
        return min(max(want, self.spec.min_workers), self.spec.max_workers)

    def _on_look(self, _a: Any, _b: Any) -> None:
        now = self.queue.now_s
        m = self.measure()
        c = self.counts()
        wanted = self.desired(m["load"], m["waiting"])
        current = c["active"] + c["warming"]
        window = self.wanted
        window.append((now, wanted))
        while window[0][0] < now - self.spec.stabilization_s:
            window.popleft()
        desired = wanted
        if wanted < current:
            desired = min(current, max(x for _, x in window))
        action = "none"
        if desired != current:
            if now < self.last_action_s + self.spec.cooldown_s:
                action = "cooldown"
            else:
                reason = self._reason(m, desired, current)
                if desired > current:
                    action = "up" if self._scale_up(desired - current, reason) else "blocked"
                else:
                    self._scale_down(current - desired, reason)
                    action = "down"
                if action != "blocked":
                    self.last_action_s = now
        self.samples.append({
            "t_s": now, **m, "warming": c["warming"], "draining": c["draining"],
            "dead": c["dead"], "wanted": wanted, "desired": desired, "action": action,
        })
        nxt = now + self.spec.interval_s
        if nxt <= self.sim.duration_s:
            self.queue.schedule(nxt, AUTOSCALE, self)

    def _reason(self, m: dict[str, Any], desired: int, current: int) -> str:
        spec = self.spec
        if m["metric"] is None:
            read = f"{m['waiting']} waiting with no active worker"
        else:
            unit = " of the KV cache" if spec.metric == "kv" else " per worker"
            read = f"{spec.metric} {m['metric']:.3g}{unit} against a target of {spec.target:g}"
        return f"{read}: {desired} wanted, {current} serving or warming up"

    # -- scaling up ------------------------------------------------------------------
    def _scale_up(self, n: int, reason: str) -> int:
        """Place up to ``n`` new workers; how many were placed."""
        placed = 0
        for _ in range(n):
            spot = self._spot()
            if spot is None:
                size = self.sizes[self.spec.model]
                self._note("blocked", None, f"no free block of {size} adjacent units on a live host ({reason})")
                break
            w, note = self._free_slot()
            if w is None:
                self._note("blocked", None, f"all {self.spec.max_workers} slots are draining or dead ({reason})")
                break
            self._tally()
            h, first = spot
            self.fleet.place(w, h, first)
            self._warm(w)
            self.placed_at[w] = self.queue.now_s
            self._note("up", w, reason + note)
            placed += 1
        return placed

    def _warm(self, w: int) -> None:
        """``w`` loads its weights: it serves ``warmup_s`` from now."""
        self.fleet.state[w] = WARMING
        self.phase[w] = _WARMING
        self.version[w] += 1
        self.queue.schedule(self.queue.now_s + self.spec.warmup_s, WORKER_READY, w, self.version[w])

    def _free_slot(self) -> tuple[int | None, str]:
        """A parked slot (lowest first), else one whose worker died with its host."""
        fleet = self.fleet
        for w in self.slots:
            if self.phase[w] == _PARKED:
                return w, ""
        for w in self.slots:
            h = int(fleet.host[w])
            if fleet.state[w] == DEAD and h >= 0 and not fleet.host_alive[h]:
                fleet.unplace(w)
                return w, f"; replaces worker {w} lost with host {h}"
        return None, ""

    def _spot(self) -> tuple[int, int] | None:
        """(host, first unit) for one more worker of the model, or None."""
        fleet, names = self.fleet, self.sim.names
        groups: dict[int, list[int]] = {}
        for h, units in enumerate(fleet.host_units):
            if fleet.host_alive[h] and (self.hosts is None or h in self.hosts):
                groups.setdefault(units, []).append(h)
        name = self.spec.model
        for units, hosts in groups.items():
            if units < self.sizes[name]:
                continue
            slots = [
                [(names[fleet.model_list[w]], int(fleet.first_unit[w])) for w in fleet.host_workers[h]]
                for h in hosts
            ]
            result = place_incremental(units, self.sizes, slots, {name: 1})
            if result.placed:
                _, at, first = result.placed[0]
                return hosts[at], first
        return None

    def _on_ready(self, w: int, version: int) -> None:
        if version != self.version[w] or self.fleet.state[w] != WARMING:
            return  # parked or dead since
        self.workers.activate(w)
        self.phase[w] = _ACTIVE
        self._note("ready", w, f"weights loaded {self.queue.now_s - self.placed_at[w]:g} s after placement")
        p, d = self.policy, self.router
        if isinstance(p, PushPolicy):
            member = set(p.rotation) | {w}
            rotation = [x for x in d.workers if x in member]
            p.rotation_changed(rotation)
            p.rotation = rotation
            d.drain()
        else:
            p.worker_restored(w)

    # -- scaling down ----------------------------------------------------------------
    def _scale_down(self, n: int, reason: str) -> None:
        state = self.fleet.state
        warming = sorted(
            (w for w in self.slots if self.phase[w] == _WARMING and state[w] == WARMING),
            key=lambda w: (-self.placed_at[w], -w),
        )
        for w in warming[:n]:
            self._tally()
            self.version[w] += 1  # its readiness is void
            self._note("down", w, reason + "; it was still warming up")
            self._park(w)
        n -= min(n, len(warming))
        if not n:
            return
        table = self.workers.workers
        active = sorted(
            (w for w in self.slots if self.phase[w] == _ACTIVE and state[w] <= BUSY),
            key=lambda w: (len(table[w].running) + len(table[w].waiting), -w),
        )
        for w in active[:n]:
            self.phase[w] = _DRAINING
            p = self.policy
            if isinstance(p, PushPolicy):
                rotation = [x for x in p.rotation if x != w]
                if rotation != p.rotation:
                    p.rotation_changed(rotation)
                    p.rotation = rotation
            else:
                p.worker_died(w)  # out of pull's idle workers
            self._note("down", w, reason)
            if self.workers.drain(w):
                self.drained(w)

    def drained(self, w: int) -> None:
        """Draining worker ``w`` holds no request: it parks (the worker model's hook)."""
        self._tally()
        self._park(w)

    def _park(self, w: int) -> None:
        host = int(self.fleet.host[w])
        self.workers.park(w)
        self.fleet.unplace(w)
        self.phase[w] = _PARKED
        self._note("parked", w, f"units of host {host} free again")

    # -- faults ----------------------------------------------------------------------
    def kill(self, w: int) -> bool:
        """A fault kills ``w``; True if handled here (the engine does the rest if not)."""
        phase, state = self.phase[w], self.fleet.state
        if phase == _PARKED:
            return True  # on no host: nothing to kill
        self._tally()
        if phase == _WARMING:
            if state[w] == WARMING:
                state[w] = DEAD
                self.version[w] += 1
                self._note("lost", w, "died while warming up")
            return True
        if phase == _DRAINING:
            if self.workers.kill(w):
                self.router.policy.worker_died(w)
            self._park(w)
            return True
        return False

    def restore(self, w: int) -> bool:
        """A fault restores ``w``; True if handled here."""
        phase = self.phase[w]
        if phase == _PARKED:
            return True
        self._tally()
        if phase == _WARMING:
            if self.fleet.state[w] == DEAD:
                self._warm(w)
                self.placed_at[w] = self.queue.now_s
                self._note("rewarm", w, "restored: loads its weights again")
            return True
        return False


def scale_figures(autoscalers: list[Autoscaler], model: int) -> dict[str, Any]:
    """The autoscaler figures of ``model``: summed over the autoscalers of its pools
    (None for a model no autoscaler scales)."""
    mine = [a for a in autoscalers if a.model == model]
    if not mine:
        return dict.fromkeys(FRAME_KEYS)
    out = dict.fromkeys(FRAME_KEYS, 0)
    for a in mine:
        for key, value in a.frame_figures(model).items():
            out[key] += value
    return out


def _look(scaler: Autoscaler, _: Any) -> None:
    """The ``AUTOSCALE`` handler: ``scaler`` looks at its metric."""
    scaler._on_look(None, None)


def _ready(sim: Engine, w: int, version: int) -> None:
    """The ``WORKER_READY`` handler: slot ``w``'s autoscaler hears it is warm."""
    sim.scaler_of[w]._on_ready(w, version)
