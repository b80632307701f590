"""The append-only PostgreSQL event store: the SQLite store's contract for fleets of agents.

Same table shape, same canonical rows and the same hash chain as
`ledger.store.SqliteStore` (reads, statistics and the chain walk are the
shared `ledger.store.Store`), so a ledger copied between the two verifies
identically. What PostgreSQL changes:

- `seq` is assigned under a transaction-scoped advisory lock keyed on the
  events table (the way mature PostgreSQL event stores serialise their global
  position): the writer takes the lock, then reads the head, then inserts.
  The lock is released only after the commit is visible, so a reader never
  sees seq N+1 before N has committed, and seq stays gapless with any number
  of writers on separate connections.
- An append is one statement: a session function (`pg_temp.memtape_append`,
  created on each connection, nothing added to the ledger's schema) takes the
  lock, reads the head, assigns seq and stream versions, hashes each row by
  the rule of `ledger.store.chain_hash` and inserts the batch. The client has
  already validated, redacted and serialized every event, and sends the parts
  of each row's canonical JSON that only it knows, so the lock is held for no
  round trip to the client: the server hands it from writer to writer.
- A write commits under the lock without waiting for its WAL flush, and the
  writer waits for the flush after the lock has changed hands (a small
  transaction that writes WAL and commits at the session's
  synchronous_commit): the flushes of concurrent writers are shared by the
  server (group commit), so one fsync no longer serialises the fleet. An
  append returns only once it is durable; another reader may see it a flush
  earlier, as with any asynchronous commit.
- Threads of one process appending at once are committed together: while one
  append is in flight the others queue, and the next one to take the
  connection writes every queued batch in one statement (group commit).
- Triggers refuse UPDATE, DELETE and TRUNCATE with 'ledger is append-only'.
- Each committing append sends `NOTIFY memledger_events`; `subscribe`
  LISTENs instead of watching files, and while commits keep coming it
  UNLISTENs and reads every few milliseconds (no server wake-up per commit).
- `memledger_meta` names the application and the store schema version; a
  ledger written by a newer schema is refused with a one-line error.

Every psycopg error becomes a `LedgerError` in `pg_translated`, the one boundary.

Usage::

    store = PostgresStore.open("postgresql://memtape@db.internal/memory")
    store.append([event(LessonSeeded(...))])
    for e in store.subscribe(from_seq=1, stop=stop_event):
        print(e.seq, e.type)
"""

from __future__ import annotations

import select
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson
import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.pq import ConnStatus, Escaping, ExecStatus
from psycopg.pq.abc import PGconn, PGresult

from memtape.ledger.clock import Clock, format_ts, system_clock
from memtape.ledger.envelope import NewEvent, RecordedEvent
from memtape.ledger.errors import (
    AppendOnlyViolation,
    ConcurrencyConflict,
    DiskFull,
    DuplicateEvent,
    LedgerError,
    LedgerLocked,
    LedgerReadOnly,
    NewerSchema,
    NoLedger,
    NotALedger,
)
from memtape.ledger.redact import Redactor, default_redactor
from memtape.ledger.store import (
    APPLICATION_ID,
    COLUMNS,
    STORE_SCHEMA_VERSION,
    ChainCheck,
    Prepared,
    Row,
    Store,
    Transaction,
    _env_busy_timeout,
    prepare,
    row_to_event,
)
from memtape.ledger.urls import display_url

T = TypeVar("T")
# The database objects keep the names they had before the rename to memtape: they are the
# on-disk format, and an existing PostgreSQL ledger keeps working.
CHANNEL = "memledger_events"
META_TABLE = "memledger_meta"
FORMAT_MARK = "memledger"  # the `application` row of META_TABLE
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
    f"COMMENT ON TABLE events IS 'memtape ledger (store schema {STORE_SCHEMA_VERSION}); append-only'",
]


