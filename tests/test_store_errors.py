"""Driver errors become the ledger's own, by type, at one boundary per driver: each mapping, provoked
for real where a test can, else raised as the driver raises it (an error class with its code)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest
from psycopg import errors as pg_errors

from memtape.ledger.envelope import NewEvent, event
from memtape.ledger.errors import (
    SQLITE_CORRUPT,
    SQLITE_IOERR,
    AppendOnlyViolation,
    ConcurrencyConflict,
    DiskFull,
    DuplicateEvent,
    LedgerError,
    LedgerLocked,
    LedgerReadOnly,
    NotALedger,
    describe_sqlite_error,
    translated,
)
from memtape.ledger.events import LessonSeeded
from memtape.ledger.pgstore import PostgresStore, describe_pg_error, pg_translated
from memtape.ledger.store import SqliteStore


def lesson(n: int, id: str | None = None) -> NewEvent:
    return event(LessonSeeded(lesson_id=f"l{n}", lesson=f"lesson {n}", category="best_practice"), id=id)


# ---- SQLite: by result code ----------------------------------------------------------------


def test_sqlite_trigger_refusal_is_append_only(fresh_ledger: SqliteStore) -> None:
    fresh_ledger.append([lesson(1)])
    with pytest.raises(AppendOnlyViolation, match="^ledger is append-only$"), translated("x"):
        fresh_ledger.conn.execute("DELETE FROM events")


def test_sqlite_repeated_id_is_a_duplicate_event(fresh_ledger: SqliteStore) -> None:
    fresh_ledger.append([lesson(1, id="same")])
    with pytest.raises(DuplicateEvent, match="already in the ledger"):
        fresh_ledger.append([lesson(2, id="same")])
    assert fresh_ledger.head() == 1


def test_sqlite_busy_is_ledger_locked(ledger_path: Path) -> None:
    with SqliteStore.open(ledger_path) as holder, SqliteStore.open(ledger_path, busy_timeout=0) as waiter:
        with holder.atomic() as tx:
            tx.append([lesson(1)])
            with pytest.raises(LedgerLocked, match="locked by another process"):
                waiter.append([lesson(2)])
        assert waiter.append([lesson(2)])[0].seq == 2


def test_sqlite_read_only_is_ledger_read_only(fresh_ledger: SqliteStore) -> None:
    fresh_ledger.conn.execute("PRAGMA query_only = ON")
    with pytest.raises(LedgerReadOnly, match="cannot write"):
        fresh_ledger.append([lesson(1)])


def test_sqlite_full_is_disk_full(fresh_ledger: SqliteStore) -> None:
    pages = fresh_ledger.conn.execute("PRAGMA page_count").fetchone()[0]
    fresh_ledger.conn.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(DiskFull, match="disk full"):
        fresh_ledger.append([lesson(i) for i in range(500)])
    assert fresh_ledger.head() == 0


def test_sqlite_cannot_open_is_ledger_read_only(tmp_path: Path) -> None:
    (tmp_path / "ledger.db").mkdir()
    (tmp_path / "ledger.db" / "x").write_text("a directory is not a database file")
    with pytest.raises(LedgerReadOnly, match="cannot open"):
        SqliteStore.open(tmp_path / "ledger.db")


def test_sqlite_not_a_database_is_not_a_ledger(tmp_path: Path) -> None:
    (tmp_path / "ledger.db").write_bytes(b"this is not a database, " * 100)
    with pytest.raises(NotALedger, match="not a memtape ledger or damaged"):
        SqliteStore.open(tmp_path / "ledger.db")


@pytest.mark.parametrize(
    ("code", "error"),
    [(SQLITE_IOERR, DiskFull), (SQLITE_IOERR | (3 << 8), DiskFull), (SQLITE_CORRUPT, NotALedger), (1, LedgerError)],
)
def test_sqlite_codes_a_test_cannot_provoke(code: int, error: type[LedgerError]) -> None:
    """Disk I/O errors (extended codes included), a corrupt page, and any other code."""
    exc = sqlite3.OperationalError("the driver's message")
    exc.sqlite_errorcode = code
    mapped = describe_sqlite_error(exc, "ledger.db")
    assert type(mapped) is error and "\n" not in str(mapped)


def test_sqlite_message_alone_decides_nothing() -> None:
    """An error without a result code is not classified by its words."""
    assert type(describe_sqlite_error(sqlite3.OperationalError("database is locked"), "ledger.db")) is LedgerError


# ---- PostgreSQL: by exception class (SQLSTATE) ----------------------------------------------


def test_pg_trigger_refusal_is_append_only(pg_url: str) -> None:
    with PostgresStore.open(pg_url) as store:
        store.append([lesson(1)])
        with pytest.raises(AppendOnlyViolation, match="^ledger is append-only$"), pg_translated(store.where):
            store.conn.execute("UPDATE events SET payload = '{}'")


def test_pg_stale_expected_version_is_a_concurrency_conflict(pg_url: str) -> None:
    with PostgresStore.open(pg_url) as store:
        store.append([lesson(1)])
        with pytest.raises(ConcurrencyConflict, match="stream 'memory' is at version 1, expected 0"):
            store.append([lesson(2)], expected_version=0)
        with pytest.raises(ConcurrencyConflict), store.atomic() as tx:
            tx.append([lesson(2)], expected_version=5)
        assert store.head() == 1


def test_pg_repeated_id_is_a_duplicate_event(pg_url: str) -> None:
    with PostgresStore.open(pg_url) as store:
        store.append([lesson(1, id="same")])
        with pytest.raises(DuplicateEvent, match="already in the ledger"):
            store.append([lesson(2, id="same")])
        assert store.head() == 1


def test_pg_stream_version_unique_violation_is_a_concurrency_conflict(pg_url: str) -> None:
    with PostgresStore.open(pg_url) as store:
        store.append([lesson(1)])
        row = store.conn.execute("SELECT * FROM events WHERE seq = 1").fetchone()
        assert row is not None
        copy = (2, "other-id", *row[2:])
        with pytest.raises(ConcurrencyConflict, match="stream version conflict"), pg_translated(store.where):
            store.conn.execute(f"INSERT INTO events VALUES ({', '.join(['%s'] * 14)})", copy)


def test_pg_read_only_transaction_is_ledger_read_only(pg_url: str) -> None:
    with PostgresStore.open(pg_url) as store:
        store.conn.execute("SET default_transaction_read_only = on")
        with pytest.raises(LedgerReadOnly, match="cannot write"):
            store.append([lesson(1)])


def test_pg_cancelled_statement_is_named(pg_url: str) -> None:
    with PostgresStore.open(pg_url) as store:
        store.conn.execute("SET statement_timeout = 1")
        with pytest.raises(LedgerError, match="the statement was cancelled"), pg_translated(store.where):
            store.conn.execute("SELECT pg_sleep(1)")


@pytest.mark.parametrize(
    ("exc", "error", "words"),
    [
        (pg_errors.DiskFull("could not extend file"), DiskFull, "server out of space"),
        (pg_errors.OutOfMemory("out of memory"), DiskFull, "server out of space"),
        (pg_errors.InsufficientPrivilege("permission denied for table events"), LedgerReadOnly, "cannot write"),
        (pg_errors.InvalidCatalogName('database "x" does not exist'), LedgerError, "does not exist"),
        (
            psycopg.OperationalError("connection failed: FATAL:  password authentication failed"),
            LedgerError,
            "cannot use the PostgreSQL server: password authentication failed",
        ),
    ],
)
def test_pg_classes_a_test_cannot_provoke(exc: psycopg.Error, error: type[LedgerError], words: str) -> None:
    mapped = describe_pg_error(exc, "postgresql://db/memory")
    assert type(mapped) is error and words in str(mapped) and "\n" not in str(mapped)
