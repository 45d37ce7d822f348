"""Benchmark: publishing a review that holds many drafts.

    python benchmarks/bench_publish.py [--drafts 200] [--replies 50] [--authors 3]

Makes a fresh SQLite database in a temporary directory, a session with a
reviewer, a second reviewer and N authors, then has the reviewer file the
given number of draft findings (every tenth mentions the second reviewer) and
draft replies, and publishes them in one review. Prints the time and the
database queries the publication took, the notifications it made and the
machine. Timing decides nothing here; it is reported.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drafts", type=int, default=200)
    parser.add_argument("--replies", type=int, default=50)
    parser.add_argument("--authors", type=int, default=3)
    args = parser.parse_args()

    data_dir = tempfile.mkdtemp(prefix="bench-publish-")
    os.environ["DATA_DIR"] = data_dir
    os.environ.pop("DATABASE_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewer.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    # Live events go to an in-process layer: the figure is the database's work.
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    call_command("migrate", verbosity=0)

    from reviewer.models import Notification
    from reviewer.review import services
    from reviewer.review.publishing import review_publish

    users = get_user_model().objects
    owner = users.create_user("owner", email="owner@example.test")
    reviewer = users.create_user("reviewer", email="reviewer@example.test")
    second = users.create_user("second", email="second@example.test")
    authors = [users.create_user(f"author{i}", email=f"author{i}@example.test") for i in range(args.authors)]
    doc = services.doc_create(owner=owner, title="Doc", body="The dispatcher holds the only copy of the queue.\n")
    session = services.session_create(owner=owner, doc=doc, reviewers=[reviewer, second], authors=authors,
                                      file_directly=True)
    target = services.finding_create(session=session, author=second, review_pass="trace", title="Published one")
    session.file_directly = False
    session.save()
    for i in range(args.drafts):
        body = "@second please check the figure." if i % 10 == 0 else "No standby takes the queue over."
        services.finding_create(session=session, author=reviewer, review_pass="trace", title=f"Draft {i}",
                                body=body, anchor_exact="the only copy of the queue")
    for i in range(args.replies):
        services.reply_create(finding=target, author=reviewer, body=f"Reply {i}")

    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        review = review_publish(session=session, reviewer=reviewer, verdict="needs_changes")
        elapsed = time.perf_counter() - started
    print(f"published {review.findings_published} findings and {review.replies_published} replies "
          f"in {elapsed * 1000:.0f} ms, {len(queries)} queries")
    print(f"notifications made: {Notification.objects.count()} "
          f"({Notification.objects.filter(kind='mention').count()} mentions, "
          f"{Notification.objects.filter(kind='published').count()} to authors)")
    print(f"machine: {platform.machine()} {platform.system()} {platform.release()}, "
          f"python {platform.python_version()}, {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
