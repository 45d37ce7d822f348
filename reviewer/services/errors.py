"""Errors the services raise besides Django's ValidationError."""

from __future__ import annotations


class Conflict(Exception):
    """A write carried a stale version; ``current`` is the row's version now."""

    def __init__(self, message: str, *, current: int) -> None:
        super().__init__(message)
        self.current = current
