"""projections.db as a file: its tables, how it is opened, checked and written.

One write at a time, by whoever holds the file's lock (`seal.Stamp.locked`): a writer opens
one BEGIN IMMEDIATE transaction, keeps every table's digest as it writes, and commits the rows
with the sealed checkpoint that counts them (`_seal`, one row: the ledger head the file is
bound to, this layout, the digest), then seals the file's stamp. A reader reads the checkpoint
and everything it serves in one read transaction. Either, finding the stamp not as memtape left
it (someone else wrote the file, or a process died between its commit and its stamp), checks
the file whole first: the layout is this code's and every table hashes to the digest sealed.

A file that fails is discarded with a one-line warning and rebuilt from the ledger; one of an
older layout is replaced without a word; one that is not a memtape projections database (another
application's, a directory) is refused in one line and left alone.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memtape.ledger.errors import DiskFull, LedgerError, describe_sqlite_error
from memtape.ledger.seal import Checkpoint, Digest, Key, Stamp, warn
from memtape.projections.cache import intervals, mentions

APPLICATION_ID = 0x4D4C5052  # "MLPR"
#: the layout of this file; an older one is removed and rebuilt without a word (12: states and
#: snapshots are Zstandard frames, were zlib streams; 13: the versions and mentions are counted;
#: 14: the mentions by bucket; 15: runs and sessions counted per key; 16: one sealed checkpoint
#: with a digest per table, no seal on any row, no counts)
SCHEMA_VERSION = 16
SOURCE = "projections.db"  # how the checkpoint names this cache, and anchors it remembers name it
#: each table's columns, in the order its rows are hashed (`seal.Key.row`: a blob last)
COLUMNS: dict[str, tuple[str, ...]] = {
    "_checkpoints": ("projection", "seq", "fingerprint", "ledger_hash"),
    "_states": ("projection", "seq", "state"),
    "_snapshots": ("projection", "seq", "fingerprint", "digest", "same_as", "size", "ledger_hash", "state"),
    **intervals.COLUMNS,
    **mentions.COLUMNS,
}
TABLES = tuple(COLUMNS)
DDL = (
    "CREATE TABLE _seal (seq INTEGER NOT NULL, ledger_hash TEXT NOT NULL, version TEXT NOT NULL, "
    "digest TEXT NOT NULL, mac TEXT NOT NULL)",
    "CREATE TABLE _checkpoints (projection TEXT PRIMARY KEY, seq INTEGER NOT NULL, fingerprint TEXT NOT NULL, "
    "ledger_hash TEXT NOT NULL)",
    "CREATE TABLE _states (projection TEXT PRIMARY KEY, seq INTEGER NOT NULL, state BLOB NOT NULL)",
    "CREATE TABLE _snapshots (projection TEXT NOT NULL, seq INTEGER NOT NULL, fingerprint TEXT NOT NULL, "
    "digest TEXT NOT NULL, same_as INTEGER, size INTEGER NOT NULL, ledger_hash TEXT NOT NULL, state BLOB, "
    "PRIMARY KEY (projection, seq))",
    *intervals.DDL,
    *mentions.DDL,
)
#: SQLite's write-ahead log beside the file (its `-shm` index holds nothing of the content)
LOGS = ("-wal",)
#: one catch-up at a time within a process (between processes, the file's lock)
lock = threading.Lock()


class ProjectionsCorrupt(LedgerError):
    """projections.db is unreadable, of another layout, or not a memtape projections database."""


class Tampered(ProjectionsCorrupt):
    """projections.db failed authentication: discarded and rebuilt, with a warning."""


@dataclass
class Checkpointed:
    """One projection's progress: folded up to `seq`, by the code and policy `fingerprint`, from
    the ledger whose hash at `seq` is `ledger_hash`."""

    projection: str
    seq: int
    fingerprint: str
    ledger_hash: str

    def row(self) -> tuple[str, int, str, str]:
        return self.projection, self.seq, self.fingerprint, self.ledger_hash


class Cache:
    """An open projections.db inside one transaction: its sealed checkpoint, every projection's
    progress, and (to a writer) the digest it keeps as it writes."""

    def __init__(
        self, path: Path, conn: sqlite3.Connection, key: Key, sealed: Checkpoint, checkpoints: dict[str, Checkpointed]
    ):
        self.path = path
        self.conn = conn
        self.key = key
        self.sealed = sealed
        self.checkpoints = checkpoints
        self.digest = Digest(TABLES, sealed.digest)
        #: the ledger head the file is bound to after this write (a writer moves it on)
        self.head: tuple[int, str] = (sealed.seq, sealed.ledger_hash)

    def insert(self, table: str, rows: list[tuple[Any, ...]]) -> None:
        """Insert rows (each with every column, in `COLUMNS` order) into `table` and its digest."""
        cols = COLUMNS[table]
        self.conn.executemany(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", rows)
        self.digest.rows(self.key, table, rows)

    def delete(self, table: str, where: str, params: tuple[Any, ...] = ()) -> int:
        """Delete the rows of `table` that `where` selects, taken out of its digest first."""
        rows = self.conn.execute(f"SELECT {', '.join(COLUMNS[table])} FROM {table} WHERE {where}", params).fetchall()
        self.digest.rows(self.key, table, rows, -1)
        self.conn.execute(f"DELETE FROM {table} WHERE {where}", params)
        return len(rows)

    def bind(self, seq: int, ledger_hash: str) -> None:
        """Bind the file to a ledger head further on."""
        if seq > self.head[0]:
            self.head = (seq, ledger_hash)

    def checkpoint(self) -> Checkpoint:
        """The checkpoint this writer commits: the head it reached, this layout, its digest."""
        return Checkpoint(self.head[0], self.head[1], str(SCHEMA_VERSION), str(self.digest))


@functools.cache
def _schema() -> list[tuple[Any, ...]]:
    """Every table and index of the file as this code creates it."""
    conn = sqlite3.connect(":memory:")
    try:
        for ddl in DDL:
            conn.execute(ddl)
        return _schema_of(conn)
    finally:
        conn.close()


def _schema_of(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name").fetchall()


def stamp_of(path: Path) -> Stamp:
    return Stamp(path, Key.beside(path), LOGS)


def _connect(path: Path, stamp: Stamp) -> sqlite3.Connection:
    """A connection to projections.db, created (empty, sealed) when there is none."""
    if path.is_dir():  # neither opened nor deleted: named, in one line
        raise ProjectionsCorrupt(f"{path}: a directory, not a memtape projections database")
    if not path.exists():  # private like the ledger (SQLite gives -wal and -shm the file's mode)
        try:
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        except OSError:
            pass  # SQLite names the problem below
    conn = sqlite3.connect(str(path), timeout=30.0, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA busy_timeout = 30000")
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        if app_id not in (0, APPLICATION_ID) or (app_id == 0 and _schema_of(conn)):
            raise ProjectionsCorrupt(f"{path}: not a memtape projections database")
        if app_id == 0:
            _create(conn, stamp)
        conn.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        conn.close()
        raise
    return conn


def _create(conn: sqlite3.Connection, stamp: Stamp) -> None:
    """Lay out an empty file (unless another process did meanwhile) and seal it."""
    with stamp.locked():
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
                for ddl in DDL:
                    conn.execute(ddl)
                empty = Checkpoint(0, "", str(SCHEMA_VERSION), str(Digest(TABLES)))
                conn.execute(
                    "INSERT INTO _seal VALUES (?, ?, ?, ?, ?)", (*empty.parts(SOURCE)[1:], empty.mac(stamp.key, SOURCE))
                )
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # SQLite rolls back by itself on a full disk
                conn.execute("ROLLBACK")
            raise
        stamp.seal()


def _load(path: Path, conn: sqlite3.Connection, key: Key, whole: bool) -> Cache:
    """The file's sealed checkpoint and every projection's progress (inside the caller's
    transaction); with `whole`, the file is first checked whole against its checkpoint."""
    if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
        raise ProjectionsCorrupt(f"{path}: projections schema changed")
    if whole and _schema_of(conn) != _schema():
        raise Tampered(f"{path}: its tables are not the ones memtape makes")
    rows = conn.execute("SELECT seq, ledger_hash, version, digest, mac FROM _seal").fetchall()
    sealed = Checkpoint(*rows[0][:4]) if len(rows) == 1 else None
    if sealed is None or not sealed.holds(key, SOURCE, rows[0][4]) or sealed.version != str(SCHEMA_VERSION):
        raise Tampered(f"{path}: its checkpoint is not sealed by this memory's key")
    if whole:
        found = Digest(TABLES)
        for table, cols in COLUMNS.items():
            found.rows(key, table, conn.execute(f"SELECT {', '.join(cols)} FROM {table}"))
        wrong = found.differs(Digest(TABLES, sealed.digest))
        if wrong is not None:
            raise Tampered(f"{path}: its {wrong} rows are not the ones its checkpoint seals")
    checkpoints = {
        r[0]: Checkpointed(*r)
        for r in conn.execute("SELECT projection, seq, fingerprint, ledger_hash FROM _checkpoints")
    }
    return Cache(path, conn, key, sealed, checkpoints)


def _remove(path: Path) -> None:
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        try:
            p.unlink()
        except FileNotFoundError:
            pass


def discard(path: Path, reason: str) -> None:
    """A projections.db that failed authentication: warn in one line and remove it (it is rebuilt)."""
    warn(f"{reason}; discarded, rebuilding from the ledger")
    _remove(path)


def _close(conn: sqlite3.Connection, stamp: Stamp) -> None:
    """Close a connection; when that folded the write-ahead log into the file (the last
    connection does) of a file memtape had left as it was, seal its stamp again."""
    before = stamp.current()
    conn.close()
    after = stamp.current()
    if after != before and stamp.sealed() == before:
        with stamp.locked(shared=True, wait=False) as held:
            if held and stamp.sealed() == before:
                stamp.seal(after)


def _fault(path: Path, exc: BaseException, attempt: int) -> None:
    """What a failed opening means: a full disk or a file not ours is raised as it is; an older
    layout is replaced without a word; a damaged or forged file is discarded with a warning."""
    if isinstance(exc, sqlite3.DatabaseError) and isinstance(fault := describe_sqlite_error(exc, str(path)), DiskFull):
        raise fault from exc  # a full disk is not a damaged file: projections.db is kept
    if attempt == 2 or (isinstance(exc, ProjectionsCorrupt) and ("not a memtape" in str(exc))):
        first = str(exc).splitlines()[0]  # a ProjectionsCorrupt names the file already
        raise ProjectionsCorrupt(first if isinstance(exc, ProjectionsCorrupt) else f"{path}: {first}") from exc
    if isinstance(exc, ProjectionsCorrupt) and not isinstance(exc, Tampered):
        _remove(path)  # an older schema: rebuilt without a word
    else:
        discard(path, str(exc).splitlines()[0] if isinstance(exc, Tampered) else f"{path}: unreadable ({exc})")


@contextmanager
def readable(path: Path) -> Iterator[Cache]:
    """projections.db inside one read transaction (what the caller reads there is what the
    checkpoint seals); a damaged or forged file is replaced by an empty one."""
    for attempt in (1, 2):
        stamp = stamp_of(path)
        try:
            conn = _connect(path, stamp)
        except (sqlite3.DatabaseError, ProjectionsCorrupt) as exc:
            _fault(path, exc, attempt)
            continue
        try:
            cache = _begin(path, conn, stamp)
        except (sqlite3.DatabaseError, ProjectionsCorrupt) as exc:
            _close(conn, stamp)
            _fault(path, exc, attempt)
            continue
        try:
            yield cache
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            _close(conn, stamp)
        return


def _begin(path: Path, conn: sqlite3.Connection, stamp: Stamp) -> Cache:
    """Begin the read transaction and load the checkpoint; a file not as memtape left it is
    checked whole first (under the shared lock, so no writer is between its commit and its
    stamp), and its stamp sealed again when it holds."""
    if stamp.holds():
        conn.execute("BEGIN")
        return _load(path, conn, stamp.key, whole=False)
    with stamp.locked(shared=True):
        seen = stamp.current()
        trusted = stamp.sealed() == seen
        conn.execute("BEGIN")
        try:
            cache = _load(path, conn, stamp.key, whole=not trusted)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        if not trusted:
            stamp.seal(seen)
        return cache


@contextmanager
def writable(path: Path, vacuum: bool = False) -> Iterator[Cache]:
    """projections.db inside one write transaction, under the file's lock: committed whole with
    the checkpoint that seals what was written (rolled back whole on an error), then its stamp
    sealed. `vacuum`: compacted after the commit, its write-ahead log truncated (a forget leaves
    no bytes of the subject in free pages or old log frames)."""
    for attempt in (1, 2):
        stamp = stamp_of(path)
        try:
            conn = _connect(path, stamp)
        except (sqlite3.DatabaseError, ProjectionsCorrupt) as exc:
            _fault(path, exc, attempt)
            continue
        with stamp.locked():
            try:
                conn.execute("BEGIN IMMEDIATE")
                cache = _load(path, conn, stamp.key, whole=not stamp.holds())
            except (sqlite3.DatabaseError, ProjectionsCorrupt) as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                conn.close()
                _fault(path, exc, attempt)
                continue
            try:
                yield cache
                sealed = cache.checkpoint()
                conn.execute(
                    "UPDATE _seal SET seq = ?, ledger_hash = ?, version = ?, digest = ?, mac = ?",
                    (*sealed.parts(SOURCE)[1:], sealed.mac(cache.key, SOURCE)),
                )
                conn.execute("COMMIT")
                if vacuum:
                    _compact(path, conn)
            except sqlite3.DatabaseError as exc:  # a full disk met while writing or committing is
                fault = describe_sqlite_error(exc, str(path))  # the one disk-full line, on every face
                if isinstance(fault, DiskFull):
                    raise fault from exc
                raise
            finally:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                conn.close()
                stamp.seal()
        return


def _compact(path: Path, conn: sqlite3.Connection) -> None:
    try:
        conn.execute("VACUUM")
        busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
    except sqlite3.OperationalError as exc:
        raise LedgerError(
            f"{path}: forgotten, but cannot compact projections.db now ({exc}); "
            "run `memtape rebuild` when no other process uses it"
        ) from exc
    if busy:
        raise LedgerError(
            f"{path}: forgotten, but another process holds projections.db open; "
            "old pages may remain until `memtape rebuild`"
        )
