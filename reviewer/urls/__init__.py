"""URL routes. Each area keeps its own module; this package only includes them."""

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic.base import RedirectView

from reviewer.ops.metrics import metrics_view
from reviewer.views.health import healthz, readyz
from reviewer.views.password_reset import (
    ThrottledPasswordResetView,
    TokenRevokingPasswordResetConfirmView,
)
from reviewer.views.tokens import tokens_page

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    # Browsers ask for /favicon.ico whatever the page links; it is the same icon.
    path("favicon.ico", RedirectView.as_view(url=static("reviewer/favicon.svg"), permanent=True), name="favicon"),
    path("readyz", readyz, name="readyz"),
    path("metrics", metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    # Reset throttled and revoking API tokens; the rest of the sign-in views as Django ships them.
    path("accounts/password_reset/", ThrottledPasswordResetView.as_view(), name="password_reset"),
    path("accounts/reset/<uidb64>/<token>/", TokenRevokingPasswordResetConfirmView.as_view(),
         name="password_reset_confirm"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("account/tokens/", tokens_page, name="tokens"),
    path("api/", include("reviewer.api.urls")),
    path("", include("reviewer.urls.pages")),
]

handler404 = "reviewer.views.not_found.page_not_found"