#: The append, in the server. Each row's hash is `chain_hash(prev, row)`: sha256 over the previous
#: hash and the row's canonical JSON (orjson: no spaces). The client sends the JSON of the parts it
#: knows; the server writes only integers, the recorded time and hashes (ASCII, nothing to escape).
#: Element 9 of a row, set on the first row of a batch that names one, is the version its stream
#: must be at (else serialization_failure, which `describe_pg_error` reports as ConcurrencyConflict).
#: The batch is parsed once, as jsonb, when the parameter is bound (before the lock is taken); each
#: row is then read by position and inserted on its own (one cached plan, no arrays to assemble).
APPEND_FUNCTION = """
CREATE OR REPLACE FUNCTION pg_temp.memtape_append(lock_key bigint, now_ts text, batch jsonb)
RETURNS TABLE (r_seq bigint, r_stream_version bigint, r_recorded_at text, r_prev_hash text, r_hash text)
LANGUAGE plpgsql AS $fn$
DECLARE
    head_seq bigint; head_hash text; last_rec text; rec text; v bigint; h text; x jsonb; s_name text;
    versions jsonb := '{}';
BEGIN
    -- commit without waiting for the flush, so the lock changes hands at once; the writer then
    -- waits for durability outside the lock (see `PostgresStore._wait_durable`)
    PERFORM set_config('synchronous_commit', 'off', true);
    PERFORM pg_advisory_xact_lock(lock_key);
    SELECT e.seq, e.hash, e.recorded_at INTO head_seq, head_hash, last_rec FROM events e ORDER BY e.seq DESC LIMIT 1;
    IF NOT FOUND THEN
        head_seq := 0; head_hash := repeat('0', 64); last_rec := '';
    END IF;
    rec := CASE WHEN now_ts COLLATE "C" > last_rec COLLATE "C" THEN now_ts ELSE last_rec END;
    FOR x IN SELECT jsonb_array_elements(batch) LOOP
        s_name := x ->> 1;
        v := (versions ->> s_name)::bigint;
        IF v IS NULL THEN
            -- ORDER BY ... LIMIT 1, not max(): a generic plan may walk the whole stream for max()
            SELECT e.stream_version INTO v FROM events e WHERE e.stream = s_name ORDER BY e.stream_version DESC LIMIT 1;
            v := coalesce(v, 0);
        END IF;
        IF (x ->> 9) IS NOT NULL AND v <> (x ->> 9)::bigint THEN
            RAISE EXCEPTION USING ERRCODE = 'serialization_failure',
                MESSAGE = format('stream %L is at version %s, expected %s', s_name, v, x ->> 9);
        END IF;
        v := v + 1;
        versions := versions || jsonb_build_object(s_name, v);
        head_seq := head_seq + 1;
        h := encode(sha256(convert_to(head_hash || '[' || head_seq || ',' || (x ->> 10) || ',' || v || ','
                 || (x ->> 11) || ',"' || rec || '",' || coalesce(x ->> 12, '"' || rec || '"') || ','
                 || (x ->> 13) || ',"' || head_hash || '"]', 'UTF8')), 'hex');
        INSERT INTO events (seq, id, stream, stream_version, type, schema_version, recorded_at, occurred_at, run_id,
                            step, domain, payload, prev_hash, hash)
        VALUES (head_seq, x ->> 0, s_name, v, x ->> 2, (x ->> 3)::integer, rec, coalesce(x ->> 4, rec), x ->> 5,
                (x ->> 6)::bigint, x ->> 7, x ->> 8, head_hash, h);
        r_seq := head_seq; r_stream_version := v; r_recorded_at := rec; r_prev_hash := head_hash; r_hash := h;
        RETURN NEXT;
        head_hash := h;
    END LOOP;
END $fn$"""
#: The append as a named prepared statement of the session (created with the function): a writer
#: runs it through libpq itself, skipping psycopg's per-statement machinery (cursor, adapters,
#: prepared-statement cache: most of a writer's time a statement)
APPEND_STATEMENT = "memtape_append"
_PREPARE_APPEND = (
    f"PREPARE {APPEND_STATEMENT} (bigint, text, jsonb) AS SELECT * FROM pg_temp.memtape_append($1, $2, $3)"
)
#: A transaction that writes WAL and commits at the session's synchronous_commit: its flush covers
#: every commit before it, so the writers' flushes, no longer under the lock, are shared (group commit).
_DURABLE = "SELECT pg_logical_emit_message(true, 'memtape', 'durable')"


