"""The 404 answer: JSON under /api/, the site's page elsewhere.

DRF answers its own views' 404s in JSON; a path under /api/ that names no
endpoint at all (``/api/docs/abc/``, ``/api/nothing/``) is answered by Django's
URL resolver, which would send an HTML page to an API client.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse(
            {"detail": "Not found: no API endpoint at this path; the endpoints are listed at /api/schema/docs/."},
            status=404,
        )
    return defaults.page_not_found(request, exception)
