"""Routes of the browser pages (the REST API lives under /api/)."""

from django.urls import path

from reviewer import views

urlpatterns = [
    path("", views.home, name="home"),
    path("sessions/new", views.session_create, name="session-create"),
    path("sessions/<int:session_id>/", views.session_page, name="session"),
    path("sessions/<int:session_id>/numbers.json", views.session_numbers, name="session-numbers"),
    path(
        "sessions/<int:session_id>/placement.json", views.session_placement, name="session-placement"
    ),
    path("vendor/plotly.min.js", views.plotly_js, name="plotly-js"),
]
