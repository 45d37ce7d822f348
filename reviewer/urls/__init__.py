"""URL routes. Each area keeps its own module; this package only includes them."""

from django.contrib import admin
from django.urls import include, path

from reviewer.ops.metrics import metrics_view
from reviewer.views.health import healthz, readyz
from reviewer.views.tokens import tokens_page

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("metrics", metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("account/tokens/", tokens_page, name="tokens"),
    path("api/", include("reviewer.api.urls")),
    path("", include("reviewer.urls.pages")),
]
