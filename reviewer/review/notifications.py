"""Notifications: who hears of what, the inbox, and e-mail.

Three things notify: an ``@username`` in a published finding or reply (the
named user, once per finding or reply, and only if they may see the session),
a published review (the session's authors) and a finding's state changed by
someone else (the finding's reviewer). Each notification is an inbox item;
the recipient's unread count is pushed to their browsers live, and an e-mail
goes out at once, in the daily digest or not at all, as they chose.

Nothing here answers a caller with who was notified, so a request that
mentions a name learns nothing about whether that name exists.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from reviewer import selectors
from reviewer.errors import Invalid
from reviewer.models.collaboration import (
    EmailMode,
    Notification,
    NotificationKind,
    NotificationSetting,
    Review,
)
from reviewer.models.review import Finding, FindingReply, ReviewSession
from reviewer.realtime import groups as realtime
from reviewer.representations import notification_url

log = logging.getLogger(__name__)

# @name as Django usernames spell it (letters, digits, @ . + - _), not inside an
# e-mail address (no word character right before the @).
MENTION = re.compile(r"(?<![\w.@+-])@([\w.+-]+)")

# Most names one text notifies; more than this is a list, not a mention.
MENTIONS_MAX = 20


def mentioned_names(text: str) -> list[str]:
    """The ``@names`` in ``text``, in order, each once, without trailing punctuation."""
    names: list[str] = []
    for match in MENTION.finditer(text or ""):
        name = match.group(1).rstrip(".")
        if name and name not in names:
            names.append(name)
    return names[:MENTIONS_MAX]


def email_mode(user: Any) -> str:
    """The user's e-mail setting (instant unless they chose otherwise)."""
    setting = NotificationSetting.objects.filter(user=user).values_list("email", flat=True).first()
    return setting or EmailMode.INSTANT


def email_mode_set(*, user: Any, email: str) -> NotificationSetting:
    """Store the user's e-mail setting."""
    if email not in EmailMode.values:
        raise Invalid("email", f"email: use one of {', '.join(EmailMode.values)}.")
    setting, _ = NotificationSetting.objects.update_or_create(user=user, defaults={"email": email})
    return setting


def _can_see(user: Any, session: ReviewSession) -> bool:
    return bool(user.is_active) and selectors.sessions_visible_to(user).filter(pk=session.pk).exists()


def notify(
    *,
    recipient: Any,
    kind: str,
    session: ReviewSession,
    text: str,
    actor: Any = None,
    finding: Finding | None = None,
    reply: FindingReply | None = None,
    review: Review | None = None,
) -> Notification | None:
    """Put an item in ``recipient``'s inbox, then (after commit) push their unread
    count and send the e-mail if they want it at once.

    Nobody is notified of their own doing, nor about a session they cannot see.
    """
    if actor is not None and recipient.pk == actor.pk:
        return None
    if not _can_see(recipient, session):
        return None
    item = Notification.objects.create(
        recipient=recipient, actor=actor, kind=kind, session=session, finding=finding, reply=reply,
        review=review, text=text[:300],
    )
    user_id = recipient.pk
    transaction.on_commit(lambda: push_unread(user_id))
    if email_mode(recipient) == EmailMode.INSTANT and recipient.email:
        transaction.on_commit(lambda: _send_instant(item.pk))
    return item


def notify_mentions(
    *, session: ReviewSession, actor: Any, finding: Finding, text: str, reply: FindingReply | None = None
) -> list[Notification]:
    """Notify each user named ``@name`` in ``text`` (a published finding's or reply's), once.

    A name already notified about this finding (or this reply) is skipped, so
    editing a finding does not notify again. Unknown names, and users who
    cannot see the session, are skipped silently.
    """
    names = mentioned_names(text)
    if not names:
        return []
    users = get_user_model().objects.filter(username__in=names, is_active=True)
    where = "a reply to" if reply is not None else "the finding"
    made: list[Notification] = []
    for user in users:
        already = Notification.objects.filter(
            recipient=user, kind=NotificationKind.MENTION, finding=finding, reply=reply
        ).exists()
        if already:
            continue
        item = notify(
            recipient=user, kind=NotificationKind.MENTION, session=session, actor=actor, finding=finding,
            reply=reply, text=f"{actor.get_username()} mentioned you in {where} \u201c{finding.title}\u201d",
        )
        if item is not None:
            made.append(item)
    return made


