"""The /healthz and /readyz endpoints."""

from collections.abc import Callable

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from reviewer.ops.health import health_report, public, readiness_report


def _answer(request: HttpRequest, report: dict[str, str]) -> JsonResponse:
    """200 when every check is ok, else 503; the reasons only for staff."""
    healthy = all(value == "ok" for value in report.values())
    user = getattr(request, "user", None)
    body = report if user is not None and user.is_staff else public(report)
    return JsonResponse(body, status=200 if healthy else 503)


def _endpoint(report: Callable[[], dict[str, str]]) -> Callable[[HttpRequest], JsonResponse]:
    @never_cache
    @require_GET
    def view(request: HttpRequest) -> JsonResponse:
        return _answer(request, report())

    return view


#: Database, Redis and a Celery worker (answers at the first worker's ping).
healthz = _endpoint(health_report)
#: Whether this web process can serve: database, applied migrations, Redis.
readyz = _endpoint(readiness_report)
