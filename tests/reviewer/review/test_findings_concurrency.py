"""A finding filed while the doc is being revised lands on the new revision.

On SQLite writers serialize anyway (IMMEDIATE transactions); on PostgreSQL the
doc's row lock is what orders the two, so the suite's PostgreSQL leg is where
this test bites.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import close_old_connections, transaction
from review_data_fixtures import *  # noqa: F403

from reviewer.models import DesignDoc, Finding
from reviewer.review import services


@pytest.mark.django_db(transaction=True)
def test_it_anchors_a_finding_filed_during_a_revision_on_the_new_revision(
    open_review: Any, people: dict[str, Any]
) -> None:
    doc_id = open_review.doc_id
    revised = threading.Event()
    errors: list[BaseException] = []

    def revise() -> None:
        try:
            with transaction.atomic():
                doc = DesignDoc.objects.select_for_update().get(pk=doc_id)
                body = "## Preface\nA new first paragraph.\n\n" + doc.body
                services.doc_revise(doc=doc, author=people["owner"], body=body)
                revised.set()
                time.sleep(0.8)  # the finding below is filed while this is uncommitted
        except BaseException as exc:  # surfaced in the main thread
            errors.append(exc)
            revised.set()
        finally:
            close_old_connections()

    def file_finding() -> None:
        try:
            revised.wait(5)
            services.finding_create(
                session=open_review, author=people["reviewer"], review_pass="trace",
                title="Round-robin ignores busy workers",
                anchor_exact="The queue sends each batch to the next worker in round-robin order.",
            )
        except BaseException as exc:
            errors.append(exc)
        finally:
            close_old_connections()

    threads = [threading.Thread(target=revise), threading.Thread(target=file_finding)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    finding = Finding.objects.get(title="Round-robin ignores busy workers")
    assert finding.revision.number == 2
    assert finding.orphaned is False
    body = finding.revision.body
    assert body[finding.anchor_start:finding.anchor_end] == finding.anchor_exact
