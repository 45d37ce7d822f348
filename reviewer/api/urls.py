"""Routes of the REST API, included at /api/ by ``reviewer.urls``."""

from django.urls import path
from drf_spectacular.views import (
    SpectacularAPIView,
    SpectacularRedocView,
    SpectacularSwaggerSplitView,
)
from rest_framework.routers import SimpleRouter

from reviewer.api import collaboration, exports, findings, review_document, runs
from reviewer.api.docs import DesignDocViewSet
from reviewer.api.fleets import FleetConfigViewSet
from reviewer.api.sessions import ReviewSessionViewSet
from reviewer.exports.registry import FORMATS as EXPORT_FORMATS

router = SimpleRouter()
router.register("docs", DesignDocViewSet, basename="api-doc")
router.register("fleets", FleetConfigViewSet, basename="api-fleet")
router.register("sessions", ReviewSessionViewSet, basename="api-session")

urlpatterns = [
    # /api/docs/ is the design-doc collection; the API's own documentation
    # lives under /api/schema/.
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves its start-up script as a file: the CSP allows no inline script.
    path("schema/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-schema-docs"),
    path("schema/redoc/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-schema-redoc"),
    path("context.jsonld", exports.AnnotationContext.as_view(), name="api-context"),
    path(
        "sessions/<int:session_pk>/findings/",
        findings.SessionFindingList.as_view(),
        name="api-session-findings",
    ),
    path(
        "sessions/<int:session_pk>/findings/reorder/",
        findings.SessionFindingReorder.as_view(),
        name="api-session-findings-reorder",
    ),
    *(path(f"sessions/<int:pk>/export.{f.suffix}", exports.SessionExport.as_view(), {"format": f.suffix},
           name=f"api-session-export-{f.suffix}") for f in EXPORT_FORMATS),
    path("sessions/<int:pk>/document/", review_document.ReviewDocumentView.as_view(), name="api-session-document"),
    path("sessions/<int:pk>/diff/", review_document.SessionDiff.as_view(), name="api-session-diff"),
    path(
        "sessions/<int:session_pk>/findings/duplicates/",
        review_document.SessionDuplicates.as_view(),
        name="api-session-findings-duplicates",
    ),
    path("findings/<int:pk>/merge/", review_document.FindingMerge.as_view(), name="api-finding-merge"),
    path("findings/<int:pk>/", findings.FindingDetail.as_view(), name="api-finding"),
    path("findings/<int:pk>/replies/", findings.FindingReplyList.as_view(), name="api-finding-replies"),
    *runs.urlpatterns,
    *collaboration.urlpatterns,
    *router.urls,
]
