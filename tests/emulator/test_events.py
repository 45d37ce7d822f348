"""The event queue: the only way to schedule, ordered by (time, the kind's priority,
scheduling order)."""

from __future__ import annotations

from typing import Any

from emulator.sim.events import ARRIVALS, FAULT, FRAME, WORKER_DONE, EventKind, EventQueue


def _recording_queue(*kinds: EventKind) -> tuple[EventQueue, list[tuple[float, str, Any]]]:
    queue = EventQueue()
    seen: list[tuple[float, str, Any]] = []
    for kind in kinds:
        queue.on(kind, lambda a, _b, kind=kind: seen.append((queue.now_s, kind.name, a)))
    return queue, seen


def test_it_runs_equal_times_by_each_kind_s_priority_then_in_scheduling_order() -> None:
    queue, seen = _recording_queue(ARRIVALS, FAULT, WORKER_DONE, FRAME)
    queue.schedule(5.0, FRAME, "frame")
    queue.schedule(5.0, WORKER_DONE, "done-1")
    queue.schedule(5.0, FAULT, "fault")
    queue.schedule(5.0, ARRIVALS, "chunk")
    queue.schedule(5.0, WORKER_DONE, "done-2")
    queue.schedule(4.0, FRAME, "early frame")
    queue.run_until(10.0)
    assert [a for _, _, a in seen] == ["early frame", "chunk", "done-1", "fault", "done-2", "frame"]
    assert queue.processed == 6


def test_it_stops_at_the_target_and_keeps_later_events() -> None:
    queue, seen = _recording_queue(FAULT)
    queue.schedule(1.0, FAULT, "a")
    queue.schedule(2.0, FAULT, "b")
    queue.run_until(1.5)
    assert [a for _, _, a in seen] == ["a"] and len(queue) == 1
    assert queue.next_time() == 2.0


def test_a_new_kind_declares_its_own_priority() -> None:
    late = EventKind("after frames", 4)
    queue, seen = _recording_queue(FRAME, late)
    queue.schedule(1.0, late, "late")
    queue.schedule(1.0, FRAME, "frame")
    queue.run_until(1.0)
    assert [a for _, _, a in seen] == ["frame", "late"]


def test_a_handler_may_take_its_next_event_inline_only_before_every_queued_one() -> None:
    queue, _ = _recording_queue(FAULT)
    queue.schedule(2.0, FAULT, "x")
    queue.target_s = 5.0
    assert queue.can_take_inline(1.9)
    assert not queue.can_take_inline(2.0)  # a tie goes through the heap, in order
    assert not queue.can_take_inline(6.0)  # beyond this advance
