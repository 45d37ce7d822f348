"""The /healthz and /readyz endpoints."""

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from reviewer.ops.health import (
    health_report,
    process_restarts,
    public,
    readiness_report,
    supervised_processes,
)


def _answer(request: HttpRequest, report: dict[str, str], extra: dict[str, Any] | None = None) -> JsonResponse:
    """200 when every check is ok, else 503; the reasons only for staff."""
    healthy = all(value == "ok" for value in report.values())
    user = getattr(request, "user", None)
    body: dict[str, Any] = dict(report if user is not None and user.is_staff else public(report))
    body.update(extra or {})
    return JsonResponse(body, status=200 if healthy else 503)


def _endpoint(report: Callable[[], dict[str, str]], *, restarts: bool = False) -> Callable[[HttpRequest], JsonResponse]:
    @never_cache
    @require_GET
    def view(request: HttpRequest) -> JsonResponse:
        extra = None
        state = supervised_processes() if restarts else None
        if state is not None:
            extra = {"restarts": process_restarts(state)}
        return _answer(request, report(), extra)

    return view


#: Database, Redis and a Celery worker (answers at the first worker's ping); under
#: ``serve``, its processes too, with each one's restart count and last restart.
healthz = _endpoint(health_report, restarts=True)
#: Whether this web process can serve: database, applied migrations, Redis.
readyz = _endpoint(readiness_report)
