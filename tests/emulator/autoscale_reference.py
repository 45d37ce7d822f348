"""A step-by-step model of the autoscaler's decisions, written apart from the engine.

It reads only the load the engine measured at each look (``t_s``, ``load``,
``waiting``) and works out everything else on its own, look by look: how many
workers are active and warming up (from the workers it started with, its own
scale-ups and their warm-ups, its own scale-downs), the desired count, whether the
cooldown allows an action, and how many workers go up or down. It assumes what the
agreement tests arrange: room on the hosts for every scale-up and no faults.

The rules, as the docs state them:

* wanted = ceil(load / target), at least 1 if any request waits, then clamped to
  [min_workers, max_workers]; desired = wanted, except that below the current count
  it is the largest wanted at the looks of the last stabilization_s (never above
  the current count);
* current = active + warming; a worker placed at t serves from t + warmup_s on (a
  look at that same instant already counts it active);
* an action (up or down) needs the last action to be at least cooldown_s back;
* a scale-down takes the workers still warming first, newest first, then active ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Look:
    """What the model says about one look."""

    t_s: float
    active: int
    warming: int
    wanted: int
    desired: int
    action: str  # none | cooldown | up | down
    up: int = 0
    down: int = 0


@dataclass
class ReferenceAutoscaler:
    """The decision sequence for one autoscaled model."""

    target: float
    min_workers: int
    max_workers: int
    warmup_s: float
    cooldown_s: float
    stabilization_s: float
    initial: int
    looks: list[Look] = field(default_factory=list)

    @classmethod
    def of(cls, spec: Any, initial: int) -> ReferenceAutoscaler:
        """From an ``AutoscalerSpec`` and the workers the hosts start with."""
        return cls(
            target=spec.target,
            min_workers=spec.min_workers,
            max_workers=spec.max_workers,
            warmup_s=spec.warmup_s,
            cooldown_s=spec.cooldown_s,
            stabilization_s=spec.stabilization_s,
            initial=initial,
        )

    def run(self, samples: list[dict[str, Any]]) -> list[Look]:
        """Decide at every look, in order."""
        active = self.initial
        warming: list[float] = []  # ready times of the workers warming up, in placement order
        last_action = -math.inf
        history: list[tuple[float, int]] = []
        for s in samples:
            t = s["t_s"]
            ready = [r for r in warming if r <= t]
            active += len(ready)
            warming = [r for r in warming if r > t]
            want = math.ceil(s["load"] / self.target)
            if s["waiting"] > 0 and want < 1:
                want = 1
            wanted = max(self.min_workers, min(self.max_workers, want))
            history.append((t, wanted))
            current = active + len(warming)
            desired = wanted
            if wanted < current:
                recent = [x for when, x in history if when >= t - self.stabilization_s]
                desired = min(current, max(recent))
            look = Look(t, active, len(warming), wanted, desired, "none")
            if desired != current:
                if t < last_action + self.cooldown_s:
                    look.action = "cooldown"
                elif desired > current:
                    look.action, look.up = "up", desired - current
                    warming += [t + self.warmup_s] * look.up
                    last_action = t
                else:
                    look.action, look.down = "down", current - desired
                    cut = min(look.down, len(warming))
                    warming = warming[: len(warming) - cut]  # the newest warm-ups go first
                    active -= look.down - cut
                    last_action = t
            self.looks.append(look)
        return self.looks
