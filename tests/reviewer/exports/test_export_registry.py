"""The export formats come from one registry: each is served by the one export view at
its suffix with its renderer, offered on the session page, and a refusal reads as JSON
whatever the format."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.urls import resolve, reverse
from review_data_fixtures import *  # noqa: F403

from reviewer.api.exports import RENDERERS, SessionExport
from reviewer.exports.registry import FORMATS

pytestmark = pytest.mark.django_db


def test_every_registered_format_has_its_route_and_renderer() -> None:
    assert [f.suffix for f in FORMATS] == ["md", "json", "csv", "jsonld"]
    for f in FORMATS:
        url = reverse(f"api-session-export-{f.suffix}", kwargs={"pk": 7})
        assert url == f"/api/sessions/7/export.{f.suffix}"
        match = resolve(url)
        assert match.func.view_class is SessionExport and match.kwargs == {"pk": 7, "format": f.suffix}
        assert RENDERERS[f.suffix].media_type == f.media_type


@pytest.mark.parametrize("export", FORMATS, ids=lambda f: f.suffix)
def test_each_format_is_rendered_by_its_own_renderer(api_as: Any, open_review: Any, export: Any) -> None:
    response = api_as("owner").get(f"/api/sessions/{open_review.pk}/export.{export.suffix}",
                                   HTTP_ACCEPT="application/json")  # the suffix decides, not Accept
    assert response.status_code == 200
    assert response["Content-Type"].split(";")[0] == export.media_type
    assert response["Content-Disposition"] == f'inline; filename="review-{open_review.pk}.{export.suffix}"'
    body = response.content.decode()
    expected = export.render(open_review, response.wsgi_request.build_absolute_uri)
    if export.suffix == "json":  # the JSON export carries the time it was made
        got, want = json.loads(body), json.loads(expected)
        assert got.pop("exported_at") and want.pop("exported_at")
        assert got == want
    else:
        assert body == expected


@pytest.mark.parametrize("suffix", ["csv", "md"])
def test_a_refusal_in_a_text_format_is_answered_in_json(api_as: Any, open_review: Any, suffix: str) -> None:
    response = api_as("outsider").get(f"/api/sessions/{open_review.pk}/export.{suffix}")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert "detail" in json.loads(response.content) or "error" in json.loads(response.content)


def test_an_unknown_format_is_not_found(api_as: Any, open_review: Any) -> None:
    assert api_as("owner").get(f"/api/sessions/{open_review.pk}/export.xlsx").status_code == 404


def test_the_session_page_offers_a_download_of_every_registered_format(client: Any, people: Any,
                                                                        open_review: Any) -> None:
    client.force_login(people["owner"])
    page = client.get(f"/sessions/{open_review.pk}/").content.decode()
    for f in FORMATS:
        assert f'href="/api/sessions/{open_review.pk}/export.{f.suffix}"' in page
