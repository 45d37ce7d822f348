"""Request traces uploaded to fleet configs.

An uploaded trace is checked with the emulator's own reader, kept as a file in
``TRACE_UPLOAD_DIR/<config id>/<random>/<its name>``, and the config gets a new
version whose ``traffic.trace`` is that file's absolute path. The scenario thus
stays an ordinary emulator scenario: the Celery worker that plays a run reads
the file by the path in the run's scenario, with no help from the web app, and
an older version keeps replaying the trace it was saved with. Every worker must
therefore see ``TRACE_UPLOAD_DIR`` at the same path (shared storage when the
workers run on several machines).

Small uploads (up to ``TRACE_PARSE_INLINE_MAX_BYTES``) are checked in the request.
A bigger one is stored as it came, a :class:`~reviewer.models.TraceUpload` records it,
and a docs worker checks it and makes the version; the page asks its status URL.

Nothing is half-saved: a refused upload leaves no file and no version.
"""

from __future__ import annotations

import copy
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.utils import timezone

from emulator.scenario import traces as trace_files
from reviewer.errors import Invalid, OverLimit, ServiceError
from reviewer.fleets.scenario_toml import scenario_dict_to_toml
from reviewer.models import EmulatorRun, FleetConfigVersion, Sweep
from reviewer.models.review import FleetConfig, TraceUpload, TraceUploadStatus
from reviewer.ops.uploads import stage_upload
from reviewer.review import services as review
from reviewer.runs import broker


def uploaded_trace_name(config: FleetConfig) -> str | None:
    """The file name of the config's uploaded trace, or None if it replays none."""
    trace = (config.scenario.get("traffic") or {}).get("trace")
    if not trace:
        return None
    path = Path(trace)
    return path.name if path.is_absolute() and path.is_relative_to(settings.TRACE_UPLOAD_DIR) else None


def user_trace_bytes(user: User) -> int:
    """Bytes of the trace files stored for the fleet configs ``user`` owns."""
    root = Path(settings.TRACE_UPLOAD_DIR)
    total = 0
    for config_id in FleetConfig.objects.filter(owner=user).values_list("pk", flat=True):
        directory = root / str(config_id)
        if directory.is_dir():
            total += sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
    return total


def check_trace_quota(owner: User, size: int | None) -> None:
    """Refuse an upload that would take ``owner``'s stored traces over USER_TRACE_STORAGE_MAX_BYTES."""
    limit = settings.USER_TRACE_STORAGE_MAX_BYTES
    used = user_trace_bytes(owner)
    if used + (size or 0) > limit:
        raise OverLimit(
            "USER_TRACE_STORAGE_MAX_BYTES",
            f"upload: the traces stored for your fleet configs take {used:,} bytes; this one's "
            f"{size or 0:,} more would pass the limit of {limit:,} bytes (USER_TRACE_STORAGE_MAX_BYTES); "
            f"delete fleet configs you no longer need (their traces go with them) or ask for a higher limit",
        )


def _version_replaying(*, config: FleetConfig, author: User | None, path: Path) -> FleetConfig:
    """A new version of ``config`` whose ``traffic.trace`` is ``path`` (a checked, stored trace)."""
    with transaction.atomic():
        locked = FleetConfig.objects.select_for_update().get(pk=config.pk)
        data = copy.deepcopy(locked.scenario)
        data.setdefault("traffic", {})["trace"] = str(path)
        try:
            toml = scenario_dict_to_toml(data)
            return review.fleet_config_save(config=locked, author=author, toml=toml)
        except ValidationError as exc:
            raise Invalid("trace", f"trace: {' '.join(exc.messages)}") from None


def _check_trace(path: Path) -> None:
    """Read the stored trace once, so a bad file is refused now, not by a run later."""
    try:
        trace_files.read_trace(path, max_bytes=settings.UPLOAD_MAX_BYTES)
    except trace_files.TraceError as exc:
        raise Invalid("trace", f"trace: {exc}") from None


def _store(config: FleetConfig, upload: UploadedFile) -> Path:
    """Copy ``upload`` to a directory of its own that no later upload reuses; the file's path."""
    check_trace_quota(config.owner, upload.size)
    root = Path(settings.TRACE_UPLOAD_DIR) / str(config.pk)
    # No extension by default: the reader then tells CSV from JSONL by the first line.
    staged = stage_upload(upload, directory=root, default_name="trace")
    try:
        stored_dir = staged.parent.rename(root / uuid.uuid4().hex)
    except BaseException:
        shutil.rmtree(staged.parent, ignore_errors=True)
        raise
    return stored_dir / staged.name


def trace_parsed_in_request(upload: UploadedFile) -> bool:
    """Whether ``upload`` is small enough (TRACE_PARSE_INLINE_MAX_BYTES) to be checked in the request."""
    return upload.size is not None and upload.size <= settings.TRACE_PARSE_INLINE_MAX_BYTES


