"""The /healthz endpoint."""

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from reviewer.health import health_report


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """JSON status of database, Redis and Celery; 200 only when all are ok."""
    report = health_report()
    healthy = all(value == "ok" for value in report.values())
    return JsonResponse(report, status=200 if healthy else 503)
