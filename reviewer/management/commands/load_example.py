"""``manage.py load_example``: the example reviews, each a design doc, its fleet config
and a started review session (see :mod:`reviewer.review.example.reviews`).

Idempotent: a second run finds each example doc by its title and changes nothing.
Findings with emulator evidence get it from runs played here, flat out, in-process.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from reviewer.models import DesignDoc, EmulatorRun
from reviewer.review import services as review_services
from reviewer.review.document import review_document_update
from reviewer.review.example.reviews import EXAMPLES, FIRST, ExampleReview
from reviewer.review.publishing import review_publish
from reviewer.runs import player as run_player
from reviewer.runs import services as run_services

EXAMPLE_TITLE = FIRST.title
FLEET_NAME = FIRST.fleet_name

class Command(BaseCommand):
    help = "Load the example reviews (design docs, fleet configs, review sessions); safe to run twice."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--owner", help="username that owns the examples (default: the first superuser)"
        )
        parser.add_argument(
            "--example", action="append", choices=[e.key for e in EXAMPLES],
            help="load only this example (repeat for several; default: all of them)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        chosen = [e for e in EXAMPLES if not options.get("example") or e.key in options["example"]]
        missing = [e for e in chosen if not DesignDoc.objects.filter(title=e.title).exists()]
        if not missing:
            self.stdout.write("load_example: the example reviews are already loaded")
            return
        owner = self._owner(options.get("owner"))
        for example in chosen:
            if example in missing:
                self._load(example, owner)
            else:
                self.stdout.write(f"load_example: {example.title!r} is already loaded")

    @transaction.atomic
    def _load(self, example: ExampleReview, owner: Any) -> None:
        self.stdout.write(
            f"load_example: loading {example.title!r}"
            + (f" and playing its {len(example.runs)} emulator runs …" if example.runs else " …"))
        self.stdout.flush()
        doc = review_services.doc_create(owner=owner, title=example.title, body=example.body())
        fleet = review_services.fleet_config_create(
            owner=owner, name=example.fleet_name, toml=example.toml(), doc=doc,
            provenance=example.provenance or None)
        session = review_services.session_create(
            owner=owner, doc=doc, fleet_config=fleet, title=example.session_title)
        runs = {run.label: _play(owner, session, run.overrides) for run in example.runs}
        for finding in example.findings({label: run.summary or {} for label, run in runs.items()}):
            evidence = finding.pop("evidence", None)
            if evidence is not None:
                label, metric = evidence
                run = runs[label]
                finding.update(evidence_run_id=run.pk, evidence_t_from_s=0.0,
                               evidence_t_to_s=float(run.sim_s), evidence_metric=metric)
            review_services.finding_create(session=session, author=owner, **finding)
        review_document_update(session=session, author=owner, version=session.document_version,
                               **example.document)
        # The example's findings are a published review, so every participant sees them.
        review_publish(session=session, reviewer=owner, verdict=example.verdict, summary=example.summary)
        self.stdout.write(
            f"load_example: loaded doc {doc.pk}, fleet config {fleet.pk} and review session {session.pk}"
            + (f" with {len(runs)} emulator runs" if runs else "")
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


def _play(owner: Any, session: Any, overrides: tuple[str, ...]) -> Any:
    """A run of the session's fleet config, played to its end here (flat out)."""

    resolved = run_services.resolve_scenario(session=session, overrides=list(overrides))
    run = run_services.build_run(user=owner, resolved=resolved, seed=None, speed="max",
                                 session=session, overrides=list(overrides))
    status = run_player.run_play(run_id=run.pk, worker="load_example")
    if status != "done":
        raise CommandError(f"the example's run {run.pk} ({', '.join(overrides) or 'as written'}) ended "
                           f"{status}: {EmulatorRun.objects.get(pk=run.pk).reason}")
    return EmulatorRun.objects.get(pk=run.pk)
