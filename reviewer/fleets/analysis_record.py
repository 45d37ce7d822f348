"""The one analysis of a fleet config version, stored with it.

``analysis_record(version)`` is ``emulator.analysis.record.fleet_record`` of the
version's scenario (and of its doc's latest revision, for the doc's figures): worked
out once and stored on the version, so the numbers pass and every export read the
same figures and none parses the scenario or reruns the analysis again. A record of
an older form (``RECORD_VERSION``) is worked out again. A version never changes, so
its record never goes stale.

Working it out can take seconds and hundreds of megabytes on a large fleet, so with
``ANALYSIS_IN_BACKGROUND`` a docs worker does it (``reviewer.tasks.fleet_analysis``,
under a time and a memory limit) and the web process only reads what is stored:
:func:`stored_record` answers None while the worker works, and the page asks again.
While a worker is asked, the version's ``analysis`` holds ``{"asked_at": ...}``.

The placement pass's answer on the version's own hosts is in the record; on another
number of hosts (``placement.json?hosts=N``) :func:`stored_placement` reads it from a
:class:`~reviewer.models.PlacementAnswer` row per version and host count, worked out the
same way by ``reviewer.tasks.placement_answer``.
"""

from __future__ import annotations

import resource
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from emulator.analysis import record as emulator_record
from emulator.analysis.record import RECORD_VERSION
from emulator.scenario import Scenario, ScenarioError
from reviewer import selectors
from reviewer.models.review import FleetConfig, FleetConfigVersion, PlacementAnswer
from reviewer.runs import broker

__all__ = ["analysis_record", "latest_record", "placement_compute", "stored_placement", "stored_record"]

#: An ask no worker answered within this long (a lost task, no docs worker yet) is sent again.
ASK_AGAIN_AFTER_S = 60


def in_background() -> bool:
    """Whether records are worked out by a Celery worker (not in the asking process)."""
    return bool(getattr(settings, "ANALYSIS_IN_BACKGROUND", False)) and not getattr(
        settings, "CELERY_TASK_ALWAYS_EAGER", False)


def _is_record(stored: Any) -> bool:
    return isinstance(stored, dict) and (stored.get("version") == RECORD_VERSION or "refused" in stored)


def analysis_record(version: FleetConfigVersion) -> dict[str, Any] | None:
    """The version's record, worked out here if it is not stored (None when the
    emulator no longer accepts its scenario)."""

    if _is_record(version.analysis):
        return None if "refused" in version.analysis else version.analysis
    try:
        scenario = Scenario.from_dict(version.scenario, max_requests=None)
    except ScenarioError:
        return None
    # The doc's figures come from a doc the config's owner still sees.
    doc = selectors.linked_doc(version.config, version.config.owner)
    record = emulator_record.fleet_record(scenario, doc.body if doc is not None else None)
    FleetConfigVersion.objects.filter(pk=version.pk).update(analysis=record)
    version.analysis = record
    return record


def stored_record(version: FleetConfigVersion) -> dict[str, Any] | None:
    """The version's record as the web process may read it: worked out here only when
    records are not worked out in the background; else the stored one, or None while a
    worker works it out (asked for here if nobody has, or if the last ask went unanswered).

    A record the worker gave up on (over its time or memory limit) is
    ``{"refused": why}``; readers show ``why``.
    """
    if not in_background():
        return analysis_record(version)
    stored = version.analysis
    if _is_record(stored):
        return stored
    now = timezone.now()
    asked_at = stored.get("asked_at") if isinstance(stored, dict) else None
    if asked_at is None or asked_at < (now - timedelta(seconds=ASK_AGAIN_AFTER_S)).isoformat():
        FleetConfigVersion.objects.filter(pk=version.pk).update(analysis={"asked_at": now.isoformat()})
        _send_task(version.pk)
    return None


def _send_task(version_id: int) -> None:
    """Hand the work to a docs worker once the ask is committed, off the request path."""
    broker.send_task_after_commit("fleet_analysis", [version_id], f"the analysis of fleet version {version_id}",
                                  f"the page's next ask after {ASK_AGAIN_AFTER_S} s")


