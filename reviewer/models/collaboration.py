"""Review as a team: published reviews with a verdict, the author's side of a
finding, and notifications (the inbox, and e-mail per each user's setting).

A reviewer's findings and replies are drafts (``published_at`` unset) until
they publish a :class:`Review`, which publishes every draft of theirs in the
session at once. Workflows live in :mod:`reviewer.review.publishing` and
:mod:`reviewer.review.notifications`.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Verdict(models.TextChoices):
    """What a reviewer concludes when they publish."""

    APPROVE = "approve", "Approve"
    NEEDS_CHANGES = "needs_changes", "Needs changes"
    COMMENT = "comment", "Comment"


class FindingState(models.TextChoices):
    """Where a published finding stands on the author's side."""

    OPEN = "open", "Open"
    FIXED = "fixed", "Fixed"
    WONT_FIX = "wont_fix", "Won't fix"
    REOPENED = "reopened", "Reopened"


class NotificationKind(models.TextChoices):
    """Why a user was notified."""

    MENTION = "mention", "Mentioned"
    PUBLISHED = "published", "Review published"
    STATE_CHANGED = "state_changed", "Finding state changed"


class EmailMode(models.TextChoices):
    """How a user wants notifications by e-mail."""

    INSTANT = "instant", "Instantly"
    DAILY = "daily", "Daily digest"
    OFF = "off", "Off"


class Review(models.Model):
    """One publication: a reviewer's drafts in a session, published together with a verdict."""

    session = models.ForeignKey("reviewer.ReviewSession", on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="reviews")
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    summary = models.TextField(blank=True, help_text="Markdown.")
    findings_published = models.PositiveIntegerField(default=0)
    replies_published = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "created_at", "id"]

    def __str__(self) -> str:
        return f"{self.reviewer} on {self.session}: {self.verdict}"


class Notification(models.Model):
    """One item of a user's inbox. ``emailed_at`` is set once it went out by e-mail
    (alone or in a digest), so nothing is mailed twice."""

    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications"
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    kind = models.CharField(max_length=16, choices=NotificationKind.choices)
    session = models.ForeignKey("reviewer.ReviewSession", on_delete=models.CASCADE, related_name="+")
    finding = models.ForeignKey(
        "reviewer.Finding", on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    reply = models.ForeignKey(
        "reviewer.FindingReply", on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    review = models.ForeignKey(Review, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    text = models.CharField(max_length=300)
    created_at = models.DateTimeField(auto_now_add=True)
    read_at = models.DateTimeField(null=True, blank=True)
    emailed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["recipient", "read_at"])]

    def __str__(self) -> str:
        return self.text


class NotificationSetting(models.Model):
    """A user's e-mail preference; a user without a row gets ``EmailMode.INSTANT``."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_setting"
    )
    email = models.CharField(max_length=8, choices=EmailMode.choices, default=EmailMode.INSTANT)

    def __str__(self) -> str:
        return f"{self.user}: {self.email}"
