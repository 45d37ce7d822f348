"""Prometheus metrics at /metrics, through django-prometheus.

django-prometheus counts requests, responses and latencies by view, and
database and cache calls. :class:`ReviewerCollector` adds the app's own
figures, read when Prometheus scrapes: runs by status, the queue of runs (in
the database and in the broker), runs whose frames fall behind their speed,
the oldest heartbeat of a running run, and the Celery workers that answer a
ping.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.db.models import Count, Min
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django_prometheus.exports import ExportToDjangoView
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from reviewer.celery import app
from reviewer.models import EmulatorRun, RunStatus
from reviewer.runs.services import broker_queue_length

log = logging.getLogger(__name__)

# Prometheus waits 10 s for a scrape by default; the worker ping takes this long at most.
WORKER_PING_TIMEOUT_S = 0.5


class ReviewerCollector(Collector):
    """The app's figures, read from the database, the broker and the workers at each scrape."""

    NAMES = ("reviewer_runs", "reviewer_run_queue_length", "reviewer_run_queue_oldest_seconds",
             "reviewer_runs_behind", "reviewer_run_heartbeat_age_seconds", "reviewer_broker_queue_length",
             "reviewer_celery_workers")

    def describe(self) -> Iterator[GaugeMetricFamily]:
        """The names, without reading anything (registering must not touch the database)."""
        for name in self.NAMES:
            yield GaugeMetricFamily(name, name)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        by_status = dict(EmulatorRun.objects.values_list("status").annotate(n=Count("pk")).values_list("status", "n"))
        runs = GaugeMetricFamily("reviewer_runs", "Emulator runs by status.", labels=["status"])
        for status in RunStatus:
            runs.add_metric([status.value], by_status.get(status.value, 0))
        yield runs
        queued = EmulatorRun.objects.filter(status=RunStatus.QUEUED)
        yield GaugeMetricFamily("reviewer_run_queue_length", "Runs waiting for a worker.", value=queued.count())
        oldest = queued.aggregate(t=Min("enqueued_at"))["t"]
        yield GaugeMetricFamily("reviewer_run_queue_oldest_seconds", "How long the oldest queued run has waited.",
                                value=(timezone.now() - oldest).total_seconds() if oldest else 0.0)
        running = EmulatorRun.objects.filter(status=RunStatus.RUNNING)
        yield GaugeMetricFamily("reviewer_runs_behind", "Running runs whose frames fall behind their speed.",
                                value=running.filter(behind=True).count())
        beat = running.aggregate(t=Min("heartbeat_at"))["t"]
        yield GaugeMetricFamily("reviewer_run_heartbeat_age_seconds",
                                "Age of the oldest heartbeat of a running run (frame lag of a stuck worker).",
                                value=(timezone.now() - beat).total_seconds() if beat else 0.0)
        yield from self._broker_and_workers()

    def _broker_and_workers(self) -> Iterator[GaugeMetricFamily]:
        try:
            waiting = broker_queue_length()
            workers = len(app.control.ping(timeout=WORKER_PING_TIMEOUT_S))
        except Exception:
            log.warning("metrics: the broker did not answer", exc_info=True)
            return
        yield GaugeMetricFamily("reviewer_broker_queue_length", "Tasks waiting in the broker.", value=waiting)
        yield GaugeMetricFamily("reviewer_celery_workers", "Celery workers that answered a ping.", value=workers)


def _allowed(request: HttpRequest) -> bool:
    """Staff, or a scraper sending ``Authorization: Bearer $METRICS_TOKEN``."""
    user = getattr(request, "user", None)
    if user is not None and user.is_staff:
        return True
    token = settings.METRICS_TOKEN
    given = request.headers.get("Authorization", "")
    return bool(token) and hmac.compare_digest(given.encode(), f"Bearer {token}".encode())


def metrics_view(request: HttpRequest) -> HttpResponse:
    """The metrics in Prometheus's text format, for staff and holders of METRICS_TOKEN."""

    if not _allowed(request):
        return HttpResponse("Send Authorization: Bearer METRICS_TOKEN, or sign in as staff.\n", status=403,
                            content_type="text/plain")
    response: Any = ExportToDjangoView(request)
    return response
