"""The calibration page and the home page's trace upload form."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from review_data_fixtures import *  # noqa: F403

pytestmark = pytest.mark.django_db

MEASUREMENTS = "model,hardware,prompt_size,batch_size,token_size,prompt_time,token_time,tensor_parallel\n" + "".join(
    f"m,gpu,{p},{b},128,{10 + 0.02 * p * b:.3f},{10 + 0.5 * b + 0.001 * b * (p + 64):.3f},1\n"
    for p in (128, 256, 512, 1024) for b in (1, 2, 4, 8)
)


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _page_config(response: Any) -> dict[str, Any]:
    text = response.content.decode()
    start = text.index('<script id="page-config" type="application/json">') + len(
        '<script id="page-config" type="application/json">')
    return json.loads(text[start:text.index("</script>", start)])


def test_it_fits_the_shipped_h100_tp4_group_by_default(people):
    response = _client(people["owner"]).get("/calibration/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "llama2-70b on h100-80gb tp 4" in body and "[worker]" in body and "step_base_s = " in body
    assert "a fit, not a physical model" in body
    config = _page_config(response)
    points = body[body.index('<table class="calibration-table">'):]
    points = points[:points.index("</table>")]
    assert len(config["fit"]["points"]) == points.count("<tr") - 1 == 32
    assert [k["key"] for k in config["stepKinds"]] == ["prompt", "token"]


def test_it_shows_the_three_step_models_side_by_side(people):
    body = _client(people["owner"]).get("/calibration/").content.decode()
    models = body[body.index('<table class="step-models">'):]
    models = models[:models.index("</table>")]
    assert [m for m in ("linear", "roofline", "table") if f'data-model="{m}"' in models] == [
        "linear", "roofline", "table"]
    # The roofline stands on the catalog's H100 with tensor parallelism's collectives;
    # the table follows the measured steps closer than the one line does.
    assert "4 x H100-SXM-80GB" in models and "9.8 ms of tensor-parallel collectives" in models
    import re

    medians = dict(re.findall(r'data-model="(\w+)"><td>\w+</td><td class="num">([0-9.]+) %', models))
    assert float(medians["table"]) < float(medians["linear"])


def test_it_fits_the_group_chosen_and_lists_its_outliers(people):
    response = _client(people["owner"]).get("/calibration/?group=llama2-70b:a100-80gb:2")
    body = response.content.decode()
    assert "llama2-70b on a100-80gb tp 2" in body
    outliers = [p for p in _page_config(response)["fit"]["points"] if p["outlier"]]
    assert outliers and body.count('class="outlier"') == len(outliers)


def test_it_refuses_an_unknown_group_in_one_line(people):
    response = _client(people["owner"]).get("/calibration/?group=nope")
    assert response.status_code == 400 and "group: &#x27;nope&#x27; is not in splitwise-llama2-70b" in (
        response.content.decode())


def test_it_fits_an_uploaded_csv_and_keeps_no_copy(people, settings, tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    response = _client(people["owner"]).post(
        "/calibration/", {"measurements": SimpleUploadedFile("mine.csv", MEASUREMENTS.encode())})
    assert response.status_code == 200
    fit = _page_config(response)["fit"]
    assert (fit["model"], fit["hardware"], len(fit["points"])) == ("m", "gpu", 32)
    assert fit["median_error"] < 0.01
    assert not list(tmp_path.rglob("*.csv"))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("model,prompt_size\nm,1\n", 'mine.csv line 1: missing column &quot;batch_size&quot;'),
        (MEASUREMENTS.replace(",128,", ",-1,", 1), "mine.csv line 2: prompt_size -1 is below 1"),
        ("", "mine.csv: has no measurements"),
    ],
)
def test_it_shows_the_emulators_error_for_a_bad_csv(people, content, message):
    response = _client(people["owner"]).post(
        "/calibration/", {"measurements": SimpleUploadedFile("mine.csv", content.encode())})
    assert response.status_code == 400
    assert message in response.content.decode()
    assert _page_config(response)["fit"] is None


def test_it_refuses_an_uploaded_csv_over_the_limit(people, settings):
    settings.UPLOAD_MAX_BYTES = 100
    response = _client(people["owner"]).post(
        "/calibration/", {"measurements": SimpleUploadedFile("mine.csv", MEASUREMENTS.encode())})
    assert response.status_code == 400 and "UPLOAD_MAX_BYTES" in response.content.decode()


def test_it_asks_to_sign_in(client):
    assert client.get("/calibration/").status_code == 302


def test_the_owner_uploads_a_trace_from_the_home_page(people, review_fleet, settings, tmp_path):
    settings.TRACE_UPLOAD_DIR = tmp_path
    trace = b'{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 5}\n'
    client = _client(people["owner"])
    assert f'action="/fleets/{review_fleet.pk}/trace"' in client.get("/").content.decode()
    response = client.post(f"/fleets/{review_fleet.pk}/trace",
                           {"file": SimpleUploadedFile("t.jsonl", trace)}, follow=True)
    assert "a new version replays t.jsonl" in response.content.decode()
    assert "replays trace t.jsonl" in response.content.decode()
    assert review_fleet.versions.count() == 2 and len(list(Path(tmp_path).rglob("t.jsonl"))) == 1


def test_a_bad_trace_from_the_home_page_is_one_line_and_saves_nothing(people, review_fleet, settings, tmp_path):
    settings.TRACE_UPLOAD_DIR = tmp_path
    response = _client(people["owner"]).post(
        f"/fleets/{review_fleet.pk}/trace", {"file": SimpleUploadedFile("t.csv", b"a,b\n1,2\n")}, follow=True)
    assert "t.csv line 1: missing column &quot;TIMESTAMP&quot;" in response.content.decode()
    assert review_fleet.versions.count() == 1 and not list(Path(tmp_path).rglob("*.csv"))


def test_an_outsider_gets_404_and_a_reviewer_may_not_upload(people, open_review, review_fleet, settings,
                                                            tmp_path):
    settings.TRACE_UPLOAD_DIR = tmp_path
    data = {"file": SimpleUploadedFile("t.jsonl", b'{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 5}\n')}
    assert _client(people["outsider"]).post(f"/fleets/{review_fleet.pk}/trace", data).status_code == 404
    data["file"].seek(0)
    response = _client(people["reviewer"]).post(f"/fleets/{review_fleet.pk}/trace", data, follow=True)
    assert "only its owner may upload a trace" in response.content.decode()
    assert review_fleet.versions.count() == 1


def test_a_big_trace_from_the_home_page_is_stored_for_a_worker_not_parsed_in_the_request(
        people, review_fleet, settings, tmp_path, monkeypatch):
    import emulator.scenario.traces as reader
    from reviewer.models import TraceUpload

    settings.TRACE_UPLOAD_DIR = tmp_path
    settings.TRACE_PARSE_INLINE_MAX_BYTES = 10
    monkeypatch.setattr(reader, "read_trace", lambda *a, **k: pytest.fail("the web request parsed the trace"))
    trace = b'{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 5}\n'
    response = _client(people["owner"]).post(f"/fleets/{review_fleet.pk}/trace",
                                             {"file": SimpleUploadedFile("t.jsonl", trace)}, follow=True)
    assert "t.jsonl is stored and being checked" in response.content.decode()
    assert review_fleet.versions.count() == 1
    assert list(TraceUpload.objects.values_list("name", "status")) == [("t.jsonl", "pending")]
    assert [p.read_bytes() for p in Path(tmp_path).rglob("t.jsonl")] == [trace]
