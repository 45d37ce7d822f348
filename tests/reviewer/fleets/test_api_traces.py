"""POST /api/fleets/{id}/trace/: uploaded request traces, checked by the emulator's
reader, stored whole or not at all, replayed by runs of the config."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from review_data_fixtures import *  # noqa: F403

pytestmark = pytest.mark.django_db

GOOD_CSV = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    + "".join(f"2023-11-16 18:15:{s:02d}.5000000,{100 + s},{20 + s}\n" for s in range(0, 20, 1))
)
GOOD_JSONL = "".join(
    json.dumps({"arrival_s": round(i * 0.35, 2), "prompt_tokens": 100, "output_tokens": 10}) + "\n"
    for i in range(40)
)


@pytest.fixture(autouse=True)
def trace_dir(settings: Any, tmp_path: Path) -> Path:
    """Uploaded traces go to a fresh directory per test."""
    settings.TRACE_UPLOAD_DIR = tmp_path / "traces"
    return settings.TRACE_UPLOAD_DIR


def _upload(client: Any, fleet: Any, name: str, content: str | bytes) -> Any:
    data = content.encode() if isinstance(content, str) else content
    return client.post(f"/api/fleets/{fleet.pk}/trace/", {"file": SimpleUploadedFile(name, data)},
                       format="multipart")


def _stored_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def test_it_stores_an_uploaded_trace_and_points_a_new_version_at_it(api_as, review_fleet, trace_dir):
    response = _upload(api_as("owner"), review_fleet, "azure.csv", GOOD_CSV)
    assert response.status_code == 200, response.content
    data = response.json()
    assert data["version"] == 2 and data["trace"] == "azure.csv"
    path = Path(data["scenario"]["traffic"]["trace"])
    assert path.is_absolute() and path.is_relative_to(trace_dir) and path.read_text() == GOOD_CSV
    assert f'trace = "{path}"' in data["toml"]
    # The earlier version is kept as it was.
    versions = api_as("owner").get(f"/api/fleets/{review_fleet.pk}/versions/").json()["results"]
    assert "trace =" not in versions[0]["toml"] and str(path) in versions[1]["toml"]


def test_it_keeps_each_uploads_file_for_the_version_that_named_it(api_as, review_fleet, trace_dir):
    first = _upload(api_as("owner"), review_fleet, "t.jsonl", GOOD_JSONL).json()
    second = _upload(api_as("owner"), review_fleet, "t.jsonl", "".join(GOOD_JSONL.splitlines(True)[:20])).json()
    a, b = Path(first["scenario"]["traffic"]["trace"]), Path(second["scenario"]["traffic"]["trace"])
    assert a != b and a.read_text() == GOOD_JSONL and second["version"] == 3


@pytest.mark.parametrize(
    ("name", "content", "where"),
    [
        ("nocol.csv", "TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.1,10\n",
         'nocol.csv line 1: missing column "GeneratedTokens"'),
        ("neg.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,10,5\n"
         "2023-11-16 18:15:47.1,-3,5\n", 'neg.csv line 3: ContextTokens "-3" is negative'),
        ("unsorted.jsonl", '{"arrival_s": 2, "prompt_tokens": 1, "output_tokens": 1}\n'
         '{"arrival_s": 1, "prompt_tokens": 1, "output_tokens": 1}\n',
         "unsorted.jsonl line 2: arrival_s 1 is earlier than line 1's 2"),
        ("empty.csv", "", "empty.csv: has no requests"),
    ],
)
def test_it_refuses_a_bad_trace_in_one_line_and_saves_nothing(
    api_as, review_fleet, trace_dir, name, content, where
):
    response = _upload(api_as("owner"), review_fleet, name, content)
    assert response.status_code == 400, response.content
    message = response.json()["trace"]
    assert len(message) == 1 and "\n" not in message[0] and where in message[0], message
    assert review_fleet.versions.count() == 1
    assert _stored_files(trace_dir) == []


def test_it_saves_nothing_when_the_scenario_with_the_trace_is_refused(api_as, review_fleet, trace_dir,
                                                                       settings):
    settings.RUN_REQUEST_BUDGET = 5  # the trace's 7 arrivals in the 6 s run are over it
    response = _upload(api_as("owner"), review_fleet, "azure.csv", GOOD_CSV)
    assert response.status_code == 400 and "run budget of 5" in response.json()["trace"][0]
    assert review_fleet.versions.count() == 1 and _stored_files(trace_dir) == []


def test_it_refuses_a_file_over_the_limit_while_copying_it(api_as, review_fleet, trace_dir, settings):
    settings.UPLOAD_MAX_BYTES = 100
    response = _upload(api_as("owner"), review_fleet, "azure.csv", GOOD_CSV)
    assert response.status_code == 413
    assert response.json() == {"detail": response.json()["detail"], "setting": "UPLOAD_MAX_BYTES"}
    assert "limit of 100 bytes" in response.json()["detail"]
    assert review_fleet.versions.count() == 1 and _stored_files(trace_dir) == []


def test_it_refuses_a_2_gb_upload_by_its_declared_size_without_reading_it(api_as, review_fleet, trace_dir):
    # The body is empty; only the declared length is 2 GB. Were it read, the
    # multipart parser would fail on it instead of answering 413.
    response = api_as("owner").generic(
        "POST", f"/api/fleets/{review_fleet.pk}/trace/", b"",
        content_type="multipart/form-data; boundary=xyz", CONTENT_LENGTH=str(2 * 1024**3),
    )
    assert response.status_code == 413
    body = response.json()
    assert body["setting"] == "UPLOAD_MAX_BYTES" and "2,147,483,648 bytes" in body["detail"]
    assert "67,108,864" in body["detail"] and "\n" not in body["detail"]
    assert review_fleet.versions.count() == 1 and _stored_files(trace_dir) == []


def test_it_refuses_a_2_gb_upload_under_asgi_before_receiving_the_body():
    from reviewer.asgi import application

    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        raise AssertionError("the body was read")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/api/fleets/1/trace/", "query_string": b"",
             "headers": [(b"content-type", b"multipart/form-data; boundary=x"),
                         (b"content-length", str(2 * 1024**3).encode())]}
    asyncio.run(application(scope, receive, send))
    assert sent[0]["status"] == 413
    assert json.loads(sent[1]["body"])["setting"] == "UPLOAD_MAX_BYTES"


@pytest.mark.parametrize(("who", "status"), [("reviewer", 403), ("outsider", 404), (None, 401)])
def test_only_the_owner_may_upload_a_trace(api_as, open_review, review_fleet, trace_dir, who, status):
    response = _upload(api_as(who), review_fleet, "azure.csv", GOOD_CSV)
    assert response.status_code == status
    assert review_fleet.versions.count() == 1 and _stored_files(trace_dir) == []


def test_the_schema_documents_the_multipart_upload(api_as):
    schema = api_as("owner").get("/api/schema/?format=json").json()
    operation = schema["paths"]["/api/fleets/{id}/trace/"]["post"]
    assert "multipart/form-data" in operation["requestBody"]["content"]
    assert {"200", "400", "413"} <= set(operation["responses"])


@pytest.mark.usefixtures("redis_url")
def test_a_run_of_the_config_replays_the_uploaded_trace(api_as, review_fleet, people):
    from reviewer.models import EmulatorRun
    from reviewer.runs.services import resolve_scenario
    from reviewer.tasks import run_emulation

    # 40 arrivals 0.35 s apart: 18 of them (0 to 5.95 s) fall within the 6 s run.
    assert _upload(api_as("owner"), review_fleet, "t.jsonl", GOOD_JSONL).status_code == 200
    review_fleet.refresh_from_db()
    resolved = resolve_scenario(config_version=review_fleet.latest_version())
    run = EmulatorRun.objects.create(started_by=people["owner"], scenario=resolved.scenario.to_dict(),
                                     seed=resolved.scenario.seed, speed="max",
                                     config_version=resolved.config_version)
    assert run_emulation.apply(args=[run.pk]).get() == "done"
    run.refresh_from_db()
    within = [line for line in GOOD_JSONL.splitlines() if json.loads(line)["arrival_s"] < 6]
    assert run.summary["offered"] == len(within) == 18


def _with_trace(path: str) -> str:
    from review_data_fixtures import SMALL_SCENARIO

    return SMALL_SCENARIO.replace('shape = "constant"', f'shape = "constant"\ntrace = "{path}"', 1)


@pytest.mark.parametrize("path", ["SECRET", "/etc/passwd", "TRACES/../outside.csv"])
def test_it_refuses_a_scenario_that_names_a_server_file_without_quoting_it(api_as, review_fleet, trace_dir,
                                                                            settings, path):
    # The emulator's errors quote a trace's first line: for the secret key, the key itself.
    secret = settings.DATA_DIR / "secret_key"
    path = path.replace("SECRET", str(secret)).replace("TRACES", str(trace_dir))
    (trace_dir.parent / "outside.csv").write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n")
    key = settings.SECRET_KEY
    client = api_as("owner")
    answers = [
        client.patch(f"/api/fleets/{review_fleet.pk}/", {"toml": _with_trace(path)}, format="json"),
        client.post("/api/fleets/", {"name": "x", "toml": _with_trace(path)}, format="json"),
        client.post("/api/runs/", {"scenario": _with_trace(path)}, format="json"),
        client.post("/api/runs/", {"config_version": review_fleet.latest_version().pk,
                                   "overrides": [f"traffic.trace={path}"]}, format="json"),
    ]
    for response in answers:
        assert response.status_code == 400, response.content
        text = response.content.decode()
        assert "is not a trace this server replays" in text and key not in text, text
    assert review_fleet.versions.count() == 1


def test_it_accepts_a_named_trace_and_an_uploaded_one(api_as, review_fleet):
    uploaded = _upload(api_as("owner"), review_fleet, "t.jsonl", GOOD_JSONL).json()["scenario"]["traffic"]["trace"]
    for trace in ("azure-conv-2023", uploaded):
        response = api_as("owner").patch(
            f"/api/fleets/{review_fleet.pk}/", {"toml": _with_trace(trace)}, format="json")
        assert response.status_code == 200, response.content


def test_it_stores_a_trace_whose_name_is_unusable_under_a_plain_name(api_as, review_fleet, trace_dir):
    response = _upload(api_as("owner"), review_fleet, "***", GOOD_JSONL)
    assert response.status_code == 200, response.content
    assert response.json()["trace"] == "trace"
    assert [p.name for p in _stored_files(trace_dir)] == ["trace"]


def _age(path: Path, seconds: float = 2 * 3600) -> None:
    import os
    import time

    for p in [path, *path.rglob("*")]:
        os.utime(p, (time.time() - seconds, time.time() - seconds))


def test_the_clean_up_removes_only_trace_files_nothing_names(api_as, review_fleet, trace_dir):
    from django.core.management import call_command

    kept = Path(_upload(api_as("owner"), review_fleet, "t.jsonl", GOOD_JSONL).json()["scenario"]["traffic"]["trace"])
    # Files no config, version or run names: left by a deleted config, and by a lost upload.
    orphan = trace_dir / "999" / "abc" / "old.csv"
    orphan.parent.mkdir(parents=True)
    orphan.write_text(GOOD_CSV)
    lost = kept.parent.parent / "def" / "lost.csv"
    lost.parent.mkdir(parents=True)
    lost.write_text(GOOD_CSV)
    young = trace_dir / "998" / "ghi" / "now.csv"
    young.parent.mkdir(parents=True)
    young.write_text(GOOD_CSV)
    for path in (kept.parent, orphan.parent.parent, lost.parent):
        _age(path)

    from io import StringIO

    out = StringIO()
    call_command("cleanup_traces", "--dry-run", stdout=out)
    assert "would remove 2 unreferenced trace file(s)" in out.getvalue()
    assert orphan.exists() and lost.exists()
    call_command("cleanup_traces", stdout=out)
    assert kept.exists()  # the version names it
    assert not orphan.exists() and not orphan.parent.parent.exists()
    assert not lost.exists() and kept.parent.parent.exists()
    assert young.exists()  # younger than the grace period: an upload may be on its way
    # Once the config is gone, nothing names its trace.
    review_fleet.delete()
    from reviewer.tasks import cleanup_traces

    assert cleanup_traces() == 1
    assert not kept.exists()


def test_it_refuses_an_upload_past_the_owners_trace_storage_quota_naming_the_setting(
        api_as, review_fleet, trace_dir, settings):
    settings.USER_TRACE_STORAGE_MAX_BYTES = len(GOOD_JSONL) + len(GOOD_CSV) - 1
    assert _upload(api_as("owner"), review_fleet, "t.jsonl", GOOD_JSONL).status_code == 200
    stored = _stored_files(trace_dir)
    response = _upload(api_as("owner"), review_fleet, "azure.csv", GOOD_CSV)
    assert response.status_code == 429
    assert response.json()["setting"] == "USER_TRACE_STORAGE_MAX_BYTES"
    assert "USER_TRACE_STORAGE_MAX_BYTES" in response.json()["detail"]
    assert _stored_files(trace_dir) == stored  # nothing half-saved
    assert api_as("owner").get(f"/api/fleets/{review_fleet.pk}/").json()["version"] == 2


def test_a_big_upload_is_stored_unparsed_answered_202_and_a_worker_makes_the_version(
        api_as, review_fleet, trace_dir, settings, monkeypatch):
    import emulator.scenario.traces as reader
    from reviewer.tasks import trace_upload

    settings.TRACE_PARSE_INLINE_MAX_BYTES = 100  # GOOD_CSV is bigger
    real = reader.read_trace

    def not_in_the_web_request(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the web request parsed the trace")

    monkeypatch.setattr(reader, "read_trace", not_in_the_web_request)
    client = api_as("owner")
    response = _upload(client, review_fleet, "azure.csv", GOOD_CSV)
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "pending" and body["name"] == "azure.csv" and body["version"] is None
    assert response["Location"] == body["status_url"] == f"/api/fleets/{review_fleet.pk}/trace/{body['id']}/"
    assert [p.read_text() for p in _stored_files(trace_dir)] == [GOOD_CSV]  # stored as it came
    assert review_fleet.versions.count() == 1
    assert client.get(body["status_url"]).json()["status"] == "pending"

    monkeypatch.setattr(reader, "read_trace", real)
    assert trace_upload.apply(args=[body["id"]]).get() == "done"  # what the docs worker runs (eager)
    done = client.get(body["status_url"]).json()
    assert done["status"] == "done" and done["version"] == 2 and done["error"] is None
    fleet = client.get(f"/api/fleets/{review_fleet.pk}/").json()
    assert fleet["version"] == 2 and fleet["trace"] == "azure.csv"
    assert Path(fleet["scenario"]["traffic"]["trace"]).read_text() == GOOD_CSV
    # Sent again (a redelivered task), it does nothing more.
    assert trace_upload.apply(args=[body["id"]]).get() == "done"
    assert review_fleet.versions.count() == 2


def test_a_bad_big_traces_error_is_reported_on_its_status_url_and_nothing_is_kept(
        api_as, review_fleet, trace_dir, settings):
    from reviewer.tasks import trace_upload

    settings.TRACE_PARSE_INLINE_MAX_BYTES = 10
    client = api_as("owner")
    bad = GOOD_JSONL.replace('"prompt_tokens": 100', '"prompt_tokens": "many"', 1)
    response = _upload(client, review_fleet, "t.jsonl", bad)
    assert response.status_code == 202, response.content
    url = response.json()["status_url"]
    assert trace_upload.apply(args=[response.json()["id"]]).get() == "failed"
    failed = client.get(url).json()
    assert failed["status"] == "failed" and failed["field"] == "trace" and failed["version"] is None
    assert failed["error"].startswith("trace: ") and "t.jsonl line 1" in failed["error"], failed
    assert "prompt_tokens" in failed["error"]
    assert review_fleet.versions.count() == 1 and _stored_files(trace_dir) == []
    assert api_as("outsider").get(url).status_code == 404