def describe_pg_error(exc: psycopg.Error, where: str) -> LedgerError:
    """Map a psycopg error to the project's exception by its type (its SQLSTATE), with a one-line message."""
    msg = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if isinstance(exc, pg_errors.RaiseException):  # only the append-only triggers raise a plain exception
        return AppendOnlyViolation("ledger is append-only")
    if isinstance(exc, pg_errors.SerializationFailure):  # the append function: a stale expected version
        return ConcurrencyConflict(msg)
    if isinstance(exc, pg_errors.UniqueViolation):
        if "stream" in (exc.diag.constraint_name or ""):
            return ConcurrencyConflict(f"{where}: stream version conflict ({msg})")
        return DuplicateEvent(f"{where}: an event with this id is already in the ledger ({msg})")
    if isinstance(exc, pg_errors.LockNotAvailable):
        return LedgerLocked(f"{where}: the ledger's write lock is held by another writer (lock timeout exceeded)")
    if isinstance(exc, pg_errors.QueryCanceled):
        return LedgerError(f"{where}: the statement was cancelled ({msg})")
    if isinstance(exc, (pg_errors.DiskFull, pg_errors.OutOfMemory)):
        return DiskFull(f"{where}: server out of space ({msg}); the write was rolled back")
    if isinstance(exc, (pg_errors.InsufficientPrivilege, pg_errors.ReadOnlySqlTransaction)):
        return LedgerReadOnly(f"{where}: cannot write ({msg})")
    if isinstance(exc, psycopg.OperationalError) and not isinstance(exc, pg_errors.InvalidCatalogName):
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


def _fragments(p: Prepared) -> tuple[str, str, str | None, str]:
    """The JSON of a row's parts the client knows, as the append function splices them."""
    dumps = orjson.dumps
    return (
        dumps([p.id, p.stream])[1:-1].decode(),
        dumps([p.type, p.schema_version])[1:-1].decode(),
        dumps(p.occurred_at).decode() if p.occurred_at is not None else None,
        dumps([p.run_id, p.step, p.domain, p.payload])[1:-1].decode(),
    )


def append_rows(
    conn: psycopg.Connection[Any],
    lock_key: int,
    recorded_at: str,
    batches: Sequence[tuple[Sequence[Prepared], int | None]],
    durable: bool = False,
) -> list[list[Row]]:
    """Sequence, hash and insert several batches in one statement (see APPEND_FUNCTION); the rows
    of each batch, in order. `durable`: the statement commits on its own and the flush is waited
    for in the same message to the server (see `_durable_append`)."""
    flat = [(p, expected if i == 0 else None) for batch, expected in batches for i, p in enumerate(batch)]
    batch = orjson.dumps(
        [
            [
                p.id,
                p.stream,
                p.type,
                p.schema_version,
                p.occurred_at,
                p.run_id,
                p.step,
                p.domain,
                p.payload,
                expected,
                *_fragments(p),
            ]
            for p, expected in flat
        ]
    ).decode()  # one parameter: cheap to send
    assigned = (_durable_append if durable else _append)(conn, lock_key, recorded_at, batch)
    rows = [
        (
            seq,
            p.id,
            p.stream,
            sv,
            p.type,
            p.schema_version,
            rec,
            p.occurred_at or rec,
            p.run_id,
            p.step,
            p.domain,
            p.payload,
            prev,
            h,
        )
        for (p, _), (seq, sv, rec, prev, h) in zip(flat, assigned)
    ]
    return split_batches(rows, batches)


def _append(conn: psycopg.Connection[Any], lock_key: int, recorded_at: str, batch: str) -> list[Any]:
    """The prepared append, run by libpq (it releases the GIL while it waits, so a process's other
    threads queue their batches meanwhile); a Ctrl-C takes effect when the statement returns. A
    failure raises psycopg's exception for its SQLSTATE, or OperationalError when the connection broke."""
    encoding = conn.info.encoding
    pgconn = conn.pgconn
    result = pgconn.exec_prepared(
        APPEND_STATEMENT.encode(), [b"%d" % lock_key, recorded_at.encode(encoding), batch.encode(encoding)]
    )
    if result.status != ExecStatus.TUPLES_OK:
        raise _failure(pgconn, result, encoding)
    return _assigned(result, encoding)


