"""The event queue: the only way to schedule, ordered by (time, the kind's priority,
scheduling order)."""

from __future__ import annotations

from typing import Any

import pytest

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


def _run_mixed(use_lane: bool) -> list[tuple[float, str, Any]]:
    """Completions at now + 0.5 (ties included) scheduled from handlers, interleaved
    with heap events of lower, equal and higher priority at the same instants; through
    the lane or, with ``use_lane`` false, all through the heap."""
    queue, seen = _recording_queue(ARRIVALS, FAULT, FRAME)
    done = queue.fifo_scheduler(WORKER_DONE) if use_lane else queue.scheduler(WORKER_DONE)
    assert queue.lane_kind is (WORKER_DONE if use_lane else None)

    def on_done(a: Any, _b: Any) -> None:
        seen.append((queue.now_s, WORKER_DONE.name, a))
        if a < 40:
            done(queue.now_s + 0.5, a + 10, None)  # equal times: a tie broken by seq
            done(queue.now_s + 0.5, a + 11, None)

    queue.on(WORKER_DONE, on_done)
    done(0.5, 0, None)
    done(0.5, 1, None)
    for i in range(12):
        t = 0.25 * i
        queue.schedule(t, FAULT, f"fault {t}")  # same priority as completions
        queue.schedule(t, ARRIVALS, f"chunk {t}")  # before them
        queue.schedule(t, FRAME, f"frame {t}")  # after them
    queue.run_until(1.4)
    assert queue.next_time() == 1.5
    queue.run_until(100.0)
    assert len(queue) == 0 and queue.next_time() == float("inf")
    return seen


def test_the_lane_runs_its_events_in_exactly_the_heap_s_order_ties_included() -> None:
    through_lane = _run_mixed(use_lane=True)
    assert through_lane == _run_mixed(use_lane=False)
    assert len(through_lane) > 36 + 2


def test_peeks_and_inline_takes_see_the_lane() -> None:
    queue, seen = _recording_queue(FAULT, WORKER_DONE)
    done = queue.fifo_scheduler(WORKER_DONE)
    done(2.0, "done", None)
    assert len(queue) == 1 and queue.next_time() == 2.0
    queue.schedule(3.0, FAULT, "fault")
    assert len(queue) == 2 and queue.next_time() == 2.0
    queue.target_s = 5.0
    assert queue.can_take_inline(1.9)
    assert not queue.can_take_inline(2.0)  # a tie with the lane's head goes through the queue
    queue.run_until(2.5)
    assert seen == [(2.0, "worker done", "done")] and queue.next_time() == 3.0
    done(2.5, "again", None)
    assert queue.next_time() == 2.5 and not queue.can_take_inline(2.7)


def test_the_lane_refuses_a_time_before_its_last_and_has_one_owner() -> None:
    queue, _ = _recording_queue(FAULT, WORKER_DONE)
    done = queue.fifo_scheduler(WORKER_DONE)
    done(2.0, "a", None)
    done(2.0, "b", None)  # an equal time is in order
    with pytest.raises(ValueError, match="earlier than the one before"):
        done(1.0, "c", None)
    assert len(queue) == 2
    # A second part gets the heap, which takes any order.
    other = queue.fifo_scheduler(FAULT)
    other(3.0, "late", None)
    other(1.0, "early", None)
    assert queue.lane_kind is WORKER_DONE and len(queue.heap) == 2 and queue.next_time() == 1.0
