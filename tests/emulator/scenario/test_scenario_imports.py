"""The scenario layer stands below the simulation layer: nothing under
``emulator/scenario/`` imports ``emulator.sim``, at the top of a module, inside a
function or under ``if TYPE_CHECKING``. The names and traits it validates by come
from its own catalog, which ``emulator.sim`` registers into."""

from __future__ import annotations

from pathlib import Path

from import_graph import import_edges, within

from emulator.scenario import catalog
from emulator.scenario.presets import load_preset
from emulator.sim.policies import POLICY_REGISTRY
from emulator.sim.workers import WORKER_MODELS

ROOT = Path(__file__).resolve().parents[3]


def test_the_scenario_layer_imports_nothing_from_the_simulation_layer() -> None:
    edges = import_edges(ROOT, "emulator")
    assert any(within(e.source, "emulator.scenario") for e in edges)  # it read the layer
    upward = [
        str(e) for e in edges
        if within(e.source, "emulator.scenario") and within(e.target, "emulator.sim")
    ]
    assert upward == []


def test_the_reader_would_see_an_import_of_the_simulation_layer_inside_a_function(
    tmp_path: Path,
) -> None:
    layer = tmp_path / "emulator" / "scenario"
    (tmp_path / "emulator" / "sim").mkdir(parents=True)
    layer.mkdir()
    for init in (tmp_path / "emulator", layer, tmp_path / "emulator" / "sim"):
        (init / "__init__.py").write_text("")
    (tmp_path / "emulator" / "sim" / "policies.py").write_text("NAMES = ()\n")
    (layer / "checks.py").write_text("def names():\n    from emulator.sim.policies import NAMES\n    return NAMES\n")
    edges = import_edges(tmp_path, "emulator")
    assert [(e.target, e.in_function) for e in edges if within(e.target, "emulator.sim")] == [
        ("emulator.sim.policies", True)
    ]


def test_the_catalog_holds_every_registered_policy_and_worker_model_with_its_traits() -> None:
    assert catalog.policy_names() == tuple(POLICY_REGISTRY)
    assert catalog.worker_model_names() == tuple(WORKER_MODELS)
    for name, cls in POLICY_REGISTRY.items():
        entry = catalog.POLICIES[name]
        assert entry.needs_prefix_caches == cls.needs_prefix_caches
        assert entry.routes_in_pools == cls.routes_in_pools
        assert entry.uses_scorers == cls.uses_scorers
        assert entry.holds_requests == cls.workers_take_held
    assert catalog.policies_with("needs_prefix_caches") == ("prefix_aware", "weighted")
    assert catalog.policies_with("routes_in_pools") == ("round_robin", "least_loaded", "prefix_aware", "weighted")
    assert catalog.policies_with("holds_requests") == ("pull",)
    assert catalog.policies_with("uses_scorers") == ("weighted",)
    assert catalog.WORKER_MODELS["continuous"].token_level
    assert not catalog.WORKER_MODELS["static"].token_level


def test_a_policy_registered_by_the_simulation_layer_is_one_the_scenario_accepts() -> None:
    from emulator.sim.policies import register_policy, unregister_policy
    from emulator.sim.policies.round_robin import RoundRobin

    class Shuffle(RoundRobin):
        name = "shuffle"

    register_policy(Shuffle)
    try:
        sc = load_preset("continuous-comfortable").with_overrides(['dispatcher.policy="shuffle"'])
        assert sc.dispatcher.policy == "shuffle"
        assert "shuffle" in catalog.policies_with("routes_in_pools")
    finally:
        unregister_policy("shuffle")
    assert "shuffle" not in catalog.policy_names()
