"""The append-only event stores: the shared half every store runs, and the SQLite store.

`Store` holds what does not depend on the database: reading (each page checked
against the hash chain), the head, statistics, the chain walk of `verify`, and
preparing a batch for the ledger (validation, redaction, canonical JSON).
A backend supplies a small interface: `_fetch` (run one read query),
`atomic` (a write transaction holding the ledger's write lock), `_size_bytes`,
`subscribe`, `close` and its placeholder. `Transaction` holds the write side
every backend shares; a backend's transaction supplies `_record` (sequence,
hash and insert a prepared batch), `_rows_from`, `stream_version` and
`copy_rows`.

The SQLite store: one `events` table, WAL mode, triggers that refuse UPDATE
and DELETE, a hash chain, a global gapless `seq` assigned inside one
`BEGIN IMMEDIATE` transaction and a per-stream version under a UNIQUE
constraint. sqlite-utils creates the schema; the hot append path uses the
connection's `executemany` directly (sqlite-utils' `insert_all` is ~5x slower
here).

Usage::

    store = SqliteStore.open(".agent-memory/ledger.db")
    store.append([event(LessonSeeded(...))])
    for e in store.read(types=["lesson_seeded"]):
        print(e.seq, e.data)
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import orjson

from memtape.ledger.clock import Clock, format_ts, normalize_ts, system_clock
from memtape.ledger.envelope import NewEvent, RecordedEvent, recorded_event
from memtape.ledger.errors import (
    ChainBroken,
    ConcurrencyConflict,
    InvalidEvent,
    LedgerError,
    LedgerReadOnly,
    NewerSchema,
    NoLedger,
    NotALedger,
    UnreadableEvent,
    translated,
)
from memtape.ledger.events import EVENT_TYPES, UPCASTERS, Payload
from memtape.ledger.follow import follow_file
from memtape.ledger.ids import uuid7
from memtape.ledger.redact import Redactor, default_redactor


def upcast(type_: str, version: int, data: dict[str, Any]) -> dict[str, Any]:
    """Bring a stored payload up to the current version of its type."""
    cls = EVENT_TYPES.get(type_)
    if cls is None:
        return data
    while version < cls.CURRENT_VERSION:
        step = UPCASTERS.get((type_, version))
        if step is None:
            raise ValueError(f"no upcaster for {type_} v{version}")
        data = step(data)
        version += 1
    return data


APPLICATION_ID = 0x4D4C4447  # "MLDG"
STORE_SCHEMA_VERSION = 1
GENESIS_HASH = "0" * 64
COLUMNS = (
    "seq",
    "id",
    "stream",
    "stream_version",
    "type",
    "schema_version",
    "recorded_at",
    "occurred_at",
    "run_id",
    "step",
    "domain",
    "payload",
    "prev_hash",
    "hash",
)
#: a stored row, its columns as in COLUMNS
Row = tuple[Any, ...]
#: runs one read query and returns its rows (a backend's `_fetch`, or a follower's own connection)
Fetch = Callable[[str, Sequence[Any]], Sequence[Sequence[Any]]]
_SELECT = f"SELECT {', '.join(COLUMNS)} FROM events"


def chain_hash(prev_hash: str, row: Sequence[Any]) -> str:
    """sha256 over the previous hash and the canonical JSON of an event row (without its hash)."""
    body = orjson.dumps(list(row))
    return hashlib.sha256(prev_hash.encode() + body).hexdigest()


_CURRENT_VERSION = {name: cls.CURRENT_VERSION for name, cls in EVENT_TYPES.items()}


def row_to_event(row: Sequence[Any]) -> RecordedEvent:
    """A stored row as an event; a row this code cannot read is named by its seq (never a traceback)."""
    seq, id_, stream, sv, type_, schema_v, rec, occ, run_id, step, domain, payload, prev, h = row
    try:
        data = orjson.loads(payload)
    except (orjson.JSONDecodeError, TypeError):
        raise UnreadableEvent(
            f"seq {seq}: the stored payload is not JSON (the ledger was edited; run `memtape verify`)"
        ) from None
    if not isinstance(data, dict):
        raise UnreadableEvent(f"seq {seq}: the stored payload is not a JSON object (run `memtape verify`)")
    current = _CURRENT_VERSION.get(type_, 0)
    if schema_v != current:
        if isinstance(schema_v, int) and schema_v > current:
            raise UnreadableEvent(
                f"seq {seq}: {type_} v{schema_v} was written by a newer memtape "
                f"(this one knows up to v{current}); upgrade memtape"
            )
        try:
            data = upcast(type_, schema_v, data)
        except (ValueError, TypeError) as exc:
            raise UnreadableEvent(f"seq {seq}: {type_} v{schema_v} cannot be read ({exc})") from None
    return recorded_event(seq, id_, stream, sv, type_, schema_v, rec, occ, run_id, step, domain, data, payload, prev, h)


def _canonical(payload: Payload) -> tuple[dict[str, Any], str]:
    """The payload as a JSON-ready dict and its canonical JSON (sorted keys, no type or version)."""
    data = payload.__pydantic_serializer__.to_python(payload, mode="json")  # = model_dump(mode="json"), less overhead
    del data["type"], data["schema_version"]
    return data, orjson.dumps(data, option=orjson.OPT_SORT_KEYS).decode()


def _redacted(data: dict[str, Any], text: str, redactor: Redactor) -> str:
    redacted = redactor.value(data)
    return orjson.dumps(redacted, option=orjson.OPT_SORT_KEYS).decode() if redacted != data else text


def redacted_envelope(ev: NewEvent, redactor: Redactor) -> NewEvent:
    """The event with the envelope fields a caller chooses (run id, stream, id, domain) redacted
    (`Redactor.ident`); the same object when none holds a secret."""
    run_id, stream, id_ = redactor.ident(ev.run_id), redactor.ident(ev.stream), redactor.ident(ev.id)
    domain = redactor.ident(ev.domain, case_insensitive=True)
    if (run_id, stream, id_, domain) == (ev.run_id, ev.stream, ev.id, ev.domain):
        return ev
    return replace(ev, run_id=run_id, stream=stream, id=id_, domain=domain)


def serialize_payload(payload: Payload, redactor: Redactor) -> str:
    """Canonical payload JSON with secrets redacted (type and version live in their own columns)."""
    data, text = _canonical(payload)
    return _redacted(data, text, redactor) if redactor.may_contain_secrets(text) else text


@dataclass(frozen=True)
class Prepared:
    """An event validated, redacted and serialized, waiting for its seq, stream version, recorded
    time and hash (which only the holder of the ledger's write lock may assign)."""

    id: str
    stream: str
    type: str
    schema_version: int
    occurred_at: str | None  # None: the recorded time
    run_id: str | None
    step: int | None
    domain: str | None
    payload: str


def prepare(events: Sequence[NewEvent], redactor: Redactor, expected_version: int | None = None) -> list[Prepared]:
    """Validate a batch and make it ready for the ledger, before any lock is taken: nothing of a
    batch with a bad event is written."""
    for i, ev in enumerate(events):
        if not isinstance(ev, NewEvent):
            raise InvalidEvent(f"event {i + 1}: expected NewEvent, got {type(ev).__name__}")
    events = [redacted_envelope(ev, redactor) for ev in events]
    if expected_version is not None and len({ev.resolved_stream for ev in events}) > 1:
        raise InvalidEvent("expected_version needs every event of the batch in one stream")
    canonical: list[tuple[dict[str, Any], str]] = []
    for i, ev in enumerate(events):
        try:
            canonical.append(_canonical(ev.payload))
        except (TypeError, ValueError) as exc:  # e.g. an integer beyond 64 bits, a lone surrogate
            reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
            raise InvalidEvent(f"event {i + 1} ({ev.type}): cannot be stored as JSON: {reason}") from None
    # one screen over the whole batch (newline-joined: no secret pattern spans a newline of the JSON),
    # then per event only when the batch may hold a secret
    screen_each = redactor.may_contain_secrets("\n".join(text for _, text in canonical))
    out = []
    for ev, (data, payload_json) in zip(events, canonical):
        if screen_each and redactor.may_contain_secrets(payload_json):
            payload_json = _redacted(data, payload_json, redactor)
        payload = ev.payload
        out.append(
            Prepared(
                ev.id or uuid7(),
                ev.resolved_stream,
                payload.type,  # type: ignore[attr-defined]
                payload.schema_version,
                normalize_ts(ev.occurred_at) if ev.occurred_at is not None else None,
                ev.run_id,
                ev.step,
                ev.domain,
                payload_json,
            )
        )
    return out


def chain_rows(
    batch: Sequence[Prepared], seq: int, prev: str, recorded_at: str, stream_version: Callable[[str], int]
) -> list[Row]:
    """The rows of a prepared batch after event `seq` (hash `prev`), each linked to its predecessor
    (the chain rule of `chain_hash`; PostgreSQL's append function is its twin in SQL)."""
    versions: dict[str, int] = {}
    rows: list[Row] = []
    append_row = rows.append
    for p in batch:
        version = versions.get(p.stream)
        if version is None:
            version = stream_version(p.stream)
        versions[p.stream] = version = version + 1
        seq += 1
        body = (
            seq,
            p.id,
            p.stream,
            version,
            p.type,
            p.schema_version,
            recorded_at,
            p.occurred_at or recorded_at,
            p.run_id,
            p.step,
            p.domain,
            p.payload,
            prev,
        )
        h = chain_hash(prev, body)
        append_row((*body, h))
        prev = h
    return rows


def stale_version(stream: str, actual: int, expected: int) -> ConcurrencyConflict:
    return ConcurrencyConflict(f"stream {stream!r} is at version {actual}, expected {expected}")


def _env_busy_timeout() -> float:
    """Seconds to wait for another process's write lock (env MEMTAPE_BUSY_TIMEOUT, default 30)."""
    raw = os.environ.get("MEMTAPE_BUSY_TIMEOUT", "30")
    try:
        value = float(raw)
    except ValueError:
        raise LedgerError(f"MEMTAPE_BUSY_TIMEOUT must be a number of seconds, not {raw[:30]!r}") from None
    if not 0 <= value <= 86_400:
        raise LedgerError(f"MEMTAPE_BUSY_TIMEOUT must be between 0 and 86400 seconds, not {raw[:30]!r}")
    return value


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    count: int
    first_bad_seq: int | None = None
    reason: str | None = None
    head_seq: int | None = None
    head_hash: str | None = None
    rewritten_tail: int | None = None  # see ChainBroken.rewritten_tail


def read_filter(
    mark: str,
    to_seq: int | None,
    types: Iterable[str] | None,
    stream: str | tuple[str, ...] | None,
    run_id: str | None,
    domain: str | None,
    since: str | None,
    until: str | None,
    array_types: bool = False,
) -> tuple[str, list[Any]]:
    """The conditions every store's `read` adds after its seq cursor (" AND ...", or "") and their
    parameters; `mark` is the driver's placeholder, and PostgreSQL binds the type list as one array.
    A tuple of streams is any of them, in one indexed query."""
    where: list[str] = []
    params: list[Any] = []
    if to_seq is not None:
        where.append(f"seq <= {mark}")
        params.append(to_seq)
    type_list = list(types) if types else []
    if type_list and array_types:
        where.append(f"type = ANY({mark})")
        params.append(type_list)
    elif type_list:
        where.append(f"type IN ({', '.join([mark] * len(type_list))})")
        params.extend(type_list)
    if isinstance(stream, tuple):
        where.append(f"stream IN ({', '.join([mark] * len(stream))})")
        params.extend(stream)
        stream = None
    for col, val in (("stream", stream), ("run_id", run_id), ("domain", domain)):
        if val is not None:
            where.append(f"{col} = {mark}")
            params.append(val)
    if since is not None:
        where.append(f"recorded_at >= {mark}")
        params.append(normalize_ts(since))
    if until is not None:
        where.append(f"recorded_at <= {mark}")
        params.append(normalize_ts(until))
    return (" AND " + " AND ".join(where)) if where else "", params


REWRITTEN = "prev_hash was rewritten and the event re-hashed"


class ChainCheck:
    """The one check of rows against the hash chain, used by `verify` and by every verified read.

    Feed rows (columns as in COLUMNS) in seq order. A row whose hash does not hold over its own
    content is named. A row whose content holds but whose `prev_hash` is not its predecessor's
    hash names the predecessor — edited and re-hashed, its hash is no longer the one its successor
    recorded — unless the successor's successor does not link to it either: then the row itself
    was rewritten (its `prev_hash` changed and re-hashed). `contiguous` reads expect every seq from
    the first; filtered reads check each row's content and the links between consecutive seqs.
    """

    def __init__(self, seq: int = 0, hash: str | None = GENESIS_HASH, contiguous: bool = True):
        self.seq = seq  # the last row checked (0: none yet)
        self.hash = hash  # its hash (None: unknown, the next row's link is not checked)
        self.contiguous = contiguous
        self.count = 0
        self._suspect: tuple[int, str] | None = None  # a link fault waiting for the next row: (seq, hash)

    def check(self, row: Sequence[Any]) -> None:
        """Raise ChainBroken naming the first edited, rewritten or missing seq."""
        seq, prev_hash, own = row[0], row[12], row[13]
        if self._suspect is not None:
            suspect_seq, suspect_hash = self._suspect
            if seq == suspect_seq + 1 and prev_hash != suspect_hash:
                raise ChainBroken(suspect_seq, REWRITTEN)
            self.finish()
        if self.contiguous and seq != self.seq + 1:
            raise ChainBroken(self.seq + 1, f"seq {self.seq + 1} is missing (next is {seq})")
        if chain_hash(prev_hash, row[:13]) != own:
            raise ChainBroken(seq, "hash does not match the event's content")
        if self.hash is not None and seq == self.seq + 1 and prev_hash != self.hash:
            self._suspect = (seq, own)
        self.seq, self.hash = seq, own
        self.count += 1

    def check_page(self, rows: Sequence[Sequence[Any]]) -> None:
        """`check` each row in turn. The usual page of a whole-range read, every row following the
        last one checked with its link and hash holding, is checked in one loop (a verified read
        of the whole ledger hashes every row: this is its hot path); from the first row that
        does not, row by row."""
        done = 0
        if self.contiguous and self.hash is not None and self._suspect is None:
            seq, last = self.seq, self.hash
            for row in rows:
                if row[0] != seq + 1 or row[12] != last or chain_hash(last, row[:13]) != row[13]:
                    break
                seq, last = row[0], row[13]
                done += 1
            self.seq, self.hash = seq, last
            self.count += done
        for row in rows[done:] if done else rows:
            self.check(row)

    def finish(self, last: bool = False) -> None:
        """When the next row clears the successor, or at the end of the rows: a pending link fault
        names the predecessor (at the end of the ledger, `last`, the tail itself may have been
        rewritten instead: only a remembered head tells, see `ledger.anchor.verify_ledger`)."""
        if self._suspect is not None:
            seq = self._suspect[0] - 1
            self._suspect = None
            raise ChainBroken(
                seq, f"edited and re-hashed (seq {seq + 1} recorded another hash for it)", seq + 1 if last else None
            )


def walk_chain(rows: Iterable[Sequence[Any]]) -> VerifyResult:
    """The chain check every store runs over its rows in seq order (columns as in COLUMNS): the
    first seq whose position, link, hash or payload is wrong, else the count."""
    chain = ChainCheck()
    try:
        for row in rows:
            chain.check(row)
            try:
                orjson.loads(row[11])
            except orjson.JSONDecodeError:
                return VerifyResult(False, chain.count - 1, row[0], "payload is not valid JSON")
        chain.finish(last=True)
    except ChainBroken as exc:
        return VerifyResult(
            False, min(chain.count, exc.seq - 1), exc.seq, exc.reason, rewritten_tail=exc.rewritten_tail
        )
    return VerifyResult(True, chain.count, head_seq=chain.seq, head_hash=chain.hash if chain.seq else None)


def checked(rows: Sequence[Sequence[Any]], chain: ChainCheck | None) -> Sequence[Sequence[Any]]:
    """A page of rows after the chain check (all of it before any row is served)."""
    if chain is not None:
        chain.check_page(rows)
    return rows


@dataclass(frozen=True)
class Stats:
    count: int
    by_type: dict[str, int]
    by_domain: dict[str, int]
    by_run: dict[str, int]
    first_recorded_at: str | None
    last_recorded_at: str | None
    file_bytes: int


class Transaction(ABC):
    """A write transaction holding the ledger's write lock (see `Store.atomic`): reads see its own
    appends, and everything it appended commits or rolls back together."""

    def __init__(self, store: Store, head: Sequence[Any] | None):
        """`head`: the last event's (seq, hash, recorded_at), read after the lock was granted."""
        self.store = store
        self._seq, self._hash, self._last_rec = (
            (int(head[0]), str(head[1]), str(head[2])) if head else (0, GENESIS_HASH, "")
        )
        self.appended: list[RecordedEvent] = []

    def head(self) -> int:
        return self._seq

    def read(self, from_seq: int = 1) -> Iterator[RecordedEvent]:
        """Events from `from_seq` to the head, checked against the chain (decisions are never made
        from an edited ledger)."""
        chain = self.store.chain_for(from_seq - 1)
        for row in checked(self._rows_from(from_seq), chain):
            yield row_to_event(row)
        if chain is not None:
            chain.finish()

    def append(self, events: Sequence[NewEvent], expected_version: int | None = None) -> list[RecordedEvent]:
        """Append a batch inside this transaction; validation happens before any row is written."""
        batch = prepare(events, self.store.redactor, expected_version)
        if not batch:
            return []
        now = format_ts(self.store.clock())
        rows = self._record(batch, max(now, self._last_rec), expected_version)
        recorded = [row_to_event(row) for row in rows]
        last = rows[-1]
        self._seq, self._hash, self._last_rec = int(last[0]), str(last[13]), str(last[6])
        self.appended.extend(recorded)
        return recorded

    def select(
        self, after_seq: int = 0, *, run_id: str | None = None, stream: str | tuple[str, ...] | None = None
    ) -> Iterator[RecordedEvent]:
        """The events of one run or one stream (or of any of a tuple of streams: one query) after seq
        `after_seq`, as this transaction sees them (its own appends included, nobody else's in
        between): what a writer decides from is read under the same lock as what it appends."""
        return self.store._read(self._fetch, after_seq + 1, run_id=run_id, stream=stream)

    @abstractmethod
    def _fetch(self, sql: str, params: Sequence[Any] = ()) -> Sequence[Sequence[Any]]:
        """Run one read query on this transaction's connection."""

    @abstractmethod
    def stream_version(self, stream: str) -> int:
        """The stream's last version (0: none yet), this transaction's appends included."""

    @abstractmethod
    def copy_rows(self, rows: Sequence[Row]) -> None:
        """Insert rows verbatim (seq, ids, clocks and hashes as they are): a ledger copied from
        another store, whose chain the caller has checked."""

    @abstractmethod
    def _record(self, batch: Sequence[Prepared], recorded_at: str, expected_version: int | None) -> list[Row]:
        """Assign seq, stream versions and hashes after this transaction's head, insert, return the rows."""

    @abstractmethod
    def _rows_from(self, from_seq: int) -> Sequence[Sequence[Any]]:
        """The rows from `from_seq` to the head, in seq order."""


class Store(ABC):
    """The shared half of every event store: reads, the head, statistics and the chain walk.

    A backend sets `kind`, `where`, `path` (the ledger file; None for a server), `home` (the
    directory beside the ledger holding projections.db and the head file; None when there is
    none), `clock`, `redactor` and `verify_reads`, and implements the abstract methods.
    """

    kind: ClassVar[str]
    #: the driver's placeholder, and whether it binds a list as one array (`= ANY(...)`)
    PARAM: ClassVar[str]
    ARRAY_PARAMS: ClassVar[bool] = False
    where: str
    path: Path | None
    home: Path | None
    clock: Clock
    redactor: Redactor
    verify_reads: bool

    # ---- the backend interface ------------------------------------------------

    def text_ranks(self, texts: Sequence[str], words: Sequence[str]) -> list[tuple[int, float]] | None:
        """The server's own full-text ranking of `texts` for any of `words` (word characters only):
        (index in `texts`, rank), best first, the matching texts only; None where the store has
        no full-text search of its own (memory's search then ranks with SQLite FTS5 in memory)."""
        return None

    @property
    @abstractmethod
    def url(self) -> str:
        """The store URL (`sqlite:///...`, `postgresql://...`)."""

    @abstractmethod
    def atomic(self) -> AbstractContextManager[Transaction]:
        """The one way to write: take the write lock, commit on success, roll back on any error."""

    @abstractmethod
    def _fetch(self, sql: str, params: Sequence[Any] = ()) -> Sequence[Sequence[Any]]:
        """Run one read query (driver errors translated) and return its rows."""

    @abstractmethod
    def _size_bytes(self) -> int:
        """The ledger's size on disk."""

    @abstractmethod
    def subscribe(self, from_seq: int = 1, stop: threading.Event | None = None) -> Iterator[RecordedEvent]:
        """Every event from `from_seq`, then new ones as other writers commit them, until `stop` is set."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- writing ---------------------------------------------------------------

    def append(self, events: Iterable[NewEvent], expected_version: int | None = None) -> list[RecordedEvent]:
        """Validate and append a batch atomically; returns the recorded events."""
        batch = list(events)
        if not batch:
            return []
        with self.atomic() as tx:
            return tx.append(batch, expected_version)

    # ---- reading ---------------------------------------------------------------

    def head(self) -> int:
        return int(self._fetch("SELECT MAX(seq) FROM events")[0][0] or 0)

    def tip(self) -> tuple[int, str | None]:
        """The last event's seq and hash ((0, None) for an empty ledger)."""
        rows = self._fetch("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1")
        return (int(rows[0][0]), str(rows[0][1])) if rows else (0, None)

    def hash_at(self, seq: int) -> str | None:
        """The stored hash of event `seq` (None when there is none)."""
        rows = self._fetch(f"SELECT hash FROM events WHERE seq = {self.PARAM}", (seq,))
        return str(rows[0][0]) if rows else None

    def get(self, event_id: str) -> RecordedEvent | None:
        rows = self._fetch(f"{_SELECT} WHERE id = {self.PARAM}", (event_id,))
        return row_to_event(rows[0]) if rows else None

    def seq_at_time(self, at: str) -> int:
        """The last seq recorded at or before `at` (what the ledger knew then)."""
        rows = self._fetch(f"SELECT MAX(seq) FROM events WHERE recorded_at <= {self.PARAM}", (normalize_ts(at),))
        return int(rows[0][0] or 0)

    def read(
        self,
        from_seq: int | None = None,
        to_seq: int | None = None,
        *,
        types: Iterable[str] | None = None,
        stream: str | None = None,
        run_id: str | None = None,
        domain: str | None = None,
        since: str | None = None,
        until: str | None = None,
        batch: int = 2000,
    ) -> Iterator[RecordedEvent]:
        """Stream events in seq order, filtered; `since`/`until` bound recorded time (inclusive).
        Each page is checked against the hash chain before it is served (see `chain_for`)."""
        return self._read(
            self._fetch,
            from_seq,
            to_seq,
            types=types,
            stream=stream,
            run_id=run_id,
            domain=domain,
            since=since,
            until=until,
            batch=batch,
        )

    def _read(
        self,
        fetch: Fetch,
        from_seq: int | None = None,
        to_seq: int | None = None,
        *,
        types: Iterable[str] | None = None,
        stream: str | tuple[str, ...] | None = None,
        run_id: str | None = None,
        domain: str | None = None,
        since: str | None = None,
        until: str | None = None,
        batch: int = 2000,
        chain: ChainCheck | None = None,
    ) -> Iterator[RecordedEvent]:
        """`chain`: the check of a whole-range read that goes on from where the previous one ended
        (a follower's, whose last event it has checked), instead of one starting at the hash stored
        at `from_seq - 1` (a query each time the follower wakes)."""
        extra, params = read_filter(self.PARAM, to_seq, types, stream, run_id, domain, since, until, self.ARRAY_PARAMS)
        cursor_seq = (from_seq or 1) - 1
        if chain is None:
            chain = self.chain_for(
                cursor_seq, bool(types) or any(v is not None for v in (stream, run_id, domain, since, until))
            )
        sql = f"{_SELECT} WHERE seq > {self.PARAM}{extra} ORDER BY seq LIMIT {self.PARAM}"
        while True:
            rows = fetch(sql, (cursor_seq, *params, batch))
            for row in checked(rows, chain):
                yield row_to_event(row)
            if len(rows) < batch:
                if chain is not None:
                    chain.finish()
                return
            cursor_seq = rows[-1][0]

    def chain_for(self, after: int, filtered: bool = False) -> ChainCheck | None:
        """The check a read starting after seq `after` runs (None when this store does not verify
        reads): a whole range links to the hash stored at `after`; a filtered read checks each row's
        content and the links between consecutive seqs."""
        if not self.verify_reads:
            return None
        if filtered:
            return ChainCheck(after, None, contiguous=False)
        return ChainCheck(after, self.hash_at(after) if after > 0 else GENESIS_HASH)

    # ---- checking --------------------------------------------------------------

    def verify(self, batch: int = 5000) -> VerifyResult:
        """Walk the chain (a page of `batch` rows at a time); name the first seq whose position, link
        or hash is wrong."""

        def pages() -> Iterator[Sequence[Any]]:
            after = 0
            while True:
                rows = self._fetch(
                    f"{_SELECT} WHERE seq > {self.PARAM} ORDER BY seq LIMIT {self.PARAM}", (after, batch)
                )
                yield from rows
                if len(rows) < batch:
                    return
                after = rows[-1][0]

        return walk_chain(pages())

    def stats(self) -> Stats:
        def counts(sql: str) -> dict[str, int]:
            return {str(key): int(n) for key, n in self._fetch(sql)}

        by_type = counts("SELECT type, COUNT(*) FROM events GROUP BY type ORDER BY type")
        by_domain = counts(
            "SELECT domain, COUNT(*) FROM events WHERE domain IS NOT NULL GROUP BY domain ORDER BY domain"
        )
        by_run = counts("SELECT run_id, COUNT(*) FROM events WHERE run_id IS NOT NULL GROUP BY run_id ORDER BY run_id")
        first, last = self._fetch("SELECT MIN(recorded_at), MAX(recorded_at) FROM events")[0]
        return Stats(sum(by_type.values()), by_type, by_domain, by_run, first, last, self._size_bytes())


_INSERT = f"INSERT INTO events ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"


class SqliteTransaction(Transaction):
    """A SQLite write transaction: `BEGIN IMMEDIATE` holds the ledger's write lock."""

    def __init__(self, store: SqliteStore, conn: sqlite3.Connection):
        super().__init__(
            store, conn.execute("SELECT seq, hash, recorded_at FROM events ORDER BY seq DESC LIMIT 1").fetchone()
        )
        self.conn = conn

    def _fetch(self, sql: str, params: Sequence[Any] = ()) -> Sequence[Sequence[Any]]:
        return self.conn.execute(sql, params).fetchall()

    def stream_version(self, stream: str) -> int:
        row = self.conn.execute("SELECT MAX(stream_version) FROM events WHERE stream = ?", (stream,)).fetchone()
        return int(row[0] or 0)

    def copy_rows(self, rows: Sequence[Row]) -> None:
        self.conn.executemany(_INSERT, rows)

    def _record(self, batch: Sequence[Prepared], recorded_at: str, expected_version: int | None) -> list[Row]:
        if expected_version is not None:
            actual = self.stream_version(batch[0].stream)
            if actual != expected_version:
                raise stale_version(batch[0].stream, actual, expected_version)
        rows = chain_rows(batch, self._seq, self._hash, recorded_at, self.stream_version)
        self.conn.executemany(_INSERT, rows)
        return rows

    def _rows_from(self, from_seq: int) -> Sequence[Sequence[Any]]:
        return self.conn.execute(f"{_SELECT} WHERE seq >= ? ORDER BY seq", (from_seq,)).fetchall()


class SqliteStore(Store):
    """The embedded ledger. Safe for several processes appending at once."""

    kind = "sqlite"
    PARAM = "?"

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Clock = system_clock,
        busy_timeout: float | None = None,
        synchronous: str | None = None,
        redactor: Redactor | None = None,
        create: bool = True,
        verify_reads: bool = True,
    ):
        self.file = Path(path)
        self.path = self.file
        self.home = self.file.parent
        self.where = str(self.file)
        self.clock = clock
        self.redactor = redactor or default_redactor()
        self.busy_timeout = busy_timeout if busy_timeout is not None else _env_busy_timeout()
        self.verify_reads = verify_reads
        self.synchronous = (synchronous or os.environ.get("MEMTAPE_SYNCHRONOUS", "NORMAL")).upper()
        if self.synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise LedgerError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {self.synchronous!r}")
        self.conn = self._connect(create)

    @classmethod
    def open(cls, path: str | Path, **kwargs: Any) -> SqliteStore:
        return cls(path, **kwargs)

    @property
    def url(self) -> str:
        return f"sqlite:///{self.path}"

    def _connect(self, create: bool) -> sqlite3.Connection:
        path = str(self.file)
        exists = self.file.exists() and self.file.stat().st_size > 0
        if not exists and not create:
            raise NoLedger(f"{path}: no ledger here")
        if not exists:
            if not self.file.parent.exists():
                raise LedgerError(f"{path}: directory {self.file.parent} does not exist")
            with translated(path):
                try:
                    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
                except PermissionError as exc:
                    raise LedgerReadOnly(f"{path}: cannot write (read-only file or directory)") from exc
                except OSError as exc:
                    raise LedgerError(f"{path}: cannot create ({exc.strerror})") from exc
                os.close(fd)
        old_umask = os.umask(0o077)
        try:
            with translated(path):
                conn = sqlite3.connect(path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False)
                try:
                    self._prepare(conn, path)
                except BaseException:
                    conn.close()
                    raise
        finally:
            os.umask(old_umask)
        return conn

    def _prepare(self, conn: sqlite3.Connection, path: str) -> None:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        user_version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if app_id not in (0, APPLICATION_ID) or (app_id == 0 and tables):
            raise NotALedger(f"{path}: not a memtape ledger (a SQLite database of another application)")
        if app_id == APPLICATION_ID and "events" not in tables:
            raise NotALedger(f"{path}: not a memtape ledger (memtape's mark but no events table); left untouched")
        if user_version > STORE_SCHEMA_VERSION:
            raise NewerSchema(
                f"{path}: written by a newer memtape (ledger schema {user_version}, this one knows {STORE_SCHEMA_VERSION}); upgrade memtape"
            )
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        if app_id == 0:
            self._create_schema(conn)

    def _create_schema(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID:
                conn.execute("ROLLBACK")
                return
            import sqlite_utils  # only a new ledger needs it: it brings numpy, too slow for every start

            events = sqlite_utils.Database(conn).table("events")
            events.create(
                {
                    "seq": int,
                    "id": str,
                    "stream": str,
                    "stream_version": int,
                    "type": str,
                    "schema_version": int,
                    "recorded_at": str,
                    "occurred_at": str,
                    "run_id": str,
                    "step": int,
                    "domain": str,
                    "payload": str,
                    "prev_hash": str,
                    "hash": str,
                },
                pk="seq",
                not_null={
                    "id",
                    "stream",
                    "stream_version",
                    "type",
                    "schema_version",
                    "recorded_at",
                    "occurred_at",
                    "payload",
                    "prev_hash",
                    "hash",
                },
            )
            events.create_index(["id"], unique=True)
            events.create_index(["stream", "stream_version"], unique=True)
            events.create_index(["type", "seq"])
            events.create_index(["run_id", "seq"])
            events.create_index(["domain", "seq"])
            events.create_index(["recorded_at"])
            for op in ("UPDATE", "DELETE"):
                conn.execute(
                    f"CREATE TRIGGER events_no_{op.lower()} BEFORE {op} ON events "
                    "BEGIN SELECT RAISE(ABORT, 'ledger is append-only'); END"
                )
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {STORE_SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> SqliteStore:
        return self

    @contextmanager
    def atomic(self) -> Iterator[SqliteTransaction]:
        """The one way to write: `BEGIN IMMEDIATE`, commit on success, roll back on any error."""
        with translated(self.where):
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                tx = SqliteTransaction(self, self.conn)
                yield tx
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise

    def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with translated(self.where):
            return self.conn.execute(sql, params).fetchall()

    def _size_bytes(self) -> int:
        return sum(p.stat().st_size for p in (self.file, Path(f"{self.file}-wal")) if p.exists())

    def subscribe(self, from_seq: int = 1, stop: threading.Event | None = None) -> Iterator[RecordedEvent]:
        """Every event from `from_seq`, then new ones as other processes commit them (watchfiles)."""
        return follow_file(self.file, lambda start: self.read(from_seq=start), from_seq, stop)
