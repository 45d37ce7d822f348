"""The break pass's measured advice for a fleet config version.

Which dispatch policies give identical runs on the fleet config, and the
comparison whose run differs with the measured difference
(``reviewer.fleets.scenario_view.measured_comparison``). Working it out runs the
scenario a few times (seconds of CPU), so it is done once per version and
stored on it, and, with ``BREAK_ADVICE_IN_BACKGROUND``, by a worker of the
``docs`` queue: the web process, which answers everyone, never spends those
seconds. Until the worker is done the page asks again.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from emulator.sim.policies import POLICY_REGISTRY
from reviewer.fleets.analysis_record import analysis_record
from reviewer.fleets.scenario_view import measured_comparison
from reviewer.models.review import FleetConfigVersion
from reviewer.runs import broker

#: An ask no worker answered within this long (a lost task, no docs worker yet) is sent again.
ASK_AGAIN_AFTER_S = 60


def in_background() -> bool:
    """Whether the advice is worked out by a Celery worker (not in the asking process)."""
    return bool(settings.BREAK_ADVICE_IN_BACKGROUND) and not getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False)


def break_advice(version: FleetConfigVersion) -> dict[str, Any] | None:
    """The version's advice; None while a worker works it out (asked for here if nobody
    has, or if the last ask went unanswered for ``ASK_AGAIN_AFTER_S``)."""
    if version.break_advice is not None:
        return version.break_advice
    if not in_background():
        return break_advice_compute(version_id=version.pk)
    now = timezone.now()
    stale = now - timedelta(seconds=ASK_AGAIN_AFTER_S)
    asked = (
        FleetConfigVersion.objects.filter(pk=version.pk, break_advice__isnull=True)
        .filter(Q(break_advice_asked_at__isnull=True) | Q(break_advice_asked_at__lt=stale))
        .update(break_advice_asked_at=now)
    )
    if asked:
        _send_task(version.pk)
    return None


def break_advice_compute(*, version_id: int) -> dict[str, Any]:
    """Work the version's advice out and store it (nothing to do if it is stored already)."""

    version = FleetConfigVersion.objects.get(pk=version_id)
    if version.break_advice is not None:
        return version.break_advice

    record = analysis_record(version)  # the advice reads the version's one analysis
    analysis = ((record or {}).get("numbers") or {}).get("analysis")
    advice = measured_comparison(version.scenario, list(POLICY_REGISTRY), analysis=analysis)
    FleetConfigVersion.objects.filter(pk=version_id).update(break_advice=advice)
    return advice


def _send_task(version_id: int) -> None:
    """Hand the work to a docs worker once the ask is committed, off the request path."""
    broker.send_task_after_commit("break_advice", [version_id], f"the break advice of fleet version {version_id}",
                                  f"the page's next ask after {ASK_AGAIN_AFTER_S} s")
