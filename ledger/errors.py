"""The ledger's own exceptions, and where sqlite3 errors are translated (psycopg's: `ledger.pgstore`).

Everything above `ledger` catches `LedgerError` and prints its message as one
line; nobody else needs to know what sqlite3 (or psycopg) raises.
"""

from __future__ import annotations

import os
import shutil
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
    """The file exists but is not a memtape ledger (or is damaged)."""


class NoLedger(NotALedger):
    """Nothing is there yet: no ledger file (or table) to read."""


class NewerSchema(LedgerError):
    """The ledger was written by a newer memtape than this one."""


class AppendOnlyViolation(LedgerError):
    """Someone tried to UPDATE or DELETE an event."""


class LedgerLocked(LedgerError):
    """Another process held the write lock beyond the busy timeout."""


class LedgerReadOnly(LedgerError):
    """The ledger or its directory cannot be written."""


class DiskFull(LedgerError):
    """The disk filled up during a write; the transaction was rolled back, nothing was deleted."""


#: below this many free bytes an I/O error of SQLite is taken for a full disk (it often reports
#: a WAL or journal that cannot grow as SQLITE_IOERR rather than SQLITE_FULL)
NEARLY_FULL = 1 << 20


def disk_full(path: str | os.PathLike[str]) -> DiskFull:
    """The one-line error of a full disk under `path`: what was refused and what to do."""
    return DiskFull(f"{path}: disk full; nothing was written (free some space and run it again)")


def is_full(path: str | os.PathLike[str]) -> bool:
    """Is the file system holding `path` (or its nearest existing parent) out of space?"""
    where = os.path.abspath(path)
    while not os.path.exists(where) and os.path.dirname(where) != where:
        where = os.path.dirname(where)
    try:
        return shutil.disk_usage(where).free < NEARLY_FULL
    except OSError:
        return False


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


class DuplicateEvent(LedgerError):
    """An event with this id is already in the ledger; nothing of the batch was written."""


#: SQLite's primary result codes (`sqlite3.Error.sqlite_errorcode & 0xFF`) and the error each is
SQLITE_BUSY, SQLITE_LOCKED, SQLITE_READONLY, SQLITE_IOERR, SQLITE_CORRUPT = 5, 6, 8, 10, 11
SQLITE_FULL, SQLITE_CANTOPEN, SQLITE_CONSTRAINT, SQLITE_NOTADB = 13, 14, 19, 26
#: extended codes of SQLITE_CONSTRAINT: a trigger's RAISE (only the append-only triggers raise), UNIQUE, PRIMARY KEY
SQLITE_CONSTRAINT_TRIGGER, SQLITE_CONSTRAINT_UNIQUE, SQLITE_CONSTRAINT_PRIMARYKEY = 1811, 2067, 1555


def describe_sqlite_error(exc: sqlite3.Error, path: str) -> LedgerError:
    """Map a sqlite3 error to the project's exception by its result code, with a one-line message."""
    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    code: int | None = getattr(exc, "sqlite_errorcode", None)  # absent on errors the module raises itself
    primary = code & 0xFF if code is not None else None
    if code == SQLITE_CONSTRAINT_TRIGGER:
        return AppendOnlyViolation("ledger is append-only")
    if code in (SQLITE_CONSTRAINT_UNIQUE, SQLITE_CONSTRAINT_PRIMARYKEY):
        # the stream version is assigned under the write lock, so only a caller's id can repeat
        return DuplicateEvent(f"{path}: an event with this id is already in the ledger ({msg})")
    if primary in (SQLITE_BUSY, SQLITE_LOCKED):
        return LedgerLocked(f"{path}: database is locked by another process (busy timeout exceeded)")
    if primary == SQLITE_READONLY:
        return LedgerReadOnly(f"{path}: cannot write (read-only file or directory)")
    if primary == SQLITE_FULL or (primary == SQLITE_IOERR and is_full(path)):
        return disk_full(path)
    if primary == SQLITE_IOERR:
        return DiskFull(f"{path}: disk I/O error ({msg}); the write was rolled back")
    if primary == SQLITE_CANTOPEN:
        return LedgerReadOnly(f"{path}: cannot open the database file (missing or unwritable directory)")
    if primary in (SQLITE_NOTADB, SQLITE_CORRUPT):
        return NotALedger(f"{path}: not a memtape ledger or damaged ({msg})")
    return LedgerError(f"{path}: {msg}")


@contextmanager
def translated(path: str) -> Iterator[None]:
    """The single boundary where sqlite3 exceptions become LedgerError."""
    try:
        yield
    except sqlite3.Error as exc:
        raise describe_sqlite_error(exc, path) from exc


class RunConflict(ConcurrencyConflict):
    """A write the run's ledger contradicts: the run is finished (or already exists), or its step
    number was recorded with other content. The message names the run; nothing was written."""


class KeyReused(InvalidEvent):
    """An idempotency key that already answered another request; nothing was written."""


class AnswerGone(LedgerError):
    """The answer kept for an idempotency key held what a later `forget` removed: it is not given
    again (HTTP 410 Gone); nothing was written."""