@contextmanager
def memory_limit(megabytes: int) -> Iterator[None]:
    """At most ``megabytes`` more address space for this process while inside (MemoryError beyond)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as statm:
        used = int(statm.read().split()[0]) * resource.getpagesize()
    limit = used + megabytes * 1024 * 1024
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def analysis_compute(*, version_id: int) -> dict[str, Any] | None:
    """Work the version's record out in a worker, within ``ANALYSIS_MEMORY_LIMIT_MB``; a
    fleet over the limit is stored as ``{"refused": why}`` so the page stops waiting."""
    version = FleetConfigVersion.objects.select_related("config__doc").get(pk=version_id)
    try:
        with memory_limit(settings.ANALYSIS_MEMORY_LIMIT_MB):
            return analysis_record(version)
    except MemoryError:
        _refuse(version_id, f"the analysis of this fleet needs more than "
                            f"{settings.ANALYSIS_MEMORY_LIMIT_MB} MB; use fewer hosts or units")
        return None


def analysis_refuse_slow(*, version_id: int, limit_s: float) -> None:
    """Store that the analysis took over its time limit, so the page stops waiting."""
    _refuse(version_id, f"the analysis of this fleet took over {limit_s:.0f} s; use fewer hosts or units")


def _refuse(version_id: int, why: str) -> None:
    FleetConfigVersion.objects.filter(pk=version_id).update(analysis={"refused": why})


def latest_record(config: FleetConfig | None) -> dict[str, Any] | None:
    """The record of a config's latest version (None without one, or while it is worked out)."""
    if config is None:
        return None
    version = config.latest_version()
    if version is None:
        return None
    record = stored_record(version)
    return None if record is None or "refused" in record else record


def stored_placement(version: FleetConfigVersion, hosts: int | None = None) -> dict[str, Any] | None:
    """The placement pass's answer for the version, on ``hosts`` hosts of its size (None:
    the version's own), as the web process may read it: the solver's answer,
    ``{"error": why}`` when the puzzle does not apply, ``{"refused": why}`` over the
    limits, or None while a worker works it out (asked for here as :func:`stored_record`
    asks). The host count is bounded by the caller, so a version has few such answers.
    """
    if hosts is None:
        record = stored_record(version)
        if record is None or "refused" in record:
            return record
        return record["placement_answer"]
    if not in_background():
        return placement_answer_for(version, hosts)
    row, _ = PlacementAnswer.objects.get_or_create(version=version, hosts=hosts)
    if row.answer is not None:
        return row.answer
    now = timezone.now()
    if row.asked_at is None or row.asked_at < now - timedelta(seconds=ASK_AGAIN_AFTER_S):
        PlacementAnswer.objects.filter(pk=row.pk).update(asked_at=now)
        broker.send_task_after_commit("placement_answer", [version.pk, hosts],
                                      f"the placement of fleet version {version.pk} on {hosts} hosts",
                                      f"the page's next ask after {ASK_AGAIN_AFTER_S} s")
    return None


def placement_answer_for(version: FleetConfigVersion, hosts: int) -> dict[str, Any]:
    """The version's placement answer on ``hosts`` hosts, worked out here if it is not stored."""
    row = PlacementAnswer.objects.filter(version=version, hosts=hosts).first()
    if row is not None and row.answer is not None:
        return row.answer
    try:
        answer = emulator_record.placement_answer(Scenario.from_dict(version.scenario, max_requests=None), hosts)
    except ScenarioError as exc:
        answer = {"error": str(exc)}
    _store_placement(version.pk, hosts, answer)
    return answer


def _store_placement(version_id: int, hosts: int, answer: dict[str, Any]) -> None:
    PlacementAnswer.objects.update_or_create(version_id=version_id, hosts=hosts, defaults={"answer": answer})


def placement_compute(*, version_id: int, hosts: int) -> dict[str, Any]:
    """Work the version's placement on ``hosts`` hosts out in a worker, within
    ``ANALYSIS_MEMORY_LIMIT_MB``; over it, ``{"refused": why}`` is stored."""
    version = FleetConfigVersion.objects.get(pk=version_id)
    try:
        with memory_limit(settings.ANALYSIS_MEMORY_LIMIT_MB):
            return placement_answer_for(version, hosts)
    except MemoryError:
        refused = {"refused": f"the placement of this fleet on {hosts} hosts needs more than "
                              f"{settings.ANALYSIS_MEMORY_LIMIT_MB} MB; ask about fewer hosts"}
        _store_placement(version_id, hosts, refused)
        return refused


def placement_refuse_slow(*, version_id: int, hosts: int, limit_s: float) -> None:
    """Store that the placement on ``hosts`` hosts took over its time limit, so the page stops waiting."""
    _store_placement(version_id, hosts, {"refused": f"the placement of this fleet on {hosts} hosts took over "
                                                   f"{limit_s:.0f} s; ask about fewer hosts"})
