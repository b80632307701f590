"""The append-only PostgreSQL event store: the SQLite store's contract for fleets of agents.

Same table shape, same canonical rows and the same hash chain as
`ledger.store.SqliteStore` (the transaction logic is literally shared), so a
ledger copied between the two verifies identically. What PostgreSQL changes:

- `seq` is assigned under a transaction-scoped advisory lock keyed on the
  events table (the way mature PostgreSQL event stores serialise their global
  position): the writer takes the lock, then reads the head, then inserts.
  The lock is released only after the commit is visible, so a reader never
  sees seq N+1 before N has committed, and seq stays gapless with any number
  of writers on separate connections.
- Triggers refuse UPDATE, DELETE and TRUNCATE with 'ledger is append-only'.
- Each committing append sends `NOTIFY memledger_events, '<head seq>'`;
  `subscribe` LISTENs instead of watching files.
- `memledger_meta` names the application and the store schema version; a
  ledger written by a newer schema is refused with a one-line error.

Every psycopg error becomes a `LedgerError` in `pg_translated`, the one boundary.

Usage::

    store = PostgresStore.open("postgresql://memledger@db.internal/memory")
    store.append([event(LessonSeeded(...))])
    for e in store.subscribe(from_seq=1, stop=stop_event):
        print(e.seq, e.type)
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql as pg_sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from memledger.ledger.clock import Clock, normalize_ts, system_clock
from memledger.ledger.errors import AppendOnlyViolation, ConcurrencyConflict, DiskFull, LedgerError, LedgerLocked, LedgerReadOnly, NewerSchema, NoLedger, NotALedger
from memledger.ledger.events import NewEvent, RecordedEvent
from memledger.ledger.redact import Redactor, default_redactor
from memledger.ledger.store import (
    APPLICATION_ID,
    COLUMNS,
    GENESIS_HASH,
    STORE_SCHEMA_VERSION,
    Stats,
    Transaction,
    VerifyResult,
    _env_busy_timeout,
    chain_for,
    checked,
    read_filter,
    redacted_envelope,
    row_to_event,
    walk_chain,
)
from memledger.ledger.urls import display_url

T = TypeVar("T")
CHANNEL = "memledger_events"
META_TABLE = "memledger_meta"
_SELECT = f"SELECT {', '.join(COLUMNS)} FROM events"
_TEXT = 'text COLLATE "C"'  # byte order, like SQLite: ISO timestamps compare as text
_SCHEMA = [
    f"""CREATE TABLE {META_TABLE} (key text PRIMARY KEY, value text NOT NULL)""",
    f"""CREATE TABLE events (
        seq bigint PRIMARY KEY,
        id {_TEXT} NOT NULL UNIQUE,
        stream {_TEXT} NOT NULL,
        stream_version bigint NOT NULL,
        type {_TEXT} NOT NULL,
        schema_version integer NOT NULL,
        recorded_at {_TEXT} NOT NULL,
        occurred_at {_TEXT} NOT NULL,
        run_id {_TEXT},
        step bigint,
        domain {_TEXT},
        payload text NOT NULL,
        prev_hash {_TEXT} NOT NULL,
        hash {_TEXT} NOT NULL,
        UNIQUE (stream, stream_version))""",
    "CREATE INDEX events_type_seq ON events (type, seq)",
    "CREATE INDEX events_run_seq ON events (run_id, seq)",
    "CREATE INDEX events_domain_seq ON events (domain, seq)",
    "CREATE INDEX events_recorded_at ON events (recorded_at)",
    """CREATE OR REPLACE FUNCTION memledger_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'ledger is append-only'; END $$""",
    """CREATE TRIGGER events_no_update BEFORE UPDATE ON events
        FOR EACH ROW EXECUTE FUNCTION memledger_refuse_change()""",
    """CREATE TRIGGER events_no_delete BEFORE DELETE ON events
        FOR EACH ROW EXECUTE FUNCTION memledger_refuse_change()""",
    """CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
        FOR EACH STATEMENT EXECUTE FUNCTION memledger_refuse_change()""",
    f"""CREATE OR REPLACE FUNCTION memledger_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_notify('{CHANNEL}', ''); RETURN NULL; END $$""",
    """CREATE TRIGGER events_notify AFTER INSERT ON events
        FOR EACH STATEMENT EXECUTE FUNCTION memledger_notify()""",
    f"COMMENT ON TABLE events IS 'memledger ledger (store schema {STORE_SCHEMA_VERSION}); append-only'",
]


def describe_pg_error(exc: psycopg.Error, where: str) -> LedgerError:
    """Map a psycopg error to the project's exception with a one-line message."""
    msg = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    low = msg.lower()
    if "append-only" in low:
        return AppendOnlyViolation("ledger is append-only")
    if isinstance(exc, pg_errors.UniqueViolation):
        constraint = getattr(exc.diag, "constraint_name", None) or ""
        if "stream" in constraint:
            return ConcurrencyConflict(f"{where}: stream version conflict ({msg})")
        return LedgerError(f"{where}: {msg}")
    if isinstance(exc, pg_errors.LockNotAvailable):
        return LedgerLocked(f"{where}: the ledger's write lock is held by another writer (lock timeout exceeded)")
    if isinstance(exc, pg_errors.QueryCanceled):
        return LedgerError(f"{where}: the statement was cancelled ({msg})")
    if isinstance(exc, (pg_errors.DiskFull, pg_errors.OutOfMemory)):
        return DiskFull(f"{where}: server out of space ({msg}); the write was rolled back")
    if isinstance(exc, (pg_errors.InsufficientPrivilege, pg_errors.ReadOnlySqlTransaction)):
        return LedgerReadOnly(f"{where}: cannot write ({msg})")
    if isinstance(exc, pg_errors.InvalidCatalogName):
        return LedgerError(f"{where}: {msg}")
    if isinstance(exc, psycopg.OperationalError):
        full = " ".join(str(exc).split())
        reason = full.rsplit("FATAL:", 1)[1].strip() if "FATAL:" in full else msg
        return LedgerError(f"{where}: cannot use the PostgreSQL server: {reason}")
    return LedgerError(f"{where}: {msg}")


