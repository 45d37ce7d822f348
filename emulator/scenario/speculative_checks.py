"""Checks of the speculative-decoding keys: ``[worker.speculative]`` (and a model's
``[models.NAME.worker.speculative]``).

Each raises ``ScenarioError`` with the key path and the fix, like ``checks``; that
module calls ``worker_keys`` while it reads a worker table and ``check`` for each
model's resolved worker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emulator.scenario.errors import ScenarioError
from emulator.scenario.specs import SpeculativeSpec

if TYPE_CHECKING:
    from collections.abc import Callable

    from emulator.scenario.checks import _Table
    from emulator.scenario.specs import WorkerSpec

#: The labels ``method`` takes: what proposes the draft tokens (a separate small model,
#: an EAGLE-style head on the target's features, the model's own multi-token
#: prediction layers). The label sets no cost.
METHODS = ("draft", "eagle", "mtp")
#: More drafted tokens a step than this is a mistake in the file: at any acceptance
#: rate below 1 the expected gain of the last ones is nil.
MAX_DRAFT_TOKENS = 16
_KEYS = tuple(SpeculativeSpec.__dataclass_fields__)
_EXAMPLE = 'method = "eagle", draft_tokens = 3, acceptance_rate = 0.7, draft_step_s = 0.001'


def worker_keys(t: _Table, base: WorkerSpec) -> dict[str, Any]:
    """``speculative`` of a worker table: a table, or ``false`` for none (so that
    ``--set worker.speculative=false`` turns a file's speculation off)."""
    if not t.has("speculative"):
        return {"speculative": base.speculative}
    raw = t.raw("speculative")
    if raw is False:
        return {"speculative": None}
    return {"speculative": speculative(raw, t.key("speculative"))}


def speculative(raw: Any, path: str) -> SpeculativeSpec:
    """``[worker.speculative]``: method, draft_tokens, acceptance_rate and the draft's
    cost a pass."""
    # cycle: checks imports this module at load time
    from emulator.scenario.checks import _Table

    if not isinstance(raw, dict):
        raise ScenarioError(path, "must be a table (or false for none)", f"write {_EXAMPLE}")
    t = _Table(raw, path, _KEYS)
    k = t.integer("draft_tokens", low=1)
    if k > MAX_DRAFT_TOKENS:
        raise ScenarioError(
            t.key("draft_tokens"), f"{k} is more than {MAX_DRAFT_TOKENS} drafted tokens a step",
            "use 1 to 8 (engines draft 2 to 5 tokens a step)",
        )
    alpha = t.number("acceptance_rate", low=0.0)
    if alpha >= 1:
        raise ScenarioError(
            t.key("acceptance_rate"), f"{alpha:g} would accept every drafted token",
            "give the chance that one drafted token is accepted, below 1 (e.g. 0.7)",
        )
    return SpeculativeSpec(
        method=t.choice("method", METHODS, "draft"),
        draft_tokens=k,
        acceptance_rate=alpha,
        draft_step_s=t.number("draft_step_s", 0.0, low=0.0),
        draft_seq_s=t.number("draft_seq_s", 0.0, low=0.0),
    )


def check(w: WorkerSpec, key: Callable[[str], str]) -> None:
    """A continuous worker's speculation: a step model that can cost the verification
    pass, and a step budget that holds k + 1 tokens for every running sequence."""
    sp = w.speculative
    if sp is None:
        return
    if w.step_model == "table":
        raise ScenarioError(
            key("speculative"),
            "a step-time table gives decode steps of one token per sequence, not verification passes",
            'use step_model = "linear" or "roofline" with speculative, or remove speculative',
        )
    need = w.max_num_seqs * (sp.draft_tokens + 1)
    if w.max_batched_tokens < need:
        raise ScenarioError(
            key("max_batched_tokens"),
            f"{w.max_batched_tokens:,} cannot hold a verification step of max_num_seqs "
            f"({w.max_num_seqs}) x (draft_tokens + 1) = {need:,} tokens",
            f"use at least {need:,}, or lower max_num_seqs or speculative.draft_tokens",
        )


def check_static(w: WorkerSpec, where: str) -> None:
    """Speculation runs in continuous batching's decode steps only."""
    if w.speculative is not None:
        raise ScenarioError(
            f"{where}.speculative", "applies to continuous batching, but this model batches statically",
            'set batching = "continuous" for it, or remove speculative',
        )
