"""The review document of a session: its opening, what the doc gets right, and the
restatement. Participants edit it; a write must carry the ``document_version``
it was read at, as a finding's does, and viewers hear of every change.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from reviewer.errors import Conflict, Invalid
from reviewer.models.review import ReviewSession
from reviewer.realtime import groups as realtime
from reviewer.representations import review_document_representation

DOCUMENT_FIELDS = ("opening", "strengths", "restatement")


@transaction.atomic
def review_document_update(
    *,
    session: ReviewSession,
    author: User,
    version: int,
    opening: str | None = None,
    strengths: str | None = None,
    restatement: str | None = None,
) -> ReviewSession:
    """Change the parts of the review document that are given (None leaves a part as it is).

    Raises :class:`Conflict` carrying the current version when ``version`` is stale.
    """
    session = ReviewSession.objects.select_for_update().get(pk=session.pk)
    if version != session.document_version:
        raise Conflict(
            f"The review document was changed meanwhile (version {session.document_version}, "
            f"you sent {version}); reload it and apply your change again.",
            current=session.document_version,
        )
    changes = {"opening": opening, "strengths": strengths, "restatement": restatement}
    limit = settings.REVIEW_DOCUMENT_MAX_CHARS
    changed = False
    for name in DOCUMENT_FIELDS:
        value = changes[name]
        if value is None:
            continue
        if len(value) > limit:
            raise Invalid(name, f"{name}: {len(value):,} characters is over the {limit:,} it may hold "
                                "(REVIEW_DOCUMENT_MAX_CHARS); shorten it")
        if value != getattr(session, name):
            setattr(session, name, value)
            changed = True
    if not changed:
        return session
    session.document_version += 1
    session.document_updated_at = timezone.now()
    session.document_updated_by = author
    session.save(update_fields=[*DOCUMENT_FIELDS, "document_version", "document_updated_at",
                                "document_updated_by", "updated_at"])
    realtime.session_event(session.pk, "document.updated", {"document": review_document_representation(session)})
    return session
