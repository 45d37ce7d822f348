"""Session affinity in the routing pipeline (``dispatcher.session_affinity``): every
request of a session (a prefix group) goes to the worker that served the session
while that worker is believed alive; once a health check drops it, the session is
pinned to the policy's next choice and stays there. Checked routing by routing."""

from __future__ import annotations

from typing import Any

import pytest

from emulator.scenario.presets import load_preset
from emulator.sim.engine import Engine

KILL_AT = 20.5


def _routings(policy: str, affinity: bool, extra: list[str] | None = None) -> tuple[list[tuple[float, int, int, bool]], Any]:
    """Each routing of a 4-worker prefix-heavy-chat run at 20 QPS in which worker 0
    dies at 20.5 s: (time, session, worker, whether the session's last worker was
    believed alive then)."""
    sc = load_preset("prefix-heavy-chat", max_requests=None).with_overrides([
        "duration_s=45", "traffic.qps=20", f'dispatcher.policy="{policy}"',
        f"dispatcher.session_affinity={'true' if affinity else 'false'}",
        'faults=[{at_s = 20.5, kill = "worker:chat:0"}]', *(extra or []),
    ], max_requests=None)
    engine = Engine(sc, seed=1)
    policy_obj = engine.disp[0].policy
    store = engine.disp[0].store
    last: dict[int, int] = {}
    out: list[tuple[float, int, int, bool]] = []
    assign = policy_obj.assign

    def spy(w: int, work: Any) -> None:
        group = int(store.group[work - store.base])
        before = last.get(group)
        out.append((engine.now_s, group, w, before is not None and before in policy_obj.rotation))
        last[group] = w
        assign(w, work)

    policy_obj.assign = spy
    summary = engine.run()
    return out, (summary, policy_obj)


@pytest.mark.parametrize("policy", ["round_robin", "least_loaded", "weighted"])
def test_a_session_stays_on_its_worker_while_alive_and_re_pins_once_it_dies(policy: str) -> None:
    routings, (_, pol) = _routings(policy, True)
    assert len(routings) > 500
    worker: dict[int, int] = {}
    moved: dict[int, int] = {}
    for t, group, w, alive in routings:
        if group in worker:
            if alive:
                assert w == worker[group], (t, group)  # back to the session's worker
            else:
                assert worker[group] == 0 and w != 0 and t > KILL_AT  # its worker died: re-pinned
                moved[group] = w
        worker[group] = w
    assert moved, "some session lived on the worker that died"
    # After the health check no request went to the dead worker, and a moved session
    # stayed where it moved.
    assert not [r for r in routings if r[0] > KILL_AT + 5.0 and r[2] == 0]
    for group, w in moved.items():
        assert {r[2] for r in routings if r[1] == group and r[0] > KILL_AT + 5.0} <= {w}
    table = pol.sessions
    assert table.repinned == len(moved) and table.kept > 0 and table.pinned == len({r[1] for r in routings})


def test_without_affinity_the_sessions_scatter() -> None:
    routings, _ = _routings("round_robin", False)
    by_group: dict[int, set[int]] = {}
    for _, group, w, _ in routings:
        by_group.setdefault(group, set()).add(w)
    assert max(len(ws) for ws in by_group.values()) == 4


def test_an_idle_session_is_forgotten_after_its_ttl() -> None:
    # With a TTL shorter than the gaps between a rare session's requests, round-robin
    # picks afresh: sessions are pinned again, not kept.
    routings, (_, pol) = _routings("round_robin", True, ["dispatcher.session_ttl_s=0.5"])
    table = pol.sessions
    long = _routings("round_robin", True)[1][1].sessions
    assert table.pinned > long.pinned
    assert table.kept < long.kept


def test_a_pools_own_affinity_pins_in_that_pool_only() -> None:
    # A split fleet: affinity in the prefill pool alone; its sessions stay on their
    # prefill worker, and the decode pool routes as before.
    sc = load_preset("pd-prefix-aware", max_requests=None).with_overrides(
        ["duration_s=40", "faults=[]", 'pools.prefill.policy="least_loaded"', "pools.prefill.session_affinity=true"],
        max_requests=None)
    engine = Engine(sc, seed=1)
    routing = engine.disp[0].policy
    assert routing.prefill.sessions is not None and routing.decode.sessions is None
    sent: dict[int, set[int]] = {}
    store = engine.disp[0].store
    assign = routing.prefill.assign

    def spy(w: int, work: Any) -> None:
        sent.setdefault(int(store.group[work - store.base]), set()).add(w)
        assign(w, work)

    routing.prefill.assign = spy
    summary = engine.run()
    assert len(sent) > 20 and all(len(ws) == 1 for ws in sent.values())
    counts = summary.per_model["chat"].sessions
    assert counts["pinned"] == len(sent) and counts["kept"] > 0 and counts["repinned"] == 0
