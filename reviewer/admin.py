"""Django admin for review data (staff only, as the admin site is).

Saves go through the review services, so an admin edit makes doc revisions
and fleet config versions exactly as the API does, and re-anchors findings.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from emulator.analysis.numbers import compute
from emulator.scenario import Scenario, ScenarioError
from reviewer.models.collaboration import Notification, Review
from reviewer.models.review import (
    DesignDoc,
    DocRevision,
    Finding,
    FindingReply,
    FleetConfig,
    FleetConfigVersion,
    ReviewSession,
)
from reviewer.review import services


class DocRevisionInline(admin.TabularInline):
    """A doc's revisions, read-only: they are history."""

    model = DocRevision
    extra = 0
    can_delete = False
    fields = ["number", "title", "author", "created_at"]
    readonly_fields = fields
    ordering = ["-number"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(DesignDoc)
class DesignDocAdmin(admin.ModelAdmin):
    """Docs; saving a changed title or body makes a new revision."""

    list_display = ["title", "owner", "updated_at"]
    search_fields = ["title", "body"]
    readonly_fields = ["created_at", "updated_at"]
    inlines = [DocRevisionInline]

    def save_model(self, request: HttpRequest, obj: DesignDoc, form: Any, change: bool) -> None:
        if not change:
            created = services.doc_create(owner=obj.owner, title=obj.title, body=obj.body)
            obj.pk = created.pk
            return
        result = services.doc_revise(doc=obj, author=request.user, title=obj.title, body=obj.body)
        if "owner" in form.changed_data:  # the service saves title and body only
            DesignDoc.objects.filter(pk=obj.pk).update(owner=obj.owner)
        if result.pending:
            self.message_user(request, "The open findings are being moved to the new revision in the background.")
        if result.orphaned:
            titles = ", ".join(f.title for f in result.orphaned)
            self.message_user(request, f"Findings whose quote is no longer in the doc: {titles}")


class FleetConfigForm(forms.ModelForm):
    """The scenario edited as TOML; the emulator's key-path errors land on the field.

    The model's ``clean`` validates the TOML once and reports on ``toml``; a
    second check here would leave the field out of the instance when it fails,
    and the model would then add "scenario: empty" beside the real error.
    """

    class Meta:
        model = FleetConfig
        fields = ["name", "owner", "doc", "toml"]
        widgets = {"toml": forms.Textarea(attrs={"rows": 30, "cols": 90, "spellcheck": "false"})}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # An empty scenario is the model's error too, with its fix, said once.
        self.fields["toml"].required = False


class FleetConfigVersionInline(admin.TabularInline):
    """A config's versions, read-only."""

    model = FleetConfigVersion
    extra = 0
    can_delete = False
    fields = ["number", "author", "created_at"]
    readonly_fields = fields
    ordering = ["-number"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(FleetConfig)
class FleetConfigAdmin(admin.ModelAdmin):
    """Fleet configs: TOML in a textarea, validated on save; the numbers pass read-only."""

    form = FleetConfigForm
    list_display = ["name", "owner", "doc", "updated_at"]
    search_fields = ["name"]
    readonly_fields = ["numbers_summary", "created_at", "updated_at"]
    fields = ["name", "owner", "doc", "toml", "numbers_summary", "created_at", "updated_at"]
    inlines = [FleetConfigVersionInline]

    @admin.display(description="Numbers pass")
    def numbers_summary(self, obj: FleetConfig) -> str:
        """The emulator's numbers for the saved scenario, as a table."""
        if not obj.pk or not obj.scenario:
            return "Save the config to see its numbers."
        try:
            report = compute(Scenario.from_dict(obj.scenario)).to_dict()
        except ScenarioError as exc:
            return f"The saved scenario no longer validates: {exc}"
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            ((f["model"], f["label"], f["display"], f["explain"]) for f in report["figures"]),
        )
        notes = format_html_join(
            "", "<li><strong>{}</strong> ({}): {}</li>",
            ((f["title"], f["severity"], f["body"]) for f in report["findings"]),
        )
        return format_html(
            "<table><thead><tr><th>Model</th><th>Figure</th><th>Value</th><th>How</th></tr></thead>"
            "<tbody>{}</tbody></table><ul>{}</ul>",
            rows,
            notes,
        )

    def save_model(self, request: HttpRequest, obj: FleetConfig, form: Any, change: bool) -> None:
        if not change:
            created = services.fleet_config_create(owner=obj.owner, name=obj.name, toml=obj.toml, doc=obj.doc)
            obj.pk = created.pk
            return
        services.fleet_config_save(config=obj, author=request.user, name=obj.name, toml=obj.toml, doc=obj.doc)
        if "owner" in form.changed_data:  # the service leaves the owner as it was
            FleetConfig.objects.filter(pk=obj.pk).update(owner=obj.owner)


@admin.register(ReviewSession)
class ReviewSessionAdmin(admin.ModelAdmin):
    """Review sessions and their participants."""

    list_display = ["__str__", "doc", "owner", "current_pass", "status", "updated_at"]
    list_filter = ["status", "current_pass"]
    search_fields = ["title", "doc__title"]
    filter_horizontal = ["reviewers", "authors"]
    # The review document is written on the session page or through the API,
    # where a stale version is refused; here it is shown.
    readonly_fields = ["created_at", "updated_at", "opening", "strengths", "restatement", "document_version",
                       "document_updated_at", "document_updated_by"]

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        """Save the reviewers; those removed lose their live feeds at once."""
        session = form.instance
        before = set(session.reviewers.values_list("pk", flat=True)) if change else set()
        super().save_related(request, form, formsets, change)
        after = set(session.reviewers.values_list("pk", flat=True))
        services.reviewers_removed(session=session, user_ids=before - after)


class FindingReplyInline(admin.StackedInline):
    """A finding's thread."""

    model = FindingReply
    fk_name = "finding"
    extra = 0
    fields = ["author", "body", "created_at"]
    readonly_fields = ["created_at"]


@admin.register(Finding)
class FindingAdmin(admin.ModelAdmin):
    """Findings; the anchor is shown, not edited (the API and pages anchor quotes)."""

    list_display = ["title", "session", "review_pass", "severity", "position", "status", "orphaned", "author"]
    list_filter = ["review_pass", "severity", "status", "orphaned"]
    search_fields = ["title", "body", "anchor_exact"]
    readonly_fields = [
        "revision", "anchor_exact", "anchor_prefix", "anchor_suffix", "anchor_start", "anchor_end",
        "orphaned", "version", "created_at", "updated_at", "merged_into",
        "published_at", "publication", "state", "state_reason", "fixed_revision", "state_changed_at",
    ]
    inlines = [FindingReplyInline]

    def save_model(self, request: HttpRequest, obj: Finding, form: Any, change: bool) -> None:
        # Admin edits bump the version too, so an open editor elsewhere gets 409,
        # and viewers of the session see the change live.
        if change:
            obj.version += 1
        super().save_model(request, obj, form, change)
        services.publish_finding(obj, "finding.updated" if change else "finding.created")


@admin.register(Review)
class ReviewAdmin(admin.ModelAdmin):
    """Published reviews, read-only: publishing goes through the session page or the API."""

    list_display = ["session", "reviewer", "verdict", "findings_published", "replies_published", "created_at"]
    list_filter = ["verdict"]
    readonly_fields = ["session", "reviewer", "verdict", "summary", "findings_published", "replies_published",
                       "created_at"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    """Inbox items, for support: who was told what, and whether it was read and e-mailed."""

    list_display = ["recipient", "kind", "text", "created_at", "read_at", "emailed_at"]
    list_filter = ["kind"]
    search_fields = ["recipient__username", "text"]
    readonly_fields = ["recipient", "actor", "kind", "session", "finding", "reply", "review", "text", "created_at",
                       "read_at", "emailed_at"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
