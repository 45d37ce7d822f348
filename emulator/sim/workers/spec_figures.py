"""Speculative decoding's figures in a run of the continuous worker model: how many of
a model's output tokens came from verification steps (decode-only steps, which draft
and verify) and how many from the plain tokens of the steps that prefill, per frame and
over the run.

A verification step gives each decoder tau tokens on average, spread one a token-step
(``step_cost.decode_line``); a step that prefills gives each decoder one. So over any
span the mean tokens a decoder gets a step of either kind is

    (verified + plain) / (verified / tau + plain)

which is tau when every decode step verifies and falls toward 1 as prompts take more
of the steps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from emulator.scenario import Scenario

#: The per-model frame figures of a fleet whose models speculate: the share of the
#: frame's decode tokens given in verification steps, the mean tokens a decoder got a
#: step, and the configured tau it stands against.
SPEC_FRAME_KEYS = ("verified_token_share", "tokens_per_decode_step", "verification_step_tokens")


class SpecFigures:
    """Per-model counts of decode tokens by the kind of step that gave them."""

    def __init__(self, scenario: Scenario) -> None:
        names = list(scenario.models)
        specs = [scenario.worker_for(n).speculative for n in names]
        #: tau of each model's speculation (0: the model does not speculate).
        self.tau = [sp.tokens_per_step if sp is not None else 0.0 for sp in specs]
        self.on = any(self.tau)
        self.verified = [0] * len(names)  # decode tokens given in verification steps
        self.plain = [0] * len(names)  # decode tokens given in steps that prefill
        self._mark = [(0, 0)] * len(names)

    def figures(self, model: int, verified: int) -> dict[str, Any]:
        """The frame's figures of ``model`` (``verified``: its count now, stretches in
        progress included)."""
        v0, p0 = self._mark[model]
        plain = self.plain[model]
        self._mark[model] = (verified, plain)
        tau = self.tau[model]
        return {**_figures(verified - v0, plain - p0, tau), "verification_step_tokens": tau or None}

    def summary(self, model: int) -> dict[str, Any]:
        """``model``'s figures over the run (``Outcomes.speculative``; empty if it does
        not speculate)."""
        tau = self.tau[model]
        if not tau:
            return {}
        verified, plain = self.verified[model], self.plain[model]
        return {"tokens_per_step": tau, "verified_tokens": verified, "plain_tokens": plain,
                **_figures(verified, plain, tau)}


def _figures(verified: int, plain: int, tau: float) -> dict[str, Any]:
    total = verified + plain
    if not total or not tau:
        return {"verified_token_share": None, "tokens_per_decode_step": None}
    return {"verified_token_share": verified / total,
            "tokens_per_decode_step": total / (verified / tau + plain)}
