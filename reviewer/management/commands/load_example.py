"""``manage.py load_example``: the example design doc, its fleet config and a review session.

Idempotent: a second run finds the example doc by its title and changes nothing.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from reviewer.models import DesignDoc, ReviewPass, Severity, Verdict
from reviewer.services import review as review_services
from reviewer.services.document import review_document_update
from reviewer.services.publishing import review_publish

EXAMPLE_TITLE = "Chat inference serving: gateway, dispatchers and GPU workers"
FLEET_NAME = "doc-as-written (Part 2 hosts: 2 big / 2 big / 5 small)"

# A few findings so that a new user sees what a review looks like; each quotes
# the example doc and is written in the dashboard's own words.
EXAMPLE_FINDINGS: list[dict[str, Any]] = [
    {
        "review_pass": ReviewPass.RESTATE,
        "severity": Severity.CLARIFY,
        "title": "\"Low latency\" next to a 1.5 s batch time",
        "body": "Every request spends at least one batch time (1.5 s) in a worker, plus the time "
        "its batch takes to fill. Ask what latency target the author has in mind: it cannot be "
        "sub-second with this engine.",
        "anchor_exact": "Keep latency low for every user.",
    },
    {
        "review_pass": ReviewPass.NUMBERS,
        "severity": Severity.FIX_NOW,
        "title": "The fleet is about 50 times too small for the peak goal",
        "body": "A batch holds 10,000 / 500 = 20 requests, so one worker serves 20 / 1.5 s, about "
        "13.3 QPS. 10k QPS needs about 750 workers; 1k QPS about 75. Three 10-unit hosts hold at "
        "most 15 small workers, about 200 QPS.",
        "anchor_exact": "Sustain 10,000 QPS at peak.",
    },
    {
        "review_pass": ReviewPass.TRACE,
        "severity": Severity.FIX_NOW,
        "trace_hop": "dispatcher",
        "title": "Round-robin pushes batches to workers that are still busy",
        "body": "Workers take one batch at a time, yet batches are handed out in rotation "
        "whatever each worker is doing. A batch can wait behind a busy worker while the next one "
        "sits idle. Let idle workers pull the oldest closed batch instead.",
        "anchor_exact": "That queue hands each batch to the next worker, in round-robin order.",
    },
]

# The example's review document, in the dashboard's own words about the example doc.
EXAMPLE_DOCUMENT: dict[str, str] = {
    "opening": (
        "Not ready to build as written: the fleet in the capacity plan serves about 200 requests per "
        "second against a 10,000 QPS peak goal, so either the goal or the hardware has to change first. "
        "Before shipping, fix three things: let idle workers pull batches instead of pushing them "
        "round-robin to busy ones; decide what a dispatcher failover may lose, since the in-memory queue "
        "exists only on the active dispatcher; and describe how each answer finds its waiting client "
        "connection on the way back."
    ),
    "strengths": (
        "- One dispatcher per model is the right split: each model's queue, batching and failover stay "
        "independent.\n"
        "- Batching by input tokens, with a token ceiling per batch, measures work in the unit the engine "
        "actually pays for.\n"
        "- Treating the inference engine as a black box keeps the doc's scope to routing and queueing, "
        "where its decisions are."
    ),
    "restatement": (
        "A chat product serves a small and a big model. Clients hold a synchronous HTTP connection open "
        "until their answer arrives. A stateless gateway authenticates and rate-limits each request and "
        "passes it to the dispatcher of the requested model; one active dispatcher per model (with a hot "
        "standby) queues requests in memory and closes batches of up to 10,000 input tokens, about 20 "
        "requests of 500 tokens. GPU workers take 2 (small) or 5 (big) of a host's 10 units, run one batch "
        "at a time in 1.5 s, and receive batches in round-robin order. The goals are 10,000 QPS at peak and "
        "low latency; the stated assumptions are a constant batch time and prompts about as long as "
        "answers."
    ),
}


EXAMPLE_SUMMARY = (
    "Not ready to build on yet: the fleet as sized cannot carry the stated peak, and the "
    "dispatch rule leaves work queued behind busy workers. Both are fixable in the doc."
)


class Command(BaseCommand):
    help = "Load the example review (design doc, fleet config, review session); safe to run twice."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--owner", help="username that owns the example (default: the first superuser)"
        )

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        if DesignDoc.objects.filter(title=EXAMPLE_TITLE).exists():
            self.stdout.write("load_example: the example review is already loaded")
            return
        owner = self._owner(options.get("owner"))
        body = resources.files("reviewer.example").joinpath("design-doc.md").read_text("utf-8")
        toml = resources.files("emulator.scenario.presets").joinpath("doc-as-written.toml").read_text("utf-8")
        doc = review_services.doc_create(owner=owner, title=EXAMPLE_TITLE, body=body)
        fleet = review_services.fleet_config_create(owner=owner, name=FLEET_NAME, toml=toml, doc=doc)
        session = review_services.session_create(
            owner=owner, doc=doc, fleet_config=fleet, title="Example review: chat inference serving"
        )
        for finding in EXAMPLE_FINDINGS:
            review_services.finding_create(session=session, author=owner, **finding)
        review_document_update(session=session, author=owner, version=session.document_version,
                               **EXAMPLE_DOCUMENT)
        # The example's findings are a published review, so every participant sees them.
        review_publish(session=session, reviewer=owner, verdict=Verdict.NEEDS_CHANGES, summary=EXAMPLE_SUMMARY)
        self.stdout.write(
            f"load_example: loaded doc {doc.pk}, fleet config {fleet.pk} and review session {session.pk}"
        )

    def _owner(self, username: str | None) -> Any:
        users = get_user_model().objects
        if username:
            try:
                return users.get(username=username)
            except users.model.DoesNotExist:
                raise CommandError(f"--owner: no user named {username!r}") from None
        owner = users.filter(is_superuser=True).order_by("pk").first()
        if owner is None:
            raise CommandError(
                "no superuser to own the example; create one (manage.py createsuperuser) "
                "or pass --owner USERNAME"
            )
        return owner
