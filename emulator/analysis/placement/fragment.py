"""Fragmentation of hosts that already carry workers, and an incremental placer.

A host can have enough free units for a large worker and still not take one,
because the free units are split into blocks too short for it (two small
workers at offsets 1 and 6 leave no 5-unit block on a 10-unit host). These
functions measure that, and place new workers so that it happens as little as
possible: large workers first at low offsets, small ones packed at the far end
of the block they cut, choosing the spot that costs the fewest future large
workers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from emulator.analysis.placement import PlacementError

Slot = tuple[str, int]  # (worker type, first unit)

__all__ = [
    "FleetFragmentation",
    "HostFragmentation",
    "IncrementalPlacement",
    "fleet_fragmentation",
    "free_blocks",
    "host_fragmentation",
    "parse_slots",
    "place_incremental",
]


def parse_slots(text: str, *, field_name: str = "host") -> list[Slot]:
    """Parse "big@0,small@5" into slots; an empty string is an empty host."""
    slots: list[Slot] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, first = part.partition("@")
        if not sep or not name or not first.strip().isdigit():
            raise PlacementError(f"{field_name}: {part!r} should look like MODEL@FIRST_UNIT, e.g. big@0")
        slots.append((name.strip(), int(first)))
    return slots


def _occupied(units: int, sizes: Mapping[str, int], slots: Sequence[Slot], field_name: str) -> list[bool]:
    if units < 1:
        raise PlacementError(f"units: {units} must be at least 1")
    cells = [False] * units
    for name, first in slots:
        if name not in sizes:
            known = ", ".join(sizes)
            raise PlacementError(f"{field_name}: unknown model {name!r}; worker types are {known}")
        end = first + sizes[name]
        if first < 0 or end > units:
            raise PlacementError(
                f"{field_name}: \"{name}@{first}\" needs units {first}-{end - 1} but the host has {units} units"
            )
        for unit in range(first, end):
            if cells[unit]:
                raise PlacementError(f"{field_name}: \"{name}@{first}\" overlaps another worker at unit {unit}")
            cells[unit] = True
    return cells


def free_blocks(units: int, sizes: Mapping[str, int], slots: Sequence[Slot], *, field_name: str = "host") -> list[tuple[int, int]]:
    """Maximal runs of free units as (first unit, length), in unit order."""
    cells = _occupied(units, sizes, slots, field_name)
    blocks = []
    start = None
    for unit, busy in enumerate([*cells, True]):
        if not busy and start is None:
            start = unit
        elif busy and start is not None:
            blocks.append((start, unit - start))
            start = None
    return blocks


def _fits(blocks: Sequence[tuple[int, int]], size: int) -> int:
    return sum(length // size for _, length in blocks)


@dataclass(frozen=True)
class HostFragmentation:
    """Free space on one host and what still fits in it."""

    free_units: int
    largest_free_block: int
    blocks: tuple[tuple[int, int], ...]
    still_fit: dict[str, int]  # more workers of this type alone that fit in the free blocks
    fit_if_compact: dict[str, int]  # the same if the free units were one block

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "free_units": self.free_units,
            "largest_free_block": self.largest_free_block,
            "blocks": [{"first_unit": f, "units": n} for f, n in self.blocks],
            "types_that_fit": [n for n, k in self.still_fit.items() if k > 0],
            "still_fit": dict(self.still_fit),
            "fit_if_compact": dict(self.fit_if_compact),
        }


def host_fragmentation(units: int, sizes: Mapping[str, int], slots: Sequence[Slot], *, field_name: str = "host") -> HostFragmentation:
    """Largest free block of a host with workers at given offsets, and which types still fit."""
    blocks = free_blocks(units, sizes, slots, field_name=field_name)
    free = sum(n for _, n in blocks)
    return HostFragmentation(
        free_units=free,
        largest_free_block=max((n for _, n in blocks), default=0),
        blocks=tuple(blocks),
        still_fit={name: _fits(blocks, size) for name, size in sizes.items()},
        fit_if_compact={name: free // size for name, size in sizes.items()},
    )


@dataclass(frozen=True)
class FleetFragmentation:
    """Per-host fragmentation and the large workers the fleet can no longer take."""

    hosts: tuple[HostFragmentation, ...]
    large: str
    large_fit: int
    large_fit_if_compact: int

    @property
    def large_lost(self) -> int:
        """Large workers the free units could hold if contiguous, but cannot as they lie."""
        return self.large_fit_if_compact - self.large_fit

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "hosts": [h.to_dict() for h in self.hosts],
            "large": self.large,
            "large_fit": self.large_fit,
            "large_fit_if_compact": self.large_fit_if_compact,
            "large_lost": self.large_lost,
        }


def _largest_type(sizes: Mapping[str, int]) -> str:
    return max(sizes, key=lambda n: (sizes[n], -list(sizes).index(n)))


def fleet_fragmentation(units: int, sizes: Mapping[str, int], hosts: Sequence[Sequence[Slot]]) -> FleetFragmentation:
    """Fragmentation of every host, and how many future large workers the fleet has lost to it."""
    if not sizes:
        raise PlacementError("workers: give at least one worker type, e.g. big=5")
    per_host = tuple(
        host_fragmentation(units, sizes, slots, field_name=f"hosts[{i}]") for i, slots in enumerate(hosts)
    )
    large = _largest_type(sizes)
    return FleetFragmentation(
        hosts=per_host,
        large=large,
        large_fit=sum(h.still_fit[large] for h in per_host),
        large_fit_if_compact=sum(h.fit_if_compact[large] for h in per_host),
    )


@dataclass(frozen=True)
class IncrementalPlacement:
    """Where an incremental placement put each new worker, and what did not fit."""

    hosts: tuple[tuple[Slot, ...], ...]
    placed: tuple[tuple[str, int, int], ...]  # (type, host, first unit), in placement order
    unplaced: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "hosts": [[f"{n}@{u}" for n, u in sorted(slots, key=lambda s: s[1])] for slots in self.hosts],
            "placed": [{"model": n, "host": h, "first_unit": u} for n, h, u in self.placed],
            "unplaced": dict(self.unplaced),
        }


def place_incremental(
    units: int,
    sizes: Mapping[str, int],
    hosts: Sequence[Sequence[Slot]],
    add: Mapping[str, int],
) -> IncrementalPlacement:
    """Add ``add`` workers (count per type) to hosts that may already carry some.

    Large workers go first. Each worker takes the spot that (1) costs the fewest
    future large workers, then (2) cuts the shortest free block (best fit), then
    (3) for the largest type the lowest offset, for smaller types the far end of
    the block, away from where large workers start, then (4) the lowest host.
    """
    for name, count in add.items():
        if name not in sizes:
            raise PlacementError(f"add: unknown model {name!r}; worker types are {', '.join(sizes)}")
        if count < 0:
            raise PlacementError(f"add.{name}: {count} must not be negative")
    large = _largest_type(sizes)
    large_size = sizes[large]
    current = [list(slots) for slots in hosts]
    blocks = [free_blocks(units, sizes, slots, field_name=f"hosts[{i}]") for i, slots in enumerate(current)]
    order = sorted(add, key=lambda n: (-sizes[n], list(sizes).index(n)))
    placed: list[tuple[str, int, int]] = []
    unplaced: dict[str, int] = {}
    for name in order:
        size = sizes[name]
        for _ in range(add[name]):
            best: tuple[tuple[int, ...], int, int] | None = None
            for h, host_blocks in enumerate(blocks):
                before = _fits(host_blocks, large_size)
                for b_index, (start, length) in enumerate(host_blocks):
                    if length < size:
                        continue
                    for first in range(start, start + length - size + 1):
                        rest = [*host_blocks[:b_index], (start, first - start),
                                (first + size, start + length - first - size), *host_blocks[b_index + 1:]]
                        cost = before - _fits(rest, large_size)
                        side = first if name == large else start + length - (first + size)
                        score = (cost, length, side, h)
                        if best is None or score < best[0]:
                            best = (score, h, first)
            if best is None:
                unplaced[name] = unplaced.get(name, 0) + 1
                continue
            _, h, first = best
            current[h].append((name, first))
            blocks[h] = free_blocks(units, sizes, current[h])
            placed.append((name, h, first))
    return IncrementalPlacement(tuple(tuple(s) for s in current), tuple(placed), unplaced)