def _failure(pgconn: PGconn, result: PGresult, encoding: str) -> psycopg.Error:
    """psycopg's exception for a failed result read through libpq: the one for its SQLSTATE, or
    OperationalError when the connection broke (as psycopg's own execute raises them)."""
    if pgconn.status == ConnStatus.BAD:
        return psycopg.OperationalError(result.get_error_message(encoding) or "the connection broke")
    return pg_errors.error_from_result(result, encoding=encoding)


def _assigned(result: PGresult, encoding: str) -> list[tuple[int, int, str, str, str]]:
    """The append function's rows (seq, stream version, recorded time, previous hash, hash)."""

    def value(row: int, column: int) -> str:
        cell = result.get_value(row, column)
        assert cell is not None, "the append function returns no NULL"
        return cell.decode(encoding)

    return [(int(value(r, 0)), int(value(r, 1)), value(r, 2), value(r, 3), value(r, 4)) for r in range(result.ntuples)]


def _durable_append(conn: psycopg.Connection[Any], lock_key: int, recorded_at: str, batch: str) -> list[Any]:
    """The append and the wait for its flush in one simple-query message: its own transaction (BEGIN
    ... COMMIT, the lock released at that COMMIT without waiting for the flush), then `_DURABLE` in
    the next. One round trip instead of two; the server runs the statements in order and answers once
    the flush is done. A failing append skips the rest and leaves the transaction aborted: the caller
    rolls it back. The simple protocol takes no parameters: the values are quoted by libpq. Sent and
    read through libpq itself, like `_append`."""
    pgconn = conn.pgconn
    encoding = conn.info.encoding
    quote = Escaping(pgconn).escape_literal
    pgconn.send_query(
        b"BEGIN; SELECT * FROM pg_temp.memtape_append(%d, %s, %s::jsonb); COMMIT; %s"
        % (int(lock_key), quote(recorded_at.encode(encoding)), quote(batch.encode(encoding)), _DURABLE.encode())
    )
    results = _results(conn)
    for result in results:
        if result.status == ExecStatus.FATAL_ERROR:
            raise _failure(pgconn, result, encoding)
    if [r.status for r in results] != [
        ExecStatus.COMMAND_OK,
        ExecStatus.TUPLES_OK,
        ExecStatus.COMMAND_OK,
        ExecStatus.TUPLES_OK,
    ]:
        raise psycopg.OperationalError(f"unexpected answer to the append: {[r.status for r in results]}")
    return _assigned(results[1], encoding)


def _results(conn: psycopg.Connection[Any]) -> list[PGresult]:
    """Every result of the query in flight. The wait for the socket is a `select`, which releases the
    GIL (libpq's own wait for a result would hold it: the process's other threads would stall); if
    the wait is interrupted or the connection fails, the connection is closed, never left half read
    (the next call reconnects)."""
    pgconn = conn.pgconn
    out: list[PGresult] = []
    try:
        while True:
            while pgconn.is_busy():
                select.select([pgconn.socket], [], [])
                pgconn.consume_input()
            result = pgconn.get_result()
            if result is None:
                return out
            out.append(result)
    except BaseException:
        conn.close()
        raise


def split_batches(rows: Sequence[Row], batches: Sequence[tuple[Sequence[Prepared], int | None]]) -> list[list[Row]]:
    """Rows in seq order, cut into the batches they were appended in."""
    out, start = [], 0
    for batch, _ in batches:
        out.append(list(rows[start : start + len(batch)]))
        start += len(batch)
    return out


