"""The calibration page: measured vs fitted step times of the continuous worker."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from reviewer.errors import ServiceError
from reviewer.fleets import calibration
from reviewer.views.vocabulary import CALIBRATION_STEP_KINDS


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def calibration_page(request: HttpRequest) -> HttpResponse:
    """Fit a shipped measurement group (GET ``?group=``) or an uploaded CSV (POST)."""
    group = request.POST.get("group") or request.GET.get("group") or calibration.DEFAULT_GROUP
    upload = request.FILES.get("measurements") if request.method == "POST" else None
    result, error = None, None
    try:
        result = calibration.calibration_fit(group=group, upload=upload)
    except ServiceError as exc:
        error = exc.message
    context = {
        "groups": calibration.shipped_group_choices(),
        "group": group,
        "shipped": calibration.SHIPPED,
        "result": result,
        "error": error,
        "upload_max_mb": f"{settings.UPLOAD_MAX_BYTES / 2**20:g}",
        "page_config": {
            "fit": result.fit if result else None,
            "stepKinds": CALIBRATION_STEP_KINDS,
            "urls": {"plotly": reverse("plotly-js")},
        },
    }
    return render(request, "reviewer/calibration.html", context, status=400 if error else 200)
