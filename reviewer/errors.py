"""What the services raise when they refuse a request: one hierarchy for all of them.

Every error names the field (or setting) at fault and says how to fix it, in a
message a user can act on. The services know nothing of HTTP or websockets;
:mod:`reviewer.api.errors` maps these classes to status codes and websocket
replies, in one place. The models keep Django's ``ValidationError`` for their
own row rules (``clean``); the same mapper answers those with 400.
"""

from __future__ import annotations


class ServiceError(Exception):
    """A refused request. ``field`` is the request field, key path or setting at fault."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class NotFound(ServiceError):
    """The thing asked for does not exist, or the user may not know that it does."""


class Forbidden(ServiceError):
    """The user may see the thing but not do this to it."""


class Conflict(ServiceError):
    """The request does not fit the current state: a stale version, or a run already over.

    ``current`` is the row's current version when the conflict is a stale one.
    """

    def __init__(self, message: str, *, current: int | None = None, field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.current = current


class Invalid(ServiceError):
    """A value that cannot be used as given; ``field`` is its path, e.g. ``values`` or ``anchor_exact``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message, field=field)


class OverLimit(ServiceError):
    """The user is over a limit; ``field`` names the setting that sets it."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(message, field=setting)


class TooLarge(OverLimit):
    """An upload over the size limit; ``field`` names the setting that sets it."""
