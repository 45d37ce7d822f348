"""Which shared prompt prefix each request carries (``[models.NAME.prefixes]``).

A model with prefixes gives each fresh request one of its ``groups`` prefixes, group k
(k = 1 .. groups) with probability proportional to 1 / k^zipf_s, and the request's
first ``prefix_tokens`` prompt tokens are that group's (all of its prompt when the
prompt is shorter). The groups are drawn from a random stream of their own, and only
for models with prefixes, so a scenario without prefixes draws exactly what it drew
before. A re-sent request keeps its prefix; a trace row that names its prefix keeps it,
and trace prefixes are numbered apart from the drawn groups.
"""

from __future__ import annotations

import numpy as np

from emulator.scenario import Scenario

#: A request without a shared prefix.
NO_GROUP = -1


class PrefixDraw:
    """Draws the prefix group of fresh requests, model by model."""

    def __init__(self, scenario: Scenario, rng: np.random.Generator, first_group: int = 0) -> None:
        self.rng = rng
        self.cum: list[np.ndarray | None] = []
        self.tokens: list[int] = []
        #: Drawn groups are numbered from here (trace prefixes take the numbers below).
        self.first_group = first_group
        for m in scenario.models.values():
            p = m.prefixes
            if p is None:
                self.cum.append(None)
                self.tokens.append(0)
                continue
            weights = np.arange(1, p.groups + 1, dtype=np.float64) ** -p.zipf_s
            cum = np.cumsum(weights)
            self.cum.append(cum / cum[-1])
            self.tokens.append(p.prefix_tokens)
        self.any = any(c is not None for c in self.cum)

    def draw(self, model: np.ndarray, prompt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Groups and prefix tokens of fresh requests of ``model`` (indexes) with these
        prompts; ``NO_GROUP`` and 0 for models without prefixes."""
        n = model.size
        group = np.full(n, NO_GROUP, dtype=np.int64)
        tokens = np.zeros(n, dtype=np.int64)
        if not n:
            return group, tokens
        for m, cum in enumerate(self.cum):
            if cum is None:
                continue
            mine = np.flatnonzero(model == m)
            if not mine.size:
                continue
            k = np.searchsorted(cum, self.rng.random(mine.size), side="right")
            group[mine] = self.first_group + np.minimum(k, cum.size - 1)
            tokens[mine] = np.minimum(self.tokens[m], prompt[mine])
        return group, tokens
