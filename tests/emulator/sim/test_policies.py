"""Dispatch policies are pieces behind a small interface, picked from a registry by the
scenario's ``dispatcher.policy``: a new one is a class plus its registration."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from scenarios import single_model

from emulator import Engine
from emulator.scenario import ScenarioError
from emulator.sim.batch import Batch
from emulator.sim.policies import (
    POLICY_REGISTRY,
    PushPolicy,
    register_policy,
    unregister_policy,
)


class RandomPolicy(PushPolicy):
    """Push each batch to a worker drawn uniformly from those believed alive."""

    name = "random"

    def pick(self, batch: Batch) -> int:
        rotation = self.rotation
        return rotation[int(self.sim.policy_rng.integers(len(rotation)))]


@pytest.fixture
def random_policy() -> Iterator[None]:
    register_policy(RandomPolicy)
    yield
    unregister_policy("random")


def _run(policy: str, seed: int = 1, **kw: object) -> Engine:
    scenario = single_model(qps=120, workers=10, policy=policy, duration_s=60, **kw)  # type: ignore[arg-type]
    engine = Engine(scenario, seed=seed)
    engine.run()
    return engine


def test_it_runs_a_policy_defined_outside_the_emulator(random_policy: None) -> None:
    engine = _run("random")
    summary = engine.summary()
    assert summary.ok > 0.9 * summary.offered
    assert summary.balanced()
    assert all(isinstance(d.policy, RandomPolicy) for d in engine.disp)


def test_it_spreads_batches_by_the_policy_s_own_draws(random_policy: None) -> None:
    # Random pushing queues behind busy workers where pull never does: the private
    # backlog that round robin avoids at this load appears, and the runs differ.
    picks: list[int] = []
    original = RandomPolicy.pick

    def spy(self: RandomPolicy, batch: Batch) -> int:
        w = original(self, batch)
        picks.append(w)
        return w

    RandomPolicy.pick = spy  # type: ignore[method-assign]
    try:
        _run("random")
    finally:
        RandomPolicy.pick = original  # type: ignore[method-assign]
    counts = np.bincount(picks, minlength=10)
    assert len(picks) > 300 and counts.min() > 0
    # Not cyclic: some worker got two batches in a row.
    assert any(a == b for a, b in zip(picks, picks[1:], strict=False))


def test_it_is_deterministic_for_a_policy_that_draws(random_policy: None) -> None:
    first = _run("random", seed=3).summary().to_dict()
    again = _run("random", seed=3).summary().to_dict()
    other = _run("random", seed=4).summary().to_dict()
    for d in (first, again, other):
        d.pop("wall_s")
    assert first == again
    assert first != other


def test_it_names_the_registered_policies_when_the_name_is_unknown(random_policy: None) -> None:
    with pytest.raises(ScenarioError) as err:
        single_model(qps=10, workers=2, policy="fastest")
    assert str(err.value).startswith('dispatcher.policy: "fastest" is not one of')
    assert "random" in str(err.value) and "least_loaded" in str(err.value)


def test_it_refuses_a_policy_once_unregistered() -> None:
    register_policy(RandomPolicy)
    unregister_policy("random")
    assert "random" not in POLICY_REGISTRY
    with pytest.raises(ScenarioError, match="random"):
        single_model(qps=10, workers=2, policy="random")


def test_it_ships_the_three_policies_of_the_seed_review() -> None:
    assert list(POLICY_REGISTRY)[:3] == ["round_robin", "pull", "least_loaded"]
    assert POLICY_REGISTRY["pull"].health_checked is False
    assert POLICY_REGISTRY["round_robin"].health_checked is True
