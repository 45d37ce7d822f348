"""The browser pages: home, session creation and the session page.

Data changes go through the REST API (reviewer/api) from the page's scripts;
these views only render pages. The figures the pages read are in
:mod:`reviewer.views.figures`.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from reviewer import permissions, selectors
from reviewer.exports.registry import FORMATS as EXPORT_FORMATS
from reviewer.fleets import scenario_view
from reviewer.fleets.analysis_record import latest_record
from reviewer.fleets.traces import uploaded_trace_name
from reviewer.models import (
    DocRevision,
    ReviewPass,
    ReviewSession,
    Severity,
    TraceHop,
)
from reviewer.models.collaboration import Verdict
from reviewer.review import services as review_services
from reviewer.text.anchoring import align
from reviewer.text.markdown import render_markdown, rendered_text
from reviewer.views.pass_guides import guides_for
from reviewer.views.vocabulary import vocabulary


def _sessions_for(user: Any) -> QuerySet[ReviewSession]:
    """Review sessions the user takes part in (all of them for staff)."""
    return selectors.sessions_visible_to(user).select_related("doc", "fleet_config", "owner")


def get_session_for_user(user: Any, session_id: int) -> ReviewSession:
    """The session if the user may see it; 404 otherwise (never reveal it exists)."""
    return get_object_or_404(_sessions_for(user), pk=session_id)


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """The signed-in user's sessions, docs, fleet configs and recent runs."""
    user = request.user
    fleets = list(selectors.fleet_configs_visible_to(user).select_related("doc")[:50])
    for fleet in fleets:
        fleet.trace_name = uploaded_trace_name(fleet)  # type: ignore[attr-defined]
        fleet.shown_doc = selectors.linked_doc(fleet, user)  # type: ignore[attr-defined]
    context = {
        "sessions": _sessions_for(user)[:50],
        "docs": selectors.docs_visible_to(user)[:50],
        "fleets": fleets,
        "runs": selectors.recent_runs_for(user),
        "upload_max_mb": f"{settings.UPLOAD_MAX_BYTES / 2**20:g}",
    }
    return render(request, "reviewer/home.html", context)


@login_required
@require_POST
def session_create(request: HttpRequest) -> HttpResponse:
    """Start a review of a doc with a fleet config; the creator owns it."""
    errors = []
    doc = selectors.docs_visible_to(request.user).filter(pk=int_or_none(request.POST.get("doc"))).first()
    if doc is None or not permissions.can_share(request.user, doc):
        errors.append("doc: choose one of your docs.")
    fleet = None
    fleet_id = int_or_none(request.POST.get("fleet_config"))
    if fleet_id is not None:
        fleet = selectors.fleet_configs_visible_to(request.user).filter(pk=fleet_id).first()
        if fleet is None or not permissions.can_share(request.user, fleet):
            errors.append("fleet_config: choose one of your fleet configs, or none.")
    title = (request.POST.get("title") or "").strip()[:200]
    if errors:
        for error in errors:
            messages.error(request, error)
        return redirect("home")
    session = review_services.session_create(
        owner=request.user, doc=doc, fleet_config=fleet, title=title
    )
    return redirect("session", session_id=session.pk)


def int_or_none(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except ValueError:
        return None


def _page_config(
    request: HttpRequest, session: ReviewSession, revision: DocRevision | None, source: str
) -> dict[str, Any]:
    """What the session page's scripts need: ids, the doc's revision and the map from
    its source to its rendered text, the fleet's scenario, the shared vocabulary,
    and the URLs of the API and websockets."""
    fleet = session.fleet_config
    fleet_version = fleet.latest_version() if fleet else None
    return {
        "sessionId": session.pk,
        "user": {"id": request.user.pk, "username": request.user.get_username()},
        "currentPass": session.current_pass,
        "isOpen": session.is_open,
        "canManage": permissions.can_manage_session(request.user, session),
        "canPublish": permissions.can_add_finding(request.user, session),
        "isAuthor": session.is_author(request.user),
        # How far moving the findings onto the latest revision got; the socket's
        # doc.reanchoring events carry it on.
        "reanchoring": {"revision": revision.number if revision else 0, **selectors.doc_reanchoring(session.doc)},
        "canResolve": permissions.can_set_finding_state(request.user, session),
        "fileDirectly": session.file_directly,
        # Highlights are drawn through the server's map from the source to the
        # rendered text; the page never searches the text for a quote itself.
        "docRevision": revision.number if revision else None,
        "docMap": align(source, rendered_text(source)).to_dict(),
        "fleet": {
            "id": fleet.pk,
            "name": fleet.name,
            "versionId": fleet_version.pk if fleet_version else None,
            "scenario": fleet.scenario,
            # The break pass's one-click changes and the trace pass's path, from the scenario.
            **scenario_view.page_facts(fleet.scenario, fleet.toml, latest_record(fleet)),
        }
        if fleet
        else None,
        # Passes, severities, statuses, hops and metric names: the scripts never retype them.
        **vocabulary(),
        "urls": {
            "findings": f"/api/sessions/{session.pk}/findings/",
            "reorder": f"/api/sessions/{session.pk}/findings/reorder/",
            "finding": "/api/findings/{id}/",
            "session": f"/api/sessions/{session.pk}/",
            "document": f"/api/sessions/{session.pk}/document/",
            "merge": "/api/findings/{id}/merge/",
            "diff": reverse("session-diff", args=[session.pk]),
            "runs": "/api/runs/",
            "run": "/api/runs/{id}/",
            "numbers": reverse("session-numbers", args=[session.pk]),
            "placement": reverse("session-placement", args=[session.pk]),
            "breakAdvice": reverse("session-break-advice", args=[session.pk]),
            "wsSession": f"/ws/sessions/{session.pk}/",
            "reviews": reverse("api-session-reviews", args=[session.pk]),
            "turn": reverse("api-session-turn", args=[session.pk]),
            "findingState": "/api/findings/{id}/state/",
            "wsRun": "/ws/runs/{id}/",
            "plotly": reverse("plotly-js"),
        },
    }


@login_required
@require_GET
def session_page(request: HttpRequest, session_id: int) -> HttpResponse:
    """The review itself: the doc on one side, the five passes on the other."""
    session = get_session_for_user(request.user, session_id)
    revision = session.doc.latest_revision()
    source = revision.body if revision else session.doc.body
    page_config = _page_config(request, session, revision, source)
    # The guides follow the system under review (continuous batching, pools, autoscaling).
    guides = guides_for(session.fleet_config.scenario if session.fleet_config else None)
    context = {
        "session": session,
        "revision": revision,
        "doc_html": render_markdown(source),
        "fleet": session.fleet_config,
        "passes": [
            {"key": p.value, "label": p.label, "guide": guides[p.value]} for p in ReviewPass
        ],
        "severities": list(Severity),
        "hops": list(TraceHop),
        "export_formats": [f.suffix for f in EXPORT_FORMATS],
        "page_config": page_config,
        "can_manage": page_config["canManage"],
        "can_publish": page_config["canPublish"],
        "verdicts": list(Verdict),
    }
    return render(request, "reviewer/session.html", context)
