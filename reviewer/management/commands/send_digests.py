"""``manage.py send_digests``: e-mail the notification digest to users who chose the daily one."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from reviewer.review.notifications import send_digests


class Command(BaseCommand):
    help = ("E-mail each user on the daily digest the notifications not yet e-mailed "
            "(Celery beat also runs this daily at DIGEST_HOUR_UTC).")

    def handle(self, *args: Any, **options: Any) -> None:
        sent = send_digests()
        self.stdout.write(f"send_digests: {sent} digest e-mail{'s' if sent != 1 else ''} sent")