@contextmanager
def pg_translated(where: str) -> Iterator[None]:
    """The single boundary where psycopg exceptions become LedgerError."""
    try:
        yield
    except psycopg.Error as exc:
        raise describe_pg_error(exc, where) from exc


class _QmarkConnection:
    """A psycopg connection speaking the `?` placeholders of the shared Transaction's SQL.

    Inserts are held back until the next statement or the commit, so that
    a plain append sends its INSERT and its COMMIT in one pipeline (one round
    trip while the ledger's lock is held); any other statement flushes them
    first, so reads inside the transaction see its own rows.
    """

    def __init__(self, conn: psycopg.Connection[Any]):
        self.raw = conn
        self.pending: list[tuple[str, list[Any]]] = []

    def execute(self, sql: str, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        self.flush()
        return self.raw.execute(sql.replace("?", "%s"), params, prepare=True)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]], copy_from: int = 50) -> None:
        """Small batches: one multi-row INSERT, held back for the commit's pipeline; large ones: COPY."""
        self.flush()  # hold back at most one small batch: a long copy must not pile up in memory
        head, _, values = sql.partition(" VALUES ")
        if len(rows) < copy_from:
            self.pending.append((f"{head} VALUES {', '.join([values] * len(rows)).replace('?', '%s')}",
                                 [value for row in rows for value in row]))
            return
        with self.raw.cursor() as cur, cur.copy(f"COPY {head.removeprefix('INSERT INTO ')} FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)

    def flush(self) -> None:
        while self.pending:
            self.raw.execute(*self.pending.pop(0))

    def commit(self) -> None:
        """The held-back inserts and COMMIT in one pipeline: one round trip."""
        if not self.pending:
            self.raw.execute("COMMIT")
            return
        with self.raw.pipeline():
            for query, params in self.pending:
                self.raw.execute(query, params)
            self.pending.clear()
            self.raw.execute("COMMIT")


class PgTransaction(Transaction):
    """A write transaction holding the ledger's advisory lock (see `PostgresStore.atomic`).

    The append logic is SqliteStore's; what differs is how the head and the
    stream versions arrive: in the same message as BEGIN and the lock (see
    `PostgresStore._begin`), so the lock is held for as few round trips as
    possible.
    """

    def __init__(self, store: "PostgresStore", conn: _QmarkConnection, head: Sequence[Any] | None,
                 versions: dict[str, int]):
        self.store = store  # type: ignore[assignment]
        self.conn = conn  # type: ignore[assignment]
        self._seq, self._hash, self._last_rec = (tuple(head) if head else (0, GENESIS_HASH, ""))
        self.appended = []
        self._versions = versions

    def stream_version(self, stream: str) -> int:
        if stream not in self._versions:
            self._versions[stream] = super().stream_version(stream)
        return self._versions[stream]

    def append(self, events: Sequence[NewEvent], expected_version: int | None = None) -> list[RecordedEvent]:
        try:
            return super().append(events, expected_version)
        finally:
            self._versions.clear()  # the batch moved these streams on


class PostgresStore:
    """The server ledger: many agents on many machines appending to one memory."""

    kind = "postgresql"

    def __init__(self, url: str, *, clock: Clock = system_clock, redactor: Redactor | None = None,
                 busy_timeout: float | None = None, connect_timeout: float = 10.0, create: bool = True,
                 synchronous_commit: str | None = None, verify_reads: bool = True):
        self._url = url
        self.where = display_url(url)
        self.clock = clock
        self.redactor = redactor or default_redactor()
        self.busy_timeout = busy_timeout if busy_timeout is not None else _env_busy_timeout()
        self.connect_timeout = connect_timeout
        self.synchronous_commit = synchronous_commit
        self.verify_reads = verify_reads
        self._lock = threading.RLock()
        self._in_tx = False
        self.conn = self._connect()
        try:
            self.lock_key = self._prepare(create)
        except BaseException:
            self.conn.close()
            raise

    @classmethod
    def open(cls, url: str, **kwargs: Any) -> "PostgresStore":
        return cls(url, **kwargs)

    @property
    def url(self) -> str:
        return self._url

    def conninfo(self) -> str:
        """The libpq key=value form of the URL (what DuckDB's postgres scanner ATTACHes)."""
        return make_conninfo(**{k: v for k, v in conninfo_to_dict(self._url).items() if v is not None})

    def _connect(self) -> psycopg.Connection[Any]:
        options = f"-c lock_timeout={int(self.busy_timeout * 1000)}"
        if self.synchronous_commit:
            options += f" -c synchronous_commit={self.synchronous_commit}"
        with pg_translated(self.where):
            conn = psycopg.connect(self._url, autocommit=True, connect_timeout=int(self.connect_timeout),
                                   options=options, application_name="memledger")
        conn.isolation_level = psycopg.IsolationLevel.READ_COMMITTED
        return conn

    def _prepare(self, create: bool) -> int:
        with pg_translated(self.where):
            state = self._schema_state()
            if state is None:
                if not create:
                    raise NoLedger(f"{self.where}: no ledger here")
                with self.conn.transaction():
                    self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (APPLICATION_ID,))
                    if self._schema_state() is None:
                        for statement in _SCHEMA:
                            self.conn.execute(statement)
                        self.conn.execute(f"INSERT INTO {META_TABLE} (key, value) VALUES (%s, %s), (%s, %s)",
                                          ("application", "memledger", "schema_version", str(STORE_SCHEMA_VERSION)))
            row = self.conn.execute("SELECT 'events'::regclass::oid::bigint").fetchone()
        assert row is not None
        return (APPLICATION_ID << 32) | int(row[0])

    def _schema_state(self) -> dict[str, str] | None:
        """The meta rows, None for an empty database; refuses foreign or newer schemas."""
        found = self.conn.execute(
            "SELECT to_regclass('events') IS NOT NULL, to_regclass(%s) IS NOT NULL", (META_TABLE,)).fetchone()
        assert found is not None
        has_events, has_meta = found
        if not has_events and not has_meta:
            return None
        if not has_meta:
            raise NotALedger(f"{self.where}: has an events table that is not a memledger ledger")
        meta = dict(self.conn.execute(f"SELECT key, value FROM {META_TABLE}").fetchall())
        if meta.get("application") != "memledger" or not has_events:
            raise NotALedger(f"{self.where}: not a memledger ledger (table {META_TABLE} of another application)")
        version = int(meta.get("schema_version", "0"))
        if version > STORE_SCHEMA_VERSION:
            raise NewerSchema(
                f"{self.where}: written by a newer memledger (ledger schema {version}, this one knows "
                f"{STORE_SCHEMA_VERSION}); upgrade memledger")
        return meta

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "PostgresStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- writing -------------------------------------------------------------

    def atomic(self) -> AbstractContextManager[PgTransaction]:
        """The one way to write: BEGIN and the advisory lock, then commit, or roll back on any error."""
        return self._atomic(())

    @contextmanager
    def _atomic(self, streams: Iterable[str]) -> Iterator[PgTransaction]:
        wanted = sorted(set(streams))
        with self._lock, pg_translated(self.where):
            try:
                tx = self._reconnecting(lambda: self._begin(wanted))
                self._in_tx = True
                yield tx
                tx.conn.commit()  # type: ignore[attr-defined]
            except BaseException:
                self._rollback()
                raise
            finally:
                self._in_tx = False

    def _reconnecting(self, step: Callable[[], T]) -> T:
        """Run `step`; if the connection turns out dead (server restart, idle kill), reconnect once.

        Only for steps that have written nothing: reads, and BEGIN of a write.
        """
        try:
            return step()
        except psycopg.OperationalError:
            if self._in_tx or not (self.conn.closed or self.conn.broken):
                raise
        self.conn.close()
        self.conn = self._connect()
        return step()

    def _begin(self, streams: list[str]) -> PgTransaction:
        """BEGIN, the lock, the head and the streams' versions in one simple-protocol message.

        Each statement of the message takes its own snapshot (READ COMMITTED),
        so the head is read after the lock is granted: seq N+1 is never
        assigned before N has committed.
        """
        parts = ["BEGIN ISOLATION LEVEL READ COMMITTED", f"SELECT pg_advisory_xact_lock({int(self.lock_key)})",
                 "SELECT seq, hash, recorded_at FROM events ORDER BY seq DESC LIMIT 1"]
        if streams:
            parts.append(pg_sql.SQL("SELECT stream, MAX(stream_version) FROM events WHERE stream = ANY({}) "
                                    "GROUP BY stream").format(pg_sql.Literal(streams)).as_string(self.conn))
        cur = self.conn.execute("; ".join(parts), prepare=False)
        cur.nextset()
        cur.nextset()
        head = cur.fetchone()
        versions = dict.fromkeys(streams, 0)
        if streams:
            cur.nextset()
            versions.update({stream: int(v) for stream, v in cur.fetchall()})
        return PgTransaction(self, _QmarkConnection(self.conn), head, versions)

    def _rollback(self) -> None:
        if self.conn.closed or self.conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            return
        try:
            self.conn.execute("ROLLBACK")
        except psycopg.Error:  # the connection broke: the server rolls back on its own
            pass

    def append(self, events: Iterable[NewEvent], expected_version: int | None = None) -> list[RecordedEvent]:
        """Validate and append a batch atomically; returns the recorded events."""
        batch = [redacted_envelope(ev, self.redactor) if isinstance(ev, NewEvent) else ev for ev in events]
        if not batch:
            return []
        streams = [ev.resolved_stream for ev in batch if isinstance(ev, NewEvent)]
        with self._atomic(streams) as tx:
            return tx.append(batch, expected_version)

    # ---- reading -------------------------------------------------------------

    def _fetch(self, sql: str, params: Sequence[Any] = (), conn: psycopg.Connection[Any] | None = None) -> list[Any]:
        if conn is not None:  # a follower's own connection: no need to wait for this store's writers
            with pg_translated(self.where):
                return conn.execute(sql, params, prepare=True).fetchall()
        with self._lock, pg_translated(self.where):
            return self._reconnecting(lambda: self.conn.execute(sql, params, prepare=True).fetchall())

    def head(self) -> int:
        return int(self._fetch("SELECT MAX(seq) FROM events")[0][0] or 0)

    def read(self, from_seq: int | None = None, to_seq: int | None = None, *, types: Iterable[str] | None = None,
             stream: str | None = None, run_id: str | None = None, domain: str | None = None,
             since: str | None = None, until: str | None = None, batch: int = 2000,
             conn: psycopg.Connection[Any] | None = None) -> Iterator[RecordedEvent]:
        """Stream events in seq order, filtered; `since`/`until` bound recorded time (inclusive)."""
        extra, params = read_filter("%s", to_seq, types, stream, run_id, domain, since, until, array_types=True)
        cursor_seq = (from_seq or 1) - 1
        chain = chain_for(self, cursor_seq, bool(types) or any(
            v is not None for v in (stream, run_id, domain, since, until)))
        sql = f"{_SELECT} WHERE seq > %s{extra} ORDER BY seq LIMIT %s"
        while True:
            rows = self._fetch(sql, (cursor_seq, *params, batch), conn)
            for row in checked(rows, chain):
                yield row_to_event(row)
            if len(rows) < batch:
                if chain is not None:
                    chain.finish()
                return
            cursor_seq = rows[-1][0]

    def tip(self) -> tuple[int, str | None]:
        """The last event's seq and hash ((0, None) for an empty ledger)."""
        rows = self._fetch("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1")
        return (int(rows[0][0]), str(rows[0][1])) if rows else (0, None)

    def hash_at(self, seq: int) -> str | None:
        """The stored hash of event `seq` (None when there is none)."""
        rows = self._fetch("SELECT hash FROM events WHERE seq = %s", (seq,))
        return str(rows[0][0]) if rows else None

    def get(self, event_id: str) -> RecordedEvent | None:
        rows = self._fetch(f"{_SELECT} WHERE id = %s", (event_id,))
        return row_to_event(rows[0]) if rows else None

    def seq_at_time(self, at: str) -> int:
        """The last seq recorded at or before `at` (what the ledger knew then)."""
        return int(self._fetch("SELECT MAX(seq) FROM events WHERE recorded_at <= %s", (normalize_ts(at),))[0][0] or 0)

    # ---- checking --------------------------------------------------------------

    def verify(self, batch: int = 5000) -> VerifyResult:
        """Walk the chain (a page of `batch` rows at a time); name the first seq whose position, link
        or hash is wrong."""
        def pages() -> Iterator[Sequence[Any]]:
            after = 0
            while True:
                rows = self._fetch(f"{_SELECT} WHERE seq > %s ORDER BY seq LIMIT %s", (after, batch))
                yield from rows
                if len(rows) < batch:
                    return
                after = rows[-1][0]
        return walk_chain(pages())

    def subscribe(self, from_seq: int = 1, stop: threading.Event | None = None,
                  poll_s: float = 0.5) -> Iterator[RecordedEvent]:
        """Every event from `from_seq`, then new ones as writers commit them (LISTEN/NOTIFY).

        Runs on its own connection (LISTEN first, then catch up, so nothing
        committed in between is missed); a notification only says "look", the
        events themselves are read by seq, so a lost or merged NOTIFY costs
        at most `poll_s` of latency.
        """
        with pg_translated(self.where):
            listener = psycopg.connect(self._url, autocommit=True, connect_timeout=int(self.connect_timeout),
                                       application_name="memledger-follow")
        try:
            with pg_translated(self.where):
                listener.execute(f"LISTEN {CHANNEL}")
            next_seq = from_seq
            while True:
                for ev in self.read(from_seq=next_seq, conn=listener):
                    yield ev
                    next_seq = ev.seq + 1
                if stop is not None and stop.is_set():
                    return
                with pg_translated(self.where):
                    for _note in listener.notifies(timeout=poll_s, stop_after=1):
                        pass
        finally:
            listener.close()

    def stats(self) -> Stats:
        by_type = dict(self._fetch("SELECT type, COUNT(*) FROM events GROUP BY type ORDER BY type"))
        by_domain = dict(self._fetch(
            "SELECT domain, COUNT(*) FROM events WHERE domain IS NOT NULL GROUP BY domain ORDER BY domain"))
        by_run = dict(self._fetch(
            "SELECT run_id, COUNT(*) FROM events WHERE run_id IS NOT NULL GROUP BY run_id ORDER BY run_id"))
        first, last = self._fetch("SELECT MIN(recorded_at), MAX(recorded_at) FROM events")[0]
        size = int(self._fetch("SELECT pg_total_relation_size('events')")[0][0])
        return Stats(sum(by_type.values()), by_type, by_domain, by_run, first, last, size)

