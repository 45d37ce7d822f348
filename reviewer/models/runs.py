"""Emulator runs: a scenario played at a chosen speed, its frames, the live
commands sent to it, and sweeps of many runs over one key.

A run keeps the whole resolved scenario (not only a pointer to a config
version), so a re-run after a worker's death reproduces the same frames even if
the config has been edited since. The workflows live in
:mod:`reviewer.runs.services`; the rules about one row live here.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from reviewer.models.fields import OrderedJSONField


class RunStatus(models.TextChoices):
    """Where a run stands. ``done``, ``cancelled`` and ``failed`` are final."""

    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    CANCELLED = "cancelled", "Cancelled"
    FAILED = "failed", "Failed"


FINAL_STATUSES = frozenset({RunStatus.DONE, RunStatus.CANCELLED, RunStatus.FAILED})
ACTIVE_STATUSES = frozenset({RunStatus.QUEUED, RunStatus.RUNNING})

# Multiples of real time a run can be played at; "max" runs flat out.
SPEEDS = ("1", "10", "100", "max")


class EmulatorRun(models.Model):
    """One play of a scenario with one seed, at one speed."""

    config_version = models.ForeignKey(
        "reviewer.FleetConfigVersion", on_delete=models.SET_NULL, null=True, blank=True,
        related_name="runs",
    )
    session = models.ForeignKey(
        "reviewer.ReviewSession", on_delete=models.CASCADE, null=True, blank=True,
        related_name="runs",
        help_text="The review session the run belongs to; its participants may watch it.",
    )
    sweep = models.ForeignKey(
        "reviewer.Sweep", on_delete=models.CASCADE, null=True, blank=True, related_name="runs"
    )
    sweep_value = models.FloatField(null=True, blank=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="emulator_runs"
    )

    scenario = OrderedJSONField(help_text="The resolved scenario (Scenario.to_dict()).")
    overrides = models.JSONField(default=list, blank=True)
    seed = models.BigIntegerField()
    speed = models.CharField(max_length=4, default="10")
    layout = OrderedJSONField(default=dict, blank=True)

    status = models.CharField(max_length=9, choices=RunStatus.choices, default=RunStatus.QUEUED)
    reason = models.TextField(blank=True, help_text="Why a run failed or was cancelled.")
    summary = OrderedJSONField(null=True, blank=True)
    behind = models.BooleanField(default=False, help_text="The run fell behind its speed.")
    frames_stored = models.PositiveIntegerField(default=0)
    sim_s = models.FloatField(default=0.0, help_text="Simulated time reached.")

    worker = models.CharField(max_length=200, blank=True, help_text="The Celery worker holding it.")
    attempts = models.PositiveIntegerField(default=0)
    dispatches = models.PositiveIntegerField(
        default=0,
        help_text="Times a lost queued run was handed to the broker again; only the latest hand-off starts it.",
    )
    enqueued_at = models.DateTimeField(default=timezone.now, help_text="When the run was last handed to the broker.")
    awaiting_slot = models.BooleanField(
        default=False,
        help_text="Queued in the database until the dispatcher hands it to the broker for a free worker slot.",
    )
    expected_requests = models.BigIntegerField(
        default=0, help_text="Simulated requests the scenario is expected to offer (for the budgets)."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["status", "heartbeat_at"]),
            models.Index(fields=["started_by", "status"]),
            models.Index(fields=["status", "awaiting_slot"]),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.status})"

    @property
    def is_final(self) -> bool:
        """True once the run is done, cancelled or failed."""
        return self.status in FINAL_STATUSES

    @property
    def duration_s(self) -> float:
        """Simulated length of the run."""
        return float(self.scenario.get("duration_s", 0.0))

    @property
    def wall_s(self) -> float:
        """Wall time the run takes at its speed (duration / speed); 0 for ``max``, which is not paced."""
        return 0.0 if self.speed == "max" else self.duration_s / float(self.speed)

    @property
    def speed_factor(self) -> float | None:
        """Simulated seconds per wall second; None for ``max``."""
        return None if self.speed == "max" else float(self.speed)

    def speed_for_json(self) -> int | str:
        """The speed as clients send it: 1, 10, 100 or "max"."""
        return "max" if self.speed == "max" else int(self.speed)


class RunFrame(models.Model):
    """One metrics frame of a run (``Frame.to_dict()`` plus ``behind``)."""

    run = models.ForeignKey(EmulatorRun, on_delete=models.CASCADE, related_name="frames")
    i = models.PositiveIntegerField()
    t_s = models.FloatField()
    data = models.JSONField()

    class Meta:
        ordering = ["run", "i"]
        constraints = [models.UniqueConstraint(fields=["run", "i"], name="runframe_unique_index")]

    def __str__(self) -> str:
        return f"run {self.run_id} frame {self.i}"


class CommandKind(models.TextChoices):
    """What a live command asks of a running run."""

    FAULT = "fault", "Fault"
    CANCEL = "cancel", "Cancel"


class RunCommand(models.Model):
    """A fault or a cancel sent to a running run.

    The task applies pending commands between frames and records where: after
    ``applied_after_frame`` frames, at simulated time ``applied_at_s``. A re-run
    of the run replays recorded faults at exactly those points.
    """

    run = models.ForeignKey(EmulatorRun, on_delete=models.CASCADE, related_name="commands")
    kind = models.CharField(max_length=6, choices=CommandKind.choices)
    command = models.CharField(max_length=200, blank=True, help_text='e.g. "kill host:2"')
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    applied_after_frame = models.PositiveIntegerField(null=True, blank=True)
    applied_at_s = models.FloatField(null=True, blank=True)
    error = models.TextField(blank=True, help_text="Why the engine refused the command.")

    class Meta:
        ordering = ["run", "id"]

    def __str__(self) -> str:
        return f"{self.kind} {self.command}".strip()

    @property
    def is_applied(self) -> bool:
        """True once the task has acted on the command."""
        return self.applied_after_frame is not None


class Sweep(models.Model):
    """Many runs of one scenario at speed max, one per value of one key."""

    session = models.ForeignKey(
        "reviewer.ReviewSession", on_delete=models.CASCADE, null=True, blank=True,
        related_name="sweeps",
    )
    config_version = models.ForeignKey(
        "reviewer.FleetConfigVersion", on_delete=models.SET_NULL, null=True, blank=True,
        related_name="sweeps",
    )
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sweeps"
    )
    scenario = OrderedJSONField(help_text="The scenario before the swept key is set.")
    key = models.CharField(max_length=100, help_text='e.g. "hosts[0].count" or "traffic.qps"')
    values = models.JSONField()
    seed = models.BigIntegerField()
    target_p99_s = models.FloatField(null=True, blank=True)
    min_ok_rate = models.FloatField(null=True, blank=True)

    status = models.CharField(max_length=9, choices=RunStatus.choices, default=RunStatus.QUEUED)
    reason = models.TextField(blank=True)
    curve = OrderedJSONField(null=True, blank=True)
    answer = OrderedJSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"sweep {self.pk} of {self.key}"

    @property
    def is_final(self) -> bool:
        """True once the sweep is done or failed."""
        return self.status in FINAL_STATUSES
