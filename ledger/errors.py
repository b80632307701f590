"""The ledger's own exceptions, and the one place sqlite3 errors are translated.

Everything above `ledger` catches `LedgerError` and prints its message as one
line; nobody else needs to know what sqlite3 (or psycopg) raises.
"""
from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager


class LedgerError(Exception):
    """Base for every error the project reports to a user as one line."""


class InvalidEvent(LedgerError):
    """An event (or a line of input) failed validation; nothing was written."""


class UnreadableEvent(LedgerError):
    """A stored event this code cannot read (edited payload, unknown version); the message names its seq."""


class ConcurrencyConflict(LedgerError):
    """A stream's version was not the one the writer expected."""


class NotALedger(LedgerError):
    """The file exists but is not a memledger ledger (or is damaged)."""


class NoLedger(NotALedger):
    """Nothing is there yet: no ledger file (or table) to read."""


class NewerSchema(LedgerError):
    """The ledger was written by a newer memledger than this one."""


class AppendOnlyViolation(LedgerError):
    """Someone tried to UPDATE or DELETE an event."""


class LedgerLocked(LedgerError):
    """Another process held the write lock beyond the busy timeout."""


class LedgerReadOnly(LedgerError):
    """The ledger or its directory cannot be written."""


class DiskFull(LedgerError):
    """The disk filled up during a write; the transaction was rolled back."""


class ChainBroken(LedgerError):
    """An event's content, link or position is not what the hash chain says: the ledger was edited.

    `seq` names the event (or the missing seq) so the message can be one line."""

    def __init__(self, seq: int, reason: str, rewritten_tail: int | None = None):
        super().__init__(f"chain broken at seq {seq}: {reason}")
        self.seq = seq
        self.reason = reason
        #: the last row, when it may be the one rewritten instead (only a remembered head can tell)
        self.rewritten_tail = rewritten_tail


class LedgerTampered(LedgerError):
    """The ledger is shorter than, or differs at, a head this memory remembered seeing."""


class UnknownItem(LedgerError):
    """A run, lesson, fact or other item named by the user does not exist."""


def describe_sqlite_error(exc: sqlite3.Error, path: str) -> LedgerError:
    """Map a sqlite3 error to the project's exception with a one-line message."""
    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    low = msg.lower()
    if "append-only" in low:
        return AppendOnlyViolation("ledger is append-only")
    if "locked" in low or "busy" in low:
        return LedgerLocked(f"{path}: database is locked by another process (busy timeout exceeded)")
    if "readonly" in low or "read-only" in low:
        return LedgerReadOnly(f"{path}: cannot write (read-only file or directory)")
    if "disk is full" in low or "disk full" in low or "database or disk is full" in low:
        return DiskFull(f"{path}: disk is full; the write was rolled back")
    if "unable to open" in low:
        return LedgerReadOnly(f"{path}: cannot open the database file (missing or unwritable directory)")
    if "not a database" in low or "malformed" in low or "file is encrypted" in low:
        return NotALedger(f"{path}: not a memledger ledger or damaged ({msg})")
    if "unique constraint failed: events.stream" in low:
        return ConcurrencyConflict(f"{path}: stream version conflict ({msg})")
    if "disk i/o error" in low:
        return DiskFull(f"{path}: disk I/O error ({msg}); the write was rolled back")
    return LedgerError(f"{path}: {msg}")


@contextmanager
def translated(path: str) -> Iterator[None]:
    """The single boundary where sqlite3 exceptions become LedgerError."""
    try:
        yield
    except sqlite3.Error as exc:
        raise describe_sqlite_error(exc, path) from exc
