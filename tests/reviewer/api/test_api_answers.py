"""Answers the schema promises: page numbers, JSON 404s under /api/, the frames' limit."""

from __future__ import annotations

from typing import Any

import pytest
from review_data_fixtures import *  # noqa: F403

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("page", ["", "0", "-1", "last", "two", "1.5"])
def test_a_page_that_is_not_a_whole_number_from_1_is_refused_naming_it(api_as: Any, review_doc: Any,
                                                                       page: str) -> None:
    response = api_as("owner").get(f"/api/docs/?page={page}")
    assert response.status_code == 400, response.content
    assert "page" in response.json()


def test_pages_from_1_list_and_a_page_past_the_last_is_404(api_as: Any, review_doc: Any) -> None:
    owner = api_as("owner")
    first = owner.get("/api/docs/?page=1")
    assert first.status_code == 200 and first.json()["count"] == 1
    assert owner.get("/api/docs/").json() == first.json()
    past = owner.get("/api/docs/?page=2")
    assert past.status_code == 404 and "detail" in past.json()


@pytest.mark.parametrize("path", ["/api/docs/1/nope/", "/api/nothing/", "/api/runs/-1/frames/"])
def test_a_path_under_api_that_names_no_endpoint_is_a_json_404(client: Any, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert "/api/schema/docs/" in response.json()["detail"]


def test_a_path_outside_api_keeps_the_site_404_page(client: Any) -> None:
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


@pytest.mark.parametrize("query", ["format=csv&limit=0", "format=csv&limit=1.5", "limit=10001"])
def test_a_frames_limit_out_of_range_is_refused_whatever_the_format(api_as: Any, open_review: Any,
                                                                   people: dict[str, Any], query: str) -> None:
    from reviewer.models import EmulatorRun

    run = EmulatorRun.objects.create(session=open_review, started_by=people["owner"],
                                     scenario=open_review.fleet_config.scenario, seed=1, status="done")
    response = api_as("owner").get(f"/api/runs/{run.pk}/frames/?{query}")
    assert response.status_code == 400
    assert "limit" in response.content.decode()
