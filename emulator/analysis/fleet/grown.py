"""An autoscaled fleet at the top of its range: every autoscaler's ``max_workers``
placed on the free units it may use (``[autoscaler]``: any host; ``[pools.NAME.autoscaler]``:
its pool's hosts), by the incremental placer the autoscaler itself uses.

The analysis reads a pool's capacity at this layout, and the capacity benchmark runs
the same layout with the autoscalers removed, so prediction and measurement stand on
one fleet.
"""

from __future__ import annotations

from emulator.analysis.placement.fragment import place_incremental
from emulator.scenario import Scenario

#: One host's workers as (model, first unit).
Slots = list[tuple[str, int]]


def grown_hosts(scenario: Scenario, pools_only: bool = False) -> tuple[list[Slots], list[str]]:
    """Every expanded host's workers once each autoscaler has grown its model (or
    pool) to ``max_workers`` where units allow, and a note per autoscaler on what it
    added. ``pools_only`` grows only the pools' autoscalers."""
    sizes = {n: m.worker_units for n, m in scenario.models.items()}
    groups = [g for g in scenario.hosts for _ in range(g.count)]
    expanded = scenario.expanded_hosts()
    hosts: list[Slots] = [[(s.model, s.first_unit) for s in slots] for _, _, slots in expanded]
    units = [u for _, u, _ in expanded]
    notes = []
    for pool, spec in scenario.autoscalers():
        if pools_only and pool is None:
            continue
        mine = [h for h in range(len(hosts)) if pool is None or groups[h].pool == pool]
        have = sum(1 for h in mine for m, _ in hosts[h] if m == spec.model)
        extra = spec.max_workers - have
        added = 0
        # Hosts of one size at a time: the placer packs hosts of equal units.
        for size in dict.fromkeys(units[h] for h in mine):
            if added >= extra:
                break
            same = [h for h in mine if units[h] == size]
            placed = place_incremental(size, sizes, [hosts[h] for h in same], {spec.model: extra - added})
            for h, slots in zip(same, placed.hosts, strict=True):
                hosts[h] = list(slots)
            added += len(placed.placed)
        where = f"[pools.{pool}.autoscaler]" if pool is not None else "[autoscaler]"
        # Validation keeps max_workers within what the hosts can place.
        assert added == max(extra, 0), f"{where} max_workers beyond its hosts"
        notes.append(f"{where} replaced by its max_workers = {spec.max_workers} placed")
    return hosts, notes
