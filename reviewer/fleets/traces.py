"""Request traces uploaded to fleet configs.

An uploaded trace is checked with the emulator's own reader, kept as a file in
``TRACE_UPLOAD_DIR/<config id>/<random>/<its name>``, and the config gets a new
version whose ``traffic.trace`` is that file's absolute path. The scenario thus
stays an ordinary emulator scenario: the Celery worker that plays a run reads
the file by the path in the run's scenario, with no help from the web app, and
an older version keeps replaying the trace it was saved with. Every worker must
therefore see ``TRACE_UPLOAD_DIR`` at the same path (shared storage when the
workers run on several machines).

Nothing is half-saved: a refused upload leaves no file and no version.
"""

from __future__ import annotations

import copy
import shutil
import uuid
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction

from reviewer.errors import Invalid, OverLimit
from reviewer.fleets.scenario_toml import scenario_dict_to_toml
from reviewer.models.review import FleetConfig
from reviewer.ops.uploads import stage_upload
from reviewer.review import services as review


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


def fleet_config_trace_upload(*, config: FleetConfig, author: User, upload: UploadedFile) -> FleetConfig:
    """Check ``upload`` as a request trace, store it and make a new version of
    ``config`` that replays it (``traffic.trace``).

    Raises ``TooLarge`` over ``UPLOAD_MAX_BYTES`` and ``Invalid`` (field ``trace``)
    with the reader's one-line error naming the file, line and field.
    """
    from emulator.scenario.traces import TraceError, read_trace

    check_trace_quota(config.owner, upload.size)
    root = Path(settings.TRACE_UPLOAD_DIR) / str(config.pk)
    # No extension by default: the reader then tells CSV from JSONL by the first line.
    staged = stage_upload(upload, directory=root, default_name="trace")
    stored_dir = staged.parent
    try:
        try:
            # Read once here so that a bad file is refused now, not by a run later.
            read_trace(staged, max_bytes=settings.UPLOAD_MAX_BYTES)
        except TraceError as exc:
            raise Invalid("trace", f"trace: {exc}") from None
        # A name no later upload reuses, so older versions keep their own file.
        stored_dir = staged.parent.rename(root / uuid.uuid4().hex)
        path = stored_dir / staged.name
        with transaction.atomic():
            locked = FleetConfig.objects.select_for_update().get(pk=config.pk)
            data = copy.deepcopy(locked.scenario)
            data.setdefault("traffic", {})["trace"] = str(path)
            try:
                toml = scenario_dict_to_toml(data)
                return review.fleet_config_save(config=locked, author=author, toml=toml)
            except ValidationError as exc:
                raise Invalid("trace", f"trace: {' '.join(exc.messages)}") from None
    except BaseException:
        shutil.rmtree(stored_dir, ignore_errors=True)
        raise


#: A stored trace directory younger than this is left alone by the clean-up: its
#: upload may still be on its way to a version.
CLEANUP_GRACE_S = 3600.0


def _referenced_traces() -> set[str]:
    """The trace paths some config, config version, run or sweep still names."""
    from reviewer.models import EmulatorRun, FleetConfigVersion, Sweep

    referenced: set[str] = set()
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
    import time

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