class PgTransaction(Transaction):
    """A write transaction holding the ledger's advisory lock (see `PostgresStore.atomic`)."""

    def __init__(self, store: PostgresStore, conn: psycopg.Connection[Any], head: Sequence[Any] | None):
        super().__init__(store, head)
        self.pg_store = store
        self.conn = conn

    def _fetch(self, sql: str, params: Sequence[Any] = ()) -> Sequence[Sequence[Any]]:
        return self.conn.execute(sql, params, prepare=True).fetchall()

    def stream_version(self, stream: str) -> int:
        row = self.conn.execute(
            "SELECT stream_version FROM events WHERE stream = %s ORDER BY stream_version DESC LIMIT 1",
            (stream,),
            prepare=True,
        ).fetchone()
        return int(row[0]) if row else 0

    def copy_rows(self, rows: Sequence[Row]) -> None:
        with self.conn.cursor() as cur, cur.copy(f"COPY events ({', '.join(COLUMNS)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)

    def _record(self, batch: Sequence[Prepared], recorded_at: str, expected_version: int | None) -> list[Row]:
        return append_rows(self.conn, self.pg_store.lock_key, recorded_at, [(batch, expected_version)])[0]

    def _rows_from(self, from_seq: int) -> Sequence[Sequence[Any]]:
        return self.conn.execute(f"{_SELECT} WHERE seq >= %s ORDER BY seq", (from_seq,), prepare=True).fetchall()


@dataclass
class _Queued:
    """One caller's batch waiting for the group commit."""

    batch: list[Prepared]
    expected_version: int | None
    rows: list[Row] | None = None
    error: BaseException | None = None
    done: bool = field(default=False)


class PostgresStore(Store):
    """The server ledger: many agents on many machines appending to one memory."""

    kind = "postgresql"
    PARAM = "%s"
    ARRAY_PARAMS = True

    def __init__(
        self,
        url: str,
        *,
        clock: Clock = system_clock,
        redactor: Redactor | None = None,
        busy_timeout: float | None = None,
        connect_timeout: float = 10.0,
        create: bool = True,
        synchronous_commit: str | None = None,
        verify_reads: bool = True,
        home: Path | None = None,
    ):
        """`home`: the memory directory that holds this ledger's projections.db and head file."""
        self._url = url
        self.where = display_url(url)
        self.path = None
        self.home = home
        self.clock = clock
        self.redactor = redactor or default_redactor()
        self.busy_timeout = busy_timeout if busy_timeout is not None else _env_busy_timeout()
        self.connect_timeout = connect_timeout
        self.synchronous_commit = synchronous_commit
        self.verify_reads = verify_reads
        self._lock = threading.RLock()
        self._queue: list[_Queued] = []
        self._queue_lock = threading.Lock()
        self._in_tx = False
        self.conn = self._connect()
        try:
            self.lock_key = self._prepare(create)
        except BaseException:
            self.conn.close()
            raise

    @classmethod
    def open(cls, url: str, **kwargs: Any) -> PostgresStore:
        return cls(url, **kwargs)

    @property
    def url(self) -> str:
        return self._url

    def conninfo(self) -> str:
        """The libpq key=value form of the URL (what DuckDB's postgres scanner ATTACHes)."""
        return make_conninfo("", **{k: v for k, v in conninfo_to_dict(self._url).items() if v is not None})

    def _connect(self) -> psycopg.Connection[Any]:
        options = f"-c lock_timeout={int(self.busy_timeout * 1000)}"
        if self.synchronous_commit:
            options += f" -c synchronous_commit={self.synchronous_commit}"
        with pg_translated(self.where):
            conn = psycopg.connect(
                self._url,
                autocommit=True,
                connect_timeout=int(self.connect_timeout),
                options=options,
                application_name="memtape",
            )
            conn.isolation_level = psycopg.IsolationLevel.READ_COMMITTED
            level = conn.execute("SHOW synchronous_commit").fetchone()
        self._durable = level is not None and level[0] != "off"
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
                        self.conn.execute(
                            f"INSERT INTO {META_TABLE} (key, value) VALUES (%s, %s), (%s, %s)",
                            ("application", FORMAT_MARK, "schema_version", str(STORE_SCHEMA_VERSION)),
                        )
            self.conn.execute(APPEND_FUNCTION)
            self.conn.execute(_PREPARE_APPEND)
            row = self.conn.execute("SELECT 'events'::regclass::oid::bigint").fetchone()
        assert row is not None
        return (APPLICATION_ID << 32) | int(row[0])

    def _schema_state(self) -> dict[str, str] | None:
        """The meta rows, None for an empty database; refuses foreign or newer schemas."""
        found = self.conn.execute(
            "SELECT to_regclass('events') IS NOT NULL, to_regclass(%s) IS NOT NULL", (META_TABLE,)
        ).fetchone()
        assert found is not None
        has_events, has_meta = found
        if not has_events and not has_meta:
            return None
        if not has_meta:
            raise NotALedger(f"{self.where}: has an events table that is not a memtape ledger")
        meta = dict(self.conn.execute(f"SELECT key, value FROM {META_TABLE}").fetchall())
        if meta.get("application") != FORMAT_MARK or not has_events:
            raise NotALedger(f"{self.where}: not a memtape ledger (table {META_TABLE} of another application)")
        version = int(meta.get("schema_version", "0"))
        if version > STORE_SCHEMA_VERSION:
            raise NewerSchema(
                f"{self.where}: written by a newer memtape (ledger schema {version}, this one knows "
                f"{STORE_SCHEMA_VERSION}); upgrade memtape"
            )
        return meta

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> PostgresStore:
        return self

    # ---- writing -------------------------------------------------------------

    @contextmanager
    def atomic(self) -> Iterator[PgTransaction]:
        """The one way to write: BEGIN and the advisory lock, then commit, or roll back on any error."""
        with self._lock, pg_translated(self.where):
            try:
                tx = self._reconnecting(self._begin)
                self._in_tx = True
                yield tx
                self.conn.execute("COMMIT")
                self._in_tx = False
                self._wait_durable()
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
        self._reconnect()
        return step()

    def _reconnect(self) -> None:
        self.conn.close()
        self.conn = self._connect()
        with pg_translated(self.where):
            self.conn.execute(APPEND_FUNCTION)
            self.conn.execute(_PREPARE_APPEND)

    def _begin(self) -> PgTransaction:
        """BEGIN, the lock and the head in one simple-protocol message.

        Each statement of the message takes its own snapshot (READ COMMITTED),
        so the head is read after the lock is granted: seq N+1 is never
        assigned before N has committed.
        """
        cur = self.conn.execute(
            "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL synchronous_commit = off; "
            f"SELECT pg_advisory_xact_lock({int(self.lock_key)}); "
            "SELECT seq, hash, recorded_at FROM events ORDER BY seq DESC LIMIT 1",
            prepare=False,
        )
        for _ in range(3):
            cur.nextset()
        return PgTransaction(self, self.conn, cur.fetchone())

    def _wait_durable(self) -> None:
        """Return once the last commit is as durable as the session's synchronous_commit asks.
        Writes commit under the lock without waiting for their WAL flush (the lock changes hands
        at once); this flush, outside the lock, is shared by every writer flushing meanwhile."""
        if self._durable:
            self.conn.execute(_DURABLE, prepare=True)

    def _rollback(self) -> None:
        if self.conn.closed or self.conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            return
        try:
            self.conn.execute("ROLLBACK")
        except psycopg.Error:  # the connection broke: the server rolls back on its own
            pass

    def append(self, events: Iterable[NewEvent], expected_version: int | None = None) -> list[RecordedEvent]:
        """Validate and append a batch atomically (committed with the batches other threads append
        meanwhile); returns the recorded events."""
        batch = prepare(list(events), self.redactor, expected_version)
        if not batch:
            return []
        mine = _Queued(batch, expected_version)
        with self._queue_lock:
            self._queue.append(mine)
        while not mine.done:
            with self._lock:  # the leader takes every batch queued so far
                with self._queue_lock:
                    group, self._queue = self._queue, []
                if group:
                    self._commit_group(group)
        if mine.error is not None:
            raise mine.error
        assert mine.rows is not None
        return [row_to_event(row) for row in mine.rows]

    def _commit_group(self, group: list[_Queued]) -> None:
        """Write the queued batches in one statement; when that fails, each on its own (so one
        batch's conflict is its caller's alone)."""
        try:
            if len(group) > 1:
                try:
                    for item, rows in zip(group, self._append_once([(q.batch, q.expected_version) for q in group])):
                        item.rows = rows
                    return
                except (ConcurrencyConflict, DuplicateEvent):  # one batch's fault: each on its own
                    pass
                except BaseException as exc:
                    for item in group:
                        item.error = exc
                    return
            for item in group:
                try:
                    item.rows = self._append_once([(item.batch, item.expected_version)])[0]
                except BaseException as exc:
                    item.error = exc
        finally:
            for item in group:
                item.done = True

    def _append_once(self, batches: list[tuple[list[Prepared], int | None]]) -> list[list[Row]]:
        """One append statement (its own transaction) and its flush, in one round trip; on a
        connection that turns out dead, the batches' ids tell whether it committed before
        reconnecting and trying again."""
        now = format_ts(self.clock())
        with pg_translated(self.where):
            try:
                return append_rows(self.conn, self.lock_key, now, batches, durable=self._durable)
            except psycopg.OperationalError:
                if not (self.conn.closed or self.conn.broken):
                    self._rollback()
                    raise
            except BaseException:
                self._rollback()  # a durable append that failed left its transaction aborted
                raise
            self._reconnect()
            ids = [p.id for batch, _ in batches for p in batch]
            found = [
                tuple(row) for row in self.conn.execute(f"{_SELECT} WHERE id = ANY(%s) ORDER BY seq", (ids,)).fetchall()
            ]
            appended = split_batches(found, batches) if found else append_rows(self.conn, self.lock_key, now, batches)
            self._wait_durable()
        return appended

    # ---- reading -------------------------------------------------------------

    def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._lock, pg_translated(self.where):
            return self._reconnecting(lambda: self.conn.execute(sql, params, prepare=True).fetchall())

    def text_ranks(self, texts: Sequence[str], words: Sequence[str]) -> list[tuple[int, float]] | None:
        """PostgreSQL's full-text search: english stemming, `ts_rank_cd` (cover density), ties in
        `texts` order. The words are word characters only, so the OR of them is never tsquery syntax."""
        if not texts or not words:
            return []
        rows = self._fetch(
            "SELECT d.i - 1, ts_rank_cd(to_tsvector('english', d.t), q) FROM unnest(%s::text[]) WITH ORDINALITY "
            "AS d(t, i), to_tsquery('english', %s) AS q WHERE to_tsvector('english', d.t) @@ q ORDER BY 2 DESC, 1",
            (list(texts), " | ".join(words)),
        )
        return [(int(i), float(rank)) for i, rank in rows]

    def _size_bytes(self) -> int:
        return int(self._fetch("SELECT pg_total_relation_size('events')")[0][0])

    def subscribe(
        self, from_seq: int = 1, stop: threading.Event | None = None, poll_s: float = 0.5, busy_poll_s: float = 0.005
    ) -> Iterator[RecordedEvent]:
        """Every event from `from_seq`, then new ones as writers commit them (LISTEN/NOTIFY).

        Runs on its own connection (LISTEN first, then catch up, so nothing
        committed in between is missed); a notification only says "look", the
        events themselves are read by seq, so a lost or merged NOTIFY costs
        at most `poll_s` of latency. While the ledger is busy (commits arrived
        while the last events were read and handed over) it UNLISTENs and reads
        every `busy_poll_s` instead: a listening server process wakes and sends
        for every commit, which under a fleet of writers costs the server as
        much as a writer's own statement. Once a read finds nothing new it
        LISTENs again and reads once more before it waits.
        """
        with pg_translated(self.where):
            listener = psycopg.connect(
                self._url, autocommit=True, connect_timeout=int(self.connect_timeout), application_name="memtape-follow"
            )

        def fetch(sql: str, params: Sequence[Any]) -> list[Any]:  # no need to wait for this store's writers
            with pg_translated(self.where):
                return listener.execute(sql, params, prepare=True).fetchall()

        try:
            with pg_translated(self.where):
                listener.execute(f"LISTEN {CHANNEL}")
            listening = True
            next_seq = from_seq
            chain: ChainCheck | None = None
            while True:
                if chain is None or chain.hash is None:  # once: the check goes on from the last event read
                    chain = self.chain_for(next_seq - 1)
                got = 0
                for ev in self._read(fetch, from_seq=next_seq, chain=chain):
                    yield ev
                    next_seq = ev.seq + 1
                    got += 1
                if stop is not None and stop.is_set():
                    return
                with pg_translated(self.where):
                    if listening and got and any(True for _ in listener.notifies(timeout=0)):
                        listener.execute(f"UNLISTEN {CHANNEL}")  # busy: read on a timer, not per commit
                        listening = False
                    if listening:
                        for _note in listener.notifies(timeout=poll_s, stop_after=1):
                            pass
                    elif got:
                        if stop is not None:
                            stop.wait(busy_poll_s)
                        else:
                            time.sleep(busy_poll_s)
                    else:  # caught up: listen again, then read once more before waiting
                        listener.execute(f"LISTEN {CHANNEL}")
                        listening = True
        finally:
            listener.close()
