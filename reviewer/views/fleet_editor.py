"""The fleet config editor page: a form for the common keys beside the raw TOML, both
checked as you type (``POST /api/fleets/check/``) and saved as a new version through
the API. The Django admin stays for staff."""

from __future__ import annotations

from importlib import resources
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from emulator.scenario.checks import _policy_names
from emulator.scenario.specs import BATCHING, SHAPES, STANDBYS
from emulator.scenario.traces import NAMED_TRACES
from reviewer import permissions, selectors
from reviewer.models import FleetConfig
from reviewer.text.markdown import render_markdown
from reviewer.views.pages import int_or_none

#: What a new fleet config starts from: a continuous-batching fleet that runs as it is.
STARTER_PRESET = "continuous-comfortable.toml"


def editor_choices() -> dict[str, Any]:
    """The values the form's selects offer, from the emulator's own lists."""

    return {
        "policies": list(_policy_names()),
        "shapes": list(SHAPES),
        "standbys": list(STANDBYS),
        "batching": list(BATCHING),
        "traces": list(NAMED_TRACES),
        "faultActions": ["kill", "restore"],
    }


def _seen_doc_id(fleet: FleetConfig, user: Any) -> int | None:
    """The id of the doc the config names, if ``user`` may see it (see ``selectors.linked_doc``)."""
    doc = selectors.linked_doc(fleet, user)
    return doc.pk if doc is not None else None


def _editor_page(request: HttpRequest, fleet: FleetConfig | None) -> HttpResponse:
    user = request.user
    base: FleetConfig | None = None
    base_provenance: dict[str, Any] = {}
    session_id = int_or_none(request.GET.get("session"))
    session = selectors.sessions_visible_to(user).filter(pk=session_id).first() if session_id else None
    doc_id = int_or_none(request.GET.get("doc"))
    if fleet is not None:
        latest = fleet.latest_version()
        toml = fleet.toml
        fleet_data: dict[str, Any] | None = {
            "id": fleet.pk, "name": fleet.name, "doc": _seen_doc_id(fleet, user), "version": latest.number if latest else None,
            "owner": fleet.owner.get_username(), "canEdit": permissions.can_edit_owned(user, fleet),
        }
    else:
        # A new config starts from one the user can see (?from=ID: "edit this layout
        # first" in the placement pass), else from the shipped starting point.
        base_id = int_or_none(request.GET.get("from"))
        base = selectors.fleet_configs_visible_to(user).filter(pk=base_id).first() if base_id else None
        if base is not None:
            toml = base.toml
            doc_id = doc_id or _seen_doc_id(base, user)
            base_provenance = base.provenance
        else:
            toml = resources.files("emulator.scenario.presets").joinpath(STARTER_PRESET).read_text("utf-8")
        fleet_data = None
    docs = [{"id": d.pk, "title": d.title} for d in selectors.docs_visible_to(user)[:100]
            if permissions.can_share(user, d)]
    doc_id = _seen_doc_id(fleet, user) if fleet is not None else doc_id
    doc = selectors.docs_visible_to(user).filter(pk=doc_id).first() if doc_id else None
    doc_html = ""
    if doc is not None:
        revision = doc.latest_revision()
        doc_html = render_markdown(revision.body if revision else doc.body)
    config = {
        "fleet": fleet_data,
        "toml": toml,
        "docId": doc_id,
        "provenance": fleet.provenance if fleet is not None else base_provenance,
        "from": base.pk if fleet is None and base is not None else None,
        "docs": docs,
        "session": {"id": session.pk, "title": str(session), "fleetId": session.fleet_config_id,
                    "canManage": permissions.can_manage_session(user, session)} if session else None,
        "choices": editor_choices(),
        "urls": {"check": "/api/fleets/check/", "fleets": "/api/fleets/", "fleet": "/api/fleets/{id}/",
                 "edit": "/fleets/{id}/edit", "session": "/sessions/{id}/", "sessionApi": "/api/sessions/{id}/"},
    }
    title = f"Edit {fleet.name}" if fleet is not None else "New fleet config"
    return render(request, "reviewer/fleet_editor.html",
                  {"page_config": config, "title": title, "fleet": fleet, "doc": doc, "doc_html": doc_html})


@login_required
@require_GET
def fleet_edit(request: HttpRequest, fleet_id: int) -> HttpResponse:
    """Edit a fleet config you can see (its owner saves; others may save a copy)."""
    fleet = get_object_or_404(selectors.fleet_configs_visible_to(request.user).select_related("owner"), pk=fleet_id)
    return _editor_page(request, fleet)


@login_required
@require_GET
def fleet_new(request: HttpRequest) -> HttpResponse:
    """Write a new fleet config, from a shipped starting point."""
    return _editor_page(request, None)
