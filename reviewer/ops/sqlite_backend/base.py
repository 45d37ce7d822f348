"""Django's SQLite backend, with this process's write transactions taken in turn.

SQLite lets one writer in at a time. A writer that finds the lock taken
sleeps and tries again (1, 2, 5, ... up to 100 ms between tries) until its
timeout, so with many threads of one web process writing at once the lock
goes to whichever thread happens to wake when it is free: most writes wait a
few milliseconds, and some wait seconds. Here a thread takes a lock of the
process before it begins a write transaction and gives it back when the
transaction ends, so this process's writers queue for SQLite's lock one at a
time and are woken as soon as it is their turn. Writers in other processes
(Celery workers) still meet this one at SQLite's own lock.

The wait for the process's lock is bounded by the same ``timeout`` as
SQLite's, and ends in the same ``OperationalError("database is locked")``.
"""

from __future__ import annotations

import threading
from typing import Any

from django.db import OperationalError
from django.db.backends.sqlite3 import base

#: Held by the thread of this process whose write transaction is open.
_WRITE_TURN = threading.Lock()


class DatabaseWrapper(base.DatabaseWrapper):
    """SQLite, with write transactions of one process taken in turn."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._holds_write_turn = False

    def _start_transaction_under_autocommit(self) -> None:
        # Only IMMEDIATE (and EXCLUSIVE) transactions write from their start; a
        # DEFERRED one may only read, and must not queue behind writers.
        if self.transaction_mode not in ("IMMEDIATE", "EXCLUSIVE"):
            super()._start_transaction_under_autocommit()
            return
        timeout = float(self.settings_dict.get("OPTIONS", {}).get("timeout", 5))
        if not _WRITE_TURN.acquire(timeout=timeout):
            raise OperationalError("database is locked (waited for this process's other writers)")
        self._holds_write_turn = True
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._give_back_write_turn()
            raise

    def _commit(self) -> None:
        try:
            super()._commit()
        finally:
            self._give_back_write_turn()

    def _rollback(self) -> None:
        try:
            super()._rollback()
        finally:
            self._give_back_write_turn()

    def _close(self) -> None:
        try:
            super()._close()
        finally:
            self._give_back_write_turn()

    def _give_back_write_turn(self) -> None:
        if self._holds_write_turn:
            self._holds_write_turn = False
            _WRITE_TURN.release()
