"""Routes of the browser pages (the REST API lives under /api/)."""

from django.urls import path

from reviewer.views import (
    breakpass,
    calibration,
    diff,
    docs,
    figures,
    fleet_editor,
    fleets,
    inbox,
    pages,
)

urlpatterns = [
    path("", pages.home, name="home"),
    path("sessions/new", pages.session_create, name="session-create"),
    path("docs/<int:doc_id>/", docs.doc_page, name="doc"),
    path("docs/<int:doc_id>/diff/", docs.doc_diff_page, name="doc-diff"),
    path("sessions/<int:session_id>/", pages.session_page, name="session"),
    path("sessions/<int:session_id>/diff/", diff.session_diff_page, name="session-diff"),
    path("sessions/<int:session_id>/numbers.json", figures.session_numbers, name="session-numbers"),
    path(
        "sessions/<int:session_id>/placement.json", figures.session_placement, name="session-placement"
    ),
    path("sessions/<int:session_id>/break-advice.json", breakpass.session_break_advice, name="session-break-advice"),
    path("fleets/<int:fleet_id>/trace", fleets.fleet_trace_upload, name="fleet-trace"),
    path("inbox/", inbox.inbox_page, name="inbox"),
    path("fleets/<int:fleet_id>/edit", fleet_editor.fleet_edit, name="fleet-edit"),
    path("fleets/new", fleet_editor.fleet_new, name="fleet-new"),
    path("calibration/", calibration.calibration_page, name="calibration"),
    path("vendor/plotly.min.js", figures.plotly_js, name="plotly-js"),
]