def push_unread(user_id: int) -> None:
    """Send the user's unread count to their open pages."""
    count = Notification.objects.filter(recipient_id=user_id, read_at__isnull=True).count()
    realtime.publish_now(realtime.user_group(user_id), {"type": "inbox.unread", "unread": count})


def mark_read(*, user: Any, notification: Notification | None = None) -> int:
    """Mark one of the user's notifications read, or all of them; how many changed."""
    qs = Notification.objects.filter(recipient=user, read_at__isnull=True)
    if notification is not None:
        qs = qs.filter(pk=notification.pk)
    changed = qs.update(read_at=timezone.now())
    if changed:
        transaction.on_commit(lambda: push_unread(user.pk))
    return changed


# --- e-mail ----------------------------------------------------------------


def _absolute(path: str) -> str:
    return settings.SITE_URL.rstrip("/") + path if settings.SITE_URL else path


def _send_instant(notification_id: int) -> None:
    """E-mail one notification, unless it already went out."""
    with transaction.atomic():
        item = (
            Notification.objects.select_for_update().select_related("recipient")
            .filter(pk=notification_id, emailed_at__isnull=True).first()
        )
        if item is None:
            return
        item.emailed_at = timezone.now()
        item.save(update_fields=["emailed_at"])
    try:
        send_mail(
            # A header holds one line: a title's line breaks become spaces.
            subject=" ".join(f"[Design review] {item.text}".split())[:150],
            message=f"{item.text}\n\n{_absolute(notification_url(item))}\n\n"
            "Change how you are e-mailed on your inbox page.\n",
            from_email=None,
            recipient_list=[item.recipient.email],
        )
    except Exception:  # the inbox is the record; a mail server that is down loses the e-mail only
        log.warning("could not e-mail notification %s", notification_id, exc_info=True)


def send_digests(*, now: datetime | None = None) -> int:
    """E-mail each user on the daily digest the notifications not yet e-mailed; how many e-mails went out."""
    now = now or timezone.now()
    digest_users = NotificationSetting.objects.filter(email=EmailMode.DAILY).values_list("user_id", flat=True)
    pending = (
        Notification.objects.filter(recipient_id__in=digest_users, emailed_at__isnull=True, created_at__lte=now)
        .select_related("recipient")
        .order_by("recipient_id", "created_at", "id")
    )
    by_user: dict[int, list[Notification]] = {}
    for item in pending:
        by_user.setdefault(item.recipient_id, []).append(item)
    sent = 0
    for items in by_user.values():
        recipient = items[0].recipient
        ids = [item.pk for item in items]
        if recipient.email:
            lines = [f"- {item.text}\n  {_absolute(notification_url(item))}" for item in items]
            try:
                send_mail(
                    subject=f"[Design review] {len(items)} notification{'s' if len(items) != 1 else ''} today",
                    message="\n".join(lines) + "\n",
                    from_email=None,
                    recipient_list=[recipient.email],
                )
            except Exception:
                log.warning("could not e-mail the digest of user %s", recipient.pk, exc_info=True)
                continue
            sent += 1
        # Without an address the digest has nowhere to go; the inbox still holds the items.
        Notification.objects.filter(pk__in=ids).update(emailed_at=now)
    return sent


def notify_many(recipients: Iterable[Any], **kwargs: Any) -> list[Notification]:
    """:func:`notify` each of ``recipients`` with the same item."""
    made = [notify(recipient=r, **kwargs) for r in recipients]
    return [item for item in made if item is not None]