def fleet_config_trace_upload(*, config: FleetConfig, author: User, upload: UploadedFile) -> FleetConfig:
    """Check ``upload`` as a request trace, store it and make a new version of
    ``config`` that replays it (``traffic.trace``), all in the caller's process: for
    small uploads (see :func:`trace_upload_start` for the others).

    Raises ``TooLarge`` over ``UPLOAD_MAX_BYTES`` and ``Invalid`` (field ``trace``)
    with the reader's one-line error naming the file, line and field.
    """
    path = _store(config, upload)
    try:
        _check_trace(path)
        return _version_replaying(config=config, author=author, path=path)
    except BaseException:
        shutil.rmtree(path.parent, ignore_errors=True)
        raise


def trace_upload_start(*, config: FleetConfig, author: User, upload: UploadedFile) -> TraceUpload:
    """Store ``upload`` as it came and hand its check to a docs worker
    (``reviewer.tasks.trace_upload``), which then makes the version; the pending upload.

    The request reads nothing of the trace but its bytes: a trace of tens of MB takes
    seconds to parse. Quota and size limits are still refused here, at once.
    """
    path = _store(config, upload)
    try:
        with transaction.atomic():
            pending = TraceUpload.objects.create(config=config, author=author, name=path.name, path=str(path),
                                                 size=path.stat().st_size)
            broker.send_task_after_commit("trace_upload", [pending.pk], f"trace upload {pending.pk}",
                                          "nothing: upload the trace again")
    except BaseException:
        shutil.rmtree(path.parent, ignore_errors=True)
        raise
    return pending


def trace_upload_process(*, upload_id: int) -> TraceUpload:
    """Check a pending upload's trace and make the version that replays it; the upload,
    done or failed (its field and error naming the fix, its file removed). Idempotent."""
    pending = TraceUpload.objects.select_related("config", "author").get(pk=upload_id)
    if pending.status != TraceUploadStatus.PENDING:
        return pending
    path = Path(pending.path)
    try:
        if not path.is_file():
            raise Invalid("trace", f"trace: the stored file of {pending.name} is gone; upload it again")
        _check_trace(path)
        config = _version_replaying(config=pending.config, author=pending.author, path=path)
    except ServiceError as exc:
        shutil.rmtree(path.parent, ignore_errors=True)
        pending.status = TraceUploadStatus.FAILED
        pending.error_field = exc.field or "trace"
        pending.error = exc.message
    else:
        pending.status = TraceUploadStatus.DONE
        pending.version = config.latest_version()
    pending.finished_at = timezone.now()
    pending.save(update_fields=["status", "error_field", "error", "version", "finished_at"])
    return pending


def trace_upload_representation(pending: TraceUpload) -> dict[str, Any]:
    """What the status URL answers about an upload."""
    return {
        "id": pending.pk,
        "config": pending.config_id,
        "name": pending.name,
        "size": pending.size,
        "status": pending.status,
        "field": pending.error_field or None,
        "error": pending.error or None,
        "version": pending.version.number if pending.version else None,
        "status_url": f"/api/fleets/{pending.config_id}/trace/{pending.pk}/",
        "created_at": pending.created_at.isoformat() if pending.created_at else None,
        "finished_at": pending.finished_at.isoformat() if pending.finished_at else None,
    }


#: A stored trace directory younger than this is left alone by the clean-up: its
#: upload may still be on its way to a version.
CLEANUP_GRACE_S = 3600.0


def _referenced_traces() -> set[str]:
    """The trace paths some config, config version, run or sweep still names."""

    # A pending upload's file is waiting for its check in a docs worker.
    referenced: set[str] = set(TraceUpload.objects.filter(status=TraceUploadStatus.PENDING)
                               .values_list("path", flat=True))
    for model in (FleetConfig, FleetConfigVersion, EmulatorRun, Sweep):
        for scenario in model.objects.values_list("scenario", flat=True).iterator(chunk_size=500):
            trace = ((scenario or {}).get("traffic") or {}).get("trace") if isinstance(scenario, dict) else None
            if trace:
                referenced.add(str(trace))
    return referenced


def traces_cleanup(*, grace_s: float = CLEANUP_GRACE_S, dry_run: bool = False) -> list[Path]:
    """Remove stored trace files no fleet config, version, run or sweep names any more
    (their config was deleted, or an upload was refused half-way); the files removed.

    Each stored trace lives alone in ``TRACE_UPLOAD_DIR/<config id>/<random>/``; such a
    directory goes with its file, and a config's directory once it is empty. Files
    modified within ``grace_s`` are kept (an upload in progress).
    """

    root = Path(settings.TRACE_UPLOAD_DIR)
    if not root.is_dir():
        return []
    referenced = _referenced_traces()
    cutoff = time.time() - grace_s
    removed: list[Path] = []
    for config_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for stored_dir in sorted(p for p in config_dir.iterdir() if p.is_dir()):
            files = [p for p in stored_dir.rglob("*") if p.is_file()]
            if any(str(p) in referenced or p.stat().st_mtime > cutoff for p in files):
                continue
            if stored_dir.stat().st_mtime > cutoff and not files:
                continue
            removed.extend(files)
            if not dry_run:
                shutil.rmtree(stored_dir, ignore_errors=True)
        if not dry_run and not any(config_dir.iterdir()):
            config_dir.rmdir()
    return removed
