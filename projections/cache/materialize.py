"""projections.db: materialized projection state beside the ledger — disposable.

Per projection it keeps a checkpoint (last seq folded, the fingerprint of the
projection's code and the policy, the digest of its state, the ledger's hash
at that seq), the latest state (compressed canonical JSON), the validity
intervals of the indexed projections (intervals.py: as-of by index) and, for the
others, periodic snapshots every `SNAPSHOT_EVERY` events (less often for a large
state), from which `as_of` folds forward only the events of the projections a
query touches. Readable tables for DuckDB are the analytics mirror's
(analytics/mirror.py), not this file's: it holds only what memory is served from.

Reading memory first catches up incrementally, at the cost of what the new
events touch: a projection none of them is dispatched to is neither decoded nor
written again — its checkpoint moves on with the same digest and its stored state
stays as it was (its row keeps the seq it was written at), read when first used.
A projection is rebuilt from the log by itself when its fingerprint changes. Every checkpoint and snapshot
is sealed (seal.py: a keyed MAC over the projection, seq, fingerprint, state
digest and the ledger's hash there): the file is discarded and rebuilt from
scratch, with a one-line warning, when it is not a readable database, when a
seal or a digest does not hold, or when it was edited by hand (triggers on
every table, `_meta` included, flag writes made outside this module). A sealed
checkpoint whose ledger hash the ledger no longer holds is not rebuilt around:
the ledger was cut or rewritten, and reading stops with one line naming the seq.
"""
from __future__ import annotations

import functools
import gc
import hashlib
import heapq
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memtape.ledger.anchor import Anchor, require_anchor
from memtape.ledger.errors import DiskFull, LedgerError, describe_sqlite_error
from memtape.ledger.events import RecordedEvent
from memtape.ledger.store import Store
from memtape.projections.cache import compression, intervals, mentions
from memtape.projections.cache.counts import Forged
from memtape.projections.cache.intervals import Tracker
from memtape.projections.cache.mentions import TYPES as MENTIONED
from memtape.projections.cache.seal import Seal, warn
from memtape.projections.folds import FOLDS, INDEXED
from memtape.projections.parameters import DEFAULT_POLICY, Policy
from memtape.projections.state import (
    FOLD_ERRORS,
    PROJECTIONS,
    LazyState,
    MemoryState,
    decode,
    dispatch,
    encode,
    fingerprint,
    fold,
    unfoldable,
)

APPLICATION_ID = 0x4D4C5052  # "MLPR"
#: the layout of this file; an older one is removed and rebuilt without a word (12: states and
#: snapshots are Zstandard frames, were zlib streams; 13: the versions and mentions are counted;
#: 14: the mentions by bucket; 15: runs and sessions counted per key)
SCHEMA_VERSION = 15
SNAPSHOT_EVERY = 10_000
#: a projection whose state is S bytes is snapshotted at most every S / this many events, so a
#: large state costs about as much to load as the events folded after it (and storage stays bounded)
SNAPSHOT_BYTES_PER_EVENT = 500
FLUSH_SNAPSHOTS = 20  # write buffered snapshots in batches (bounded memory on a long rebuild)
MAX_SEQ = 2**63 - 1  # seqs are 64-bit integers in every store
#: SQLite's page cache (KiB) while a catch-up writes: the versions' primary key is filed in key
#: order, not seq order, so inserts land all over an index that soon outgrows the 2 MB default
CATCHUP_CACHE_KIB = 65_536

#: told (what, events folded, events to fold) as a catch-up or rebuild advances, e.g. to draw a bar
FoldProgress = Callable[[str, int, int], None]
#: who is told when a caller passes no `progress` (the command line sets it for each command)
fold_progress: ContextVar[FoldProgress | None] = ContextVar("fold_progress", default=None)

SOURCE = "projections.db"  # how anchors it remembers name it
INTERNAL = ("_meta", "_checkpoints", "_states", "_snapshots", *intervals.TABLES)
_lock = threading.Lock()


class ProjectionsCorrupt(LedgerError):
    """projections.db is unreadable or was edited by hand (it is rebuilt)."""


def seq_or_time(text: str) -> int | str:
    """A point as a person writes it: ASCII digits are a seq (one of more digits than any seq has
    is refused here, before it becomes a huge number), anything else a time for `resolve_seq`."""
    raw = text.strip()
    if not (raw.isascii() and raw.isdigit()):
        return raw
    if len(raw) > len(str(MAX_SEQ)):
        raise LedgerError(f"seq {raw[:40]}...: beyond the largest seq a ledger holds (2**63-1)")
    return int(raw)


def resolve_seq(store: Store, at: int | str, what: str = "as of") -> int:
    """A seq, or an ISO time meaning recorded time (what the ledger knew then); a seq after the
    ledger's head is the head (the ledger knows nothing later). `what` names the point in errors."""
    if isinstance(at, str):
        at = seq_or_time(at)
    if isinstance(at, int):
        seq = max(0, at)
    else:
        try:
            return int(store.seq_at_time(str(at).strip()))
        except ValueError as exc:
            raise LedgerError(f"{what} {str(at).strip()[:40]!r}: expected a seq or an ISO time") from exc
    if seq > MAX_SEQ:
        raise LedgerError(f"{what} seq {str(seq)[:40]}: beyond the largest seq a ledger holds (2**63-1)")
    return min(seq, int(store.head()))


def _hash_at(store: Store, seq: int) -> str:
    if seq <= 0:
        return ""
    for ev in store.read(seq, seq):
        return str(ev.hash)
    return "-"


@dataclass
class Checkpoint:
    projection: str
    seq: int
    fingerprint: str
    digest: str
    ledger_hash: str
    mac: str | None = None

    def parts(self) -> tuple[Any, ...]:
        """What its seal covers: the state (by digest) is this projection's, at this seq, for this
        code and policy, folded from the ledger whose hash at that seq was this."""
        return ("checkpoint", self.projection, self.seq, self.fingerprint, self.digest, self.ledger_hash)


def snapshot_parts(projection: str, seq: int, fingerprint: str, digest: str, ledger_hash: str) -> tuple[Any, ...]:
    return ("snapshot", projection, seq, fingerprint, digest, ledger_hash)


class Tampered(ProjectionsCorrupt):
    """projections.db failed authentication: discarded and rebuilt, with a warning."""


# ---- the database ----------------------------------------------------------------

def _connect(path: Path) -> sqlite3.Connection:
    if path.is_dir():  # neither opened nor deleted: named, in one line
        raise ProjectionsCorrupt(f"{path}: a directory, not a memtape projections database")
    if not path.exists():  # private like the ledger (SQLite gives -wal and -shm the file's mode)
        try:
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        except OSError:
            pass  # SQLite names the problem below
    conn = sqlite3.connect(str(path), timeout=30.0, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 30000")
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if app_id not in (0, APPLICATION_ID) or (app_id == 0 and names):
        conn.close()
        raise ProjectionsCorrupt(f"{path}: not a memtape projections database")
    if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    if app_id == 0:
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
                for ddl in (
                    "CREATE TABLE IF NOT EXISTS _meta (key TEXT PRIMARY KEY, value TEXT)",
                    "CREATE TABLE IF NOT EXISTS _checkpoints (projection TEXT PRIMARY KEY, seq INTEGER NOT NULL, "
                    "fingerprint TEXT NOT NULL, digest TEXT NOT NULL, ledger_hash TEXT NOT NULL, mac TEXT NOT NULL)",
                    "CREATE TABLE IF NOT EXISTS _states (projection TEXT PRIMARY KEY, seq INTEGER NOT NULL, "
                    "state BLOB NOT NULL)",
                    "CREATE TABLE IF NOT EXISTS _snapshots (projection TEXT NOT NULL, seq INTEGER NOT NULL, "
                    "fingerprint TEXT NOT NULL, digest TEXT NOT NULL, state BLOB, same_as INTEGER, size INTEGER, "
                    "ledger_hash TEXT NOT NULL, mac TEXT NOT NULL, PRIMARY KEY (projection, seq))",
                    *intervals.DDL,
                ):
                    conn.execute(ddl)
                for table in INTERNAL:
                    _guard(conn, table)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # SQLite rolls back by itself on a full disk
                conn.execute("ROLLBACK")
            raise
    return conn


def _guard(conn: sqlite3.Connection, table: str) -> None:
    """Triggers that flag any write made while this module is not writing (a hand edit); on
    `_meta` itself, every row but the 'writing' flag is guarded (a deleted 'tampered' mark comes
    back). A cheap alarm only: what is served is authenticated by its seal."""
    for op, row in (("INSERT", "NEW"), ("UPDATE", "NEW"), ("DELETE", "OLD")):
        own = f"{row}.key != 'writing' AND " if table == "_meta" else ""
        conn.execute(
            f"CREATE TRIGGER IF NOT EXISTS guard_{table}_{op.lower()} AFTER {op} ON [{table}] "
            f"WHEN {own}NOT EXISTS (SELECT 1 FROM _meta WHERE key = 'writing') "
            "BEGIN INSERT OR REPLACE INTO _meta (key, value) VALUES ('tampered', '1'); END")


@contextmanager
def writing(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """The one way this module writes projections.db: a BEGIN IMMEDIATE transaction with the
    'writing' flag set (so the hand-edit triggers stay quiet), committed or rolled back whole."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("INSERT OR REPLACE INTO _meta (key, value) VALUES ('writing', '1')")
        yield conn
        conn.execute("DELETE FROM _meta WHERE key = 'writing'")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _remove(path: Path) -> None:
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        try:
            p.unlink()
        except FileNotFoundError:
            pass


def _check(conn: sqlite3.Connection, path: Path) -> dict[str, Checkpoint]:
    """Read the checkpoints; raise ProjectionsCorrupt when the file was tampered with (Tampered
    when it was edited by hand or a checkpoint's seal does not hold)."""
    if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
        raise ProjectionsCorrupt(f"{path}: projections schema changed")
    if conn.execute("SELECT 1 FROM _meta WHERE key = 'tampered'").fetchone():
        raise Tampered(f"{path}: edited outside memtape")
    checkpoints = {r[0]: Checkpoint(*r) for r in conn.execute(
        "SELECT projection, seq, fingerprint, digest, ledger_hash, mac FROM _checkpoints")}
    seal = Seal.beside(path)
    for cp in checkpoints.values():
        if not seal.holds(cp.mac, *cp.parts()):
            raise Tampered(f"{path}: the checkpoint of {cp.projection!r} is not sealed by this memory's key")
    head = conn.execute("SELECT value FROM _meta WHERE key = 'head'").fetchone()
    if head is not None:
        seq, _, rest = str(head[0]).partition(":")
        h, _, mac = rest.partition(":")
        if not seal.holds(mac, *_head_parts(seq, h)):
            raise Tampered(f"{path}: the remembered head is not sealed by this memory's key")
    return checkpoints


def _head_parts(seq: int | str, h: str) -> tuple[Any, ...]:
    return ("head", seq, h)


def discard(path: Path, reason: str) -> None:
    """A projections.db that failed authentication: warn in one line and remove it (it is rebuilt)."""
    warn(f"{reason}; discarded, rebuilding from the ledger")
    _remove(path)


@contextmanager
def opened(path: Path) -> Iterator[tuple[sqlite3.Connection, dict[str, Checkpoint]]]:
    """The projections database and its checkpoints; a damaged file is replaced by an empty one."""
    for attempt in (1, 2):
        conn = None
        try:
            conn = _connect(path)
            checkpoints = _check(conn, path)
        except (sqlite3.DatabaseError, ProjectionsCorrupt) as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, sqlite3.DatabaseError) and isinstance(fault := describe_sqlite_error(exc, str(path)), DiskFull):
                raise fault from exc  # a full disk is not a damaged file: projections.db is kept
            if attempt == 2 or (isinstance(exc, ProjectionsCorrupt) and "not a memtape" in str(exc)):
                first = str(exc).splitlines()[0]  # a ProjectionsCorrupt names the file already
                raise ProjectionsCorrupt(first if isinstance(exc, ProjectionsCorrupt) else f"{path}: {first}") from exc
            if isinstance(exc, ProjectionsCorrupt) and not isinstance(exc, Tampered):
                _remove(path)  # an older schema: rebuilt without a word
            else:
                discard(path, str(exc).splitlines()[0] if isinstance(exc, Tampered) else f"{path}: unreadable ({exc})")
            continue
        try:
            yield conn, checkpoints
        finally:
            conn.close()
        return


# ---- folding ----------------------------------------------------------------------

class _Counter:
    """Counts the events of one fold for a `FoldProgress`."""

    def __init__(self, report: FoldProgress, what: str, total: int):
        self.report, self.what, self.total, self.done = report, what, total, 0

    def advance(self, n: int) -> None:
        self.done += n
        self.report(self.what, self.done, self.total)


def forget_floor(store: Store, head: int) -> int:
    """The seq of the latest `subject_forgotten` up to `head` (0 if none): no snapshot is taken below it."""
    floor = 0
    for ev in store.read(1, head, types=["subject_forgotten"]):
        floor = ev.seq
    return floor


def fold_from(state: MemoryState, starts: dict[str, int], events: Iterable[RecordedEvent], policy: Policy,
              snapshot: Any = None, progress: _Counter | None = None, tracker: Tracker | None = None,
              flush: Any = None) -> MemoryState:
    """Fold events into each projection after its own start seq; call `snapshot(seq, hash)` at
    every multiple of SNAPSHOT_EVERY; `tracker` records the validity intervals of the indexed
    projections (`flush()` is called whenever it holds FLUSH_ROWS rows).

    One pass: each event goes only to the projections whose TYPES name it, through the tracker
    only for the indexed ones (see `_plan`)."""
    names = list(starts)
    plan = _plan(names, tracker)
    lo = min(starts.values()) if starts else 0
    uniform = all(s == lo for s in starts.values())
    mentioned = MENTIONED if tracker is not None else frozenset()
    mention = tracker.mentions.record if tracker is not None else None
    flush_rows = intervals.FLUSH_ROWS
    head = state.head
    pending = 0
    name = ""
    for ev in events:
        seq, t = ev.seq, ev.type
        if t in mentioned:
            mention(ev)  # type: ignore[misc]
        steps = plan.get(t)
        if steps is not None:
            try:
                for name, fn, tracked in steps:
                    if uniform or seq > starts[name]:
                        if tracked is not None:
                            setattr(state, name, tracked(name, fn, getattr(state, name), ev, policy))
                        else:
                            setattr(state, name, fn(getattr(state, name), ev, policy))
            except FOLD_ERRORS as exc:
                raise unfoldable(ev, name, exc) from exc
        if tracker is not None and (steps is not None or t in mentioned) and tracker.pending() >= flush_rows:
            flush()
        head = seq
        if snapshot is not None and seq % SNAPSHOT_EVERY == 0:
            state.head = seq
            snapshot(seq, ev.hash)
        pending += 1
        if pending == 5000:
            if progress is not None:
                progress.advance(pending)
            pending = 0
    if progress is not None:
        progress.advance(pending)
    state.head = max(head, state.head)
    for name in names:
        state.heads[name] = state.head
    return state


def _plan(names: Iterable[str], tracker: Tracker | None) -> dict[str, tuple[tuple[str, Any, Any], ...]]:
    """event type -> (projection, apply, the tracker's fold or None) for the projections that
    fold it, in fold order: an event no projection folds costs one lookup."""
    tracked = frozenset(tracker.names) if tracker is not None else frozenset()
    return {t: tuple((name, fn, tracker.fold if name in tracked else None)  # type: ignore[union-attr]
                     for name, fn in entries)
            for t, entries in dispatch(names).items()}


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused while a long fold runs, or a whole state is built
    from its versions (as of a seq): either allocates millions of small objects, most of which
    the growing state keeps, and every automatic
    collection would walk that whole state again (a tenth of a rebuild's time). The folds make
    no reference cycles, so reference counting frees what dies; the collector is switched back
    on however the fold ends. What the pause created then goes straight to the oldest
    generation (frozen and thawed at once: two list moves), as long-lived objects do after their
    first collections, instead of being walked by the first young collection after the pause
    (another ~6% of a rebuild at 300,000 events); skipped when something else keeps objects
    frozen (thawing would hand them back)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        gc.enable()


# ---- catching up -------------------------------------------------------------------

class Catchup:
    """One catch-up of projections.db to the ledger's head (see `load_state`)."""

    def __init__(self, store: Store, path: Path, policy: Policy, only: Iterable[str] | None = None,
                 rebuild: bool = False, progress: FoldProgress | None = None):
        self.store = store
        self.path = path
        self.policy = policy
        self.only = tuple(only) if only else PROJECTIONS
        self.rebuild = rebuild
        self.progress = progress or fold_progress.get()
        self.snapshots: list[tuple[str, int, str, str, bytes | None, int | None, int, str, str]] = []
        self.last_snap: dict[str, tuple[int, str, int]] = {}  # projection -> (seq, digest, size)
        self.blob_seq: dict[str, int] = {}  # projection -> seq of its latest snapshot holding a state
        self.hashes: dict[int, str] = {}  # seq -> the ledger's hash there
        self.tracker: Tracker | None = None
        #: one context each for every state and snapshot this catch-up reads or writes
        self.pack, self.unpack = compression.packer(), compression.unpacker()

    def run(self) -> MemoryState:
        for attempt in (1, 2):
            try:
                with _lock, opened(self.path) as (conn, checkpoints):
                    return self._run(conn, checkpoints)
            except (Tampered, Forged) as exc:
                if attempt == 2:
                    raise
                discard(self.path, str(exc) if isinstance(exc, Tampered) else f"{self.path}: {exc}")
        raise AssertionError("unreachable")

    def _start(self, cp: Checkpoint | None, name: str) -> int:
        """The seq this projection can continue from, or 0 when it must be rebuilt. The checkpoint
        is sealed (see `_check`): a ledger that no longer holds the hash it saw was cut or
        rewritten (LedgerTampered)."""
        if cp is None:
            return 0
        if cp.seq not in self.hashes:
            require_anchor(self.store, Anchor(cp.seq, cp.ledger_hash, SOURCE))
            self.hashes[cp.seq] = cp.ledger_hash
        if self.rebuild and name in self.only or cp.fingerprint != fingerprint(name, self.policy):
            return 0
        return cp.seq

    def _stored(self, conn: sqlite3.Connection, cp: Checkpoint, name: str) -> Any:
        """The projection's stored state at its checkpoint; one that does not match its sealed
        digest was edited (Tampered). The row may have been written at an earlier seq: a
        catch-up that folds none of a projection's events moves its checkpoint on, not its state."""
        row = conn.execute("SELECT seq, state FROM _states WHERE projection = ?", (name,)).fetchone()
        try:
            raw = self.unpack(row[1]) if row is not None and row[0] <= cp.seq else b""
        except compression.ERRORS:
            raw = b""
        if hashlib.sha256(raw).hexdigest() != cp.digest:  # the stored bytes are the canonical JSON
            raise Tampered(f"{self.path}: the stored state of {name!r} does not match its sealed digest")
        return decode(name, raw)

    def _folds_any(self, name: str, start: int, head: int) -> bool:
        """Whether an event after `start` up to `head` is one projection `name` folds."""
        return next(iter(self.store.read(start + 1, head, types=FOLDS[name].TYPES, batch=1)), None) is not None

    def _needed(self, name: str, start: int, head: int) -> bool:
        """Whether this catch-up must load projection `name`'s state: it is rebuilt, an event to
        fold names it, or (not indexed) a snapshot falls due in the range. Otherwise its state at
        `head` is the stored one: it is neither decoded nor written again."""
        if start == 0 or start >= head:
            return start == 0
        if name not in INDEXED and head // SNAPSHOT_EVERY > start // SNAPSHOT_EVERY:
            return True
        return self._folds_any(name, start, head)

    def _run(self, conn: sqlite3.Connection, checkpoints: dict[str, Checkpoint]) -> MemoryState:
        head = int(self.store.head())
        conn.execute(f"PRAGMA cache_size = -{CATCHUP_CACHE_KIB}")  # this connection only; closed after the run
        state = MemoryState()
        starts: dict[str, int] = {}
        for name in PROJECTIONS:
            starts[name] = self._start(checkpoints.get(name), name)
        loaded = [n for n in PROJECTIONS if self._needed(n, starts[n], head)]
        with collector_paused():  # decoding builds as many objects as a fold does (3x slower collected)
            for name in loaded:  # the others stay None: nothing in the range reaches them
                setattr(state, name, self._stored(conn, checkpoints[name], name) if starts[name]
                        else FOLDS[name].empty())
        rebuilt = [n for n in PROJECTIONS if starts[n] == 0 and (n in checkpoints or n in self.only and self.rebuild)]
        lo = min(starts.values())
        floor = forget_floor(self.store, head)
        fresh = [n for n in PROJECTIONS if starts[n] == 0] + ([] if checkpoints else [mentions.COUNTED])
        self.tracker = tracker = Tracker(conn, PROJECTIONS, Seal.beside(self.path), floor, fresh)
        if rebuilt:  # snapshots and intervals of a projection being rebuilt are stale (so is its checkpoint)
            with writing(conn):
                conn.executemany("DELETE FROM _snapshots WHERE projection = ?", [(n,) for n in rebuilt])
                conn.executemany("DELETE FROM _checkpoints WHERE projection = ?", [(n,) for n in rebuilt])
                for name in rebuilt:
                    if name in INDEXED:
                        tracker.reset(name)
        for name in PROJECTIONS:
            row = conn.execute("SELECT seq, digest, size, same_as FROM _snapshots WHERE projection = ? "
                               "ORDER BY seq DESC LIMIT 1", (name,)).fetchone()
            if row:
                self.last_snap[name] = (row[0], row[1], row[2] or 0)
                self.blob_seq[name] = row[3] if row[3] is not None else row[0]
        state.head = lo
        fp = {n: fingerprint(n, self.policy) for n in PROJECTIONS}
        seal = Seal.beside(self.path)

        def snapshot(seq: int, ledger_hash: str) -> None:
            if seq < floor:  # a snapshot before a forget would hold the forgotten subject
                return
            for name in PROJECTIONS:
                if seq <= starts[name] or name in INDEXED:  # the indexed ones answer as-of from intervals
                    continue
                prev = self.last_snap.get(name)
                if prev is not None and seq - prev[0] < max(SNAPSHOT_EVERY, prev[2] // SNAPSHOT_BYTES_PER_EVENT):
                    continue
                raw = encode(getattr(state, name))
                dig = hashlib.sha256(raw).hexdigest()
                mac = seal.mac(*snapshot_parts(name, seq, fp[name], dig, ledger_hash))
                if prev is not None and prev[1] == dig:  # unchanged: point at the stored one
                    self.snapshots.append((name, seq, fp[name], dig, None, self.blob_seq[name], len(raw),
                                           ledger_hash, mac))
                else:
                    self.snapshots.append((name, seq, fp[name], dig, self.pack(raw), None, len(raw), ledger_hash, mac))
                    self.blob_seq[name] = seq
                self.last_snap[name] = (seq, dig, len(raw))
            if len(self.snapshots) >= FLUSH_SNAPSHOTS * len(PROJECTIONS):
                self._flush_snapshots(conn)

        if head > lo:
            what = "rebuilding projections" if lo == 0 else "catching up projections"
            counter = _Counter(self.progress, what, head - lo) if self.progress is not None else None
            with collector_paused():
                fold_from(state, starts, self.store.read(lo + 1, head), self.policy, snapshot, counter, tracker,
                          lambda: self._flush_intervals(conn))
        if head > lo or rebuilt or any(n not in checkpoints for n in PROJECTIONS):
            self._save(conn, state, fp, head, rebuilt, checkpoints)
        out = LazyState(lambda name: current_projection(self.store, self.path, self.policy, name, head), head)
        for name in loaded:
            setattr(out, name, getattr(state, name))
        return out

    def _flush_intervals(self, conn: sqlite3.Connection) -> None:
        if self.tracker is not None and self.tracker.pending():
            with writing(conn):
                self.tracker.flush()

    def _flush_snapshots(self, conn: sqlite3.Connection) -> None:
        if not self.snapshots:
            return
        with writing(conn):
            conn.executemany("INSERT OR REPLACE INTO _snapshots (projection, seq, fingerprint, digest, state, same_as, "
                             "size, ledger_hash, mac) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", self.snapshots)
        self.snapshots = []

    def _save(self, conn: sqlite3.Connection, state: MemoryState, fp: dict[str, str], head: int,
              rebuilt_now: list[str], checkpoints: dict[str, Checkpoint]) -> None:
        """Seal every projection at `head`: the folded ones with their state encoded again, the
        others (not loaded: unchanged since their checkpoint) with the digest they had, their
        stored state left as it is — when their checkpoint is still the one this catch-up read."""
        self._flush_snapshots(conn)
        ledger_hash = _hash_at(self.store, head)
        seal = Seal.beside(self.path)
        with writing(conn):
            if self.tracker is not None:
                self.tracker.flush()
            current = {r[0]: Checkpoint(*r) for r in conn.execute(
                "SELECT projection, seq, fingerprint, digest, ledger_hash, mac FROM _checkpoints")}
            for name in PROJECTIONS:
                now = current.get(name)
                if now is not None and now.seq >= head and name not in rebuilt_now:
                    continue  # another process got here first
                new = getattr(state, name)
                if new is None:
                    if now != checkpoints[name]:
                        continue  # moved by another process meanwhile: the next catch-up sees to it
                    dig = now.digest
                else:
                    raw = encode(new)
                    dig = hashlib.sha256(raw).hexdigest()
                    conn.execute("INSERT OR REPLACE INTO _states (projection, seq, state) VALUES (?, ?, ?)",
                                 (name, head, self.pack(raw)))
                cp = Checkpoint(name, head, fp[name], dig, ledger_hash)
                conn.execute("INSERT OR REPLACE INTO _checkpoints (projection, seq, fingerprint, digest, ledger_hash, "
                             "mac) VALUES (?, ?, ?, ?, ?, ?)", (*cp.parts()[1:], seal.mac(*cp.parts())))


def load_state(store: Store, projections_path: Path | None, policy: Policy = DEFAULT_POLICY,
               as_of: int | str | None = None, progress: FoldProgress | None = None) -> MemoryState:
    """Every projection at the ledger's head (catching projections.db up first), or at `as_of`.

    When projections.db is already current (and for `as_of`), each projection is loaded
    when first used: most queries touch one or two of them."""
    to_seq = resolve_seq(store, as_of) if as_of is not None else None
    if projections_path is None:
        return fold(MemoryState.empty(), store.read(1, to_seq), policy)
    path = Path(projections_path)
    head = int(store.head())
    if to_seq is None or to_seq >= head:
        if not _current(store, path, policy, head):
            return Catchup(store, path, policy, progress=progress).run()
        return LazyState(lambda name: current_projection(store, path, policy, name, head), head)
    caught_up(store, path, policy, progress)
    return LazyState(lambda name: projection_at(store, path, policy, name, to_seq), to_seq)


def _current(store: Store, path: Path, policy: Policy, head: int) -> bool:
    """projections.db holds every projection at `head`, for this policy, code and ledger."""
    with _lock, opened(path) as (_, cps):
        current = all(n in cps and cps[n].seq == head and cps[n].fingerprint == fingerprint(n, policy)
                      for n in PROJECTIONS)
        return current and (head == 0 or cps[PROJECTIONS[0]].ledger_hash == _hash_at(store, head))


def caught_up(store: Store, path: Path, policy: Policy = DEFAULT_POLICY, progress: FoldProgress | None = None) -> None:
    """Make sure projections.db is at the ledger's head (loading no state when it already is)."""
    if not _current(store, path, policy, int(store.head())):
        Catchup(store, path, policy, progress=progress).run()


def current_projection(store: Store, path: Path, policy: Policy, name: str, head: int) -> Any:
    """One projection's stored state at `head` (checked against its digest), else rebuilt
    from its nearest snapshot."""
    with _lock, opened(path) as (conn, cps):
        cp = cps.get(name)
        row = conn.execute("SELECT seq, state FROM _states WHERE projection = ?", (name,)).fetchone()
    if cp is not None and row is not None and row[0] <= cp.seq == head \
            and cp.fingerprint == fingerprint(name, policy):
        try:
            raw = compression.unpacker()(row[1])
            if hashlib.sha256(raw).hexdigest() == cp.digest:
                with collector_paused():  # the state built is acyclic (see `projection_at`)
                    return decode(name, raw)
        except compression.ERRORS:
            pass
        # edited in place: not served; the whole file is rebuilt (and right for the next reader)
        discard(path, f"{path}: the stored state of {name!r} does not match its sealed digest")
        rebuilt = Catchup(store, path, policy).run()
        if rebuilt.head == head:
            return getattr(rebuilt, name)
    return projection_at(store, path, policy, name, head)


def indexed_at(conn: sqlite3.Connection, cps: dict[str, Checkpoint], store: Store, policy: Policy, name: str,
               seq: int) -> bool:
    """Whether projections.db's intervals answer projection `name` at `seq`: it is indexed, its
    checkpoint is this code's and policy's and reaches `seq`, and no forget since `seq` dropped
    the versions that held then."""
    cp = cps.get(name)
    return name in INDEXED and cp is not None and cp.seq >= seq and cp.fingerprint == fingerprint(name, policy) \
        and forget_floor(store, cp.seq) <= seq


def projection_at(store: Store, path: Path, policy: Policy, name: str, seq: int) -> Any:
    """One projection at `seq`: read from its validity intervals when it is indexed, else its
    nearest snapshot at or before `seq`, then only its own event types folded forward."""
    with collector_paused():  # the state built is acyclic too
        return _projection_at(store, path, policy, name, seq)


def _projection_at(store: Store, path: Path, policy: Policy, name: str, seq: int) -> Any:
    mod = FOLDS[name]
    state, start = mod.empty(), 0
    fp = fingerprint(name, policy)
    forged = None
    with opened(path) as (conn, cps):
        if indexed_at(conn, cps, store, policy, name, seq):
            found = intervals.state_at(intervals.Blocks(conn, Seal.beside(path)), name, seq)
            if found is not None:
                return found
            forged = f"{path}: a version of {name!r} is not one this memory sealed"
        row = conn.execute(
            "SELECT seq, state, same_as, digest, ledger_hash, mac FROM _snapshots WHERE projection = ? AND seq <= ? "
            "AND fingerprint = ? ORDER BY seq DESC LIMIT 1", (name, seq, fp)).fetchone()
        if row is not None:
            snap_seq, blob, same_as, dig, ledger_hash, mac = row
            if blob is None:
                ref = conn.execute("SELECT state FROM _snapshots WHERE projection = ? AND seq = ?",
                                   (name, same_as)).fetchone()
                blob = ref[0] if ref is not None else None
            try:
                raw = compression.unpacker()(blob) if blob is not None else b""
            except compression.ERRORS:
                raw = b""
            if not Seal.beside(path).holds(mac, *snapshot_parts(name, snap_seq, fp, dig, ledger_hash)) \
                    or hashlib.sha256(raw).hexdigest() != dig:
                forged = f"{path}: the snapshot of {name!r} at seq {snap_seq} is not the one this memory sealed"
            else:
                require_anchor(store, Anchor(snap_seq, ledger_hash, SOURCE))
                state, start = decode(name, raw), snap_seq
    if forged is not None:
        discard(path, forged)
    if seq > start:
        apply = mod.apply
        for ev in store.read(start + 1, seq, types=mod.TYPES):
            state = apply(state, ev, policy)
    return state


def rebuild(store: Store, path: Path, policy: Policy = DEFAULT_POLICY, projections: Iterable[str] | None = None,
            progress: FoldProgress | None = None) -> MemoryState:
    """Rebuild the named projections (all by default) from the log, telling `progress` as it goes."""
    names = tuple(projections) if projections else PROJECTIONS
    unknown = [n for n in names if n not in PROJECTIONS]
    if unknown:
        raise LedgerError(f"unknown projection {unknown[0]!r}: choose from {', '.join(PROJECTIONS)}")
    return Catchup(store, Path(path), policy, only=names, rebuild=True, progress=progress).run()




class ProjectionsHead:
    """The head projections.db remembers (a `ledger.anchor.Keeper`): its sealed 'head' row, or its
    latest checkpoint when that is further on. Saved only into an existing projections.db (a
    command that never materialized memory does not create one)."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def load(self) -> Anchor | None:
        if not self.path.exists():
            return None
        with _lock, opened(self.path) as (conn, checkpoints):  # seals checked there
            row = conn.execute("SELECT value FROM _meta WHERE key = 'head'").fetchone()
        anchors = [Anchor(cp.seq, cp.ledger_hash, SOURCE) for cp in checkpoints.values() if cp.seq > 0]
        if row is not None:
            seq, h, _ = str(row[0]).split(":", 2)
            anchors.append(Anchor(int(seq), h, SOURCE))
        return max(anchors, key=lambda a: a.seq, default=None)

    def save(self, anchor: Anchor) -> None:
        if not self.path.exists():
            return
        with _lock, opened(self.path) as (conn, _):
            row = conn.execute("SELECT value FROM _meta WHERE key = 'head'").fetchone()
            if row is not None and int(str(row[0]).split(":", 1)[0]) >= anchor.seq:
                return
            mac = Seal.beside(self.path).mac(*_head_parts(anchor.seq, anchor.hash))
            with writing(conn):
                conn.execute("INSERT OR REPLACE INTO _meta (key, value) VALUES ('head', ?)",
                             (f"{anchor.seq}:{anchor.hash}:{mac}",))


class IndexedMemory:
    """Chosen items of the indexed projections at any seq, each read by key from projections.db's
    intervals (what an audit shows at a step: Tier 1, the recalled lessons, one domain's facts
    and selectors, the offered trajectories) — no fold, however long the log. A version that
    does not carry this memory's seal discards projections.db; the answer is then folded."""

    def __init__(self, conn: sqlite3.Connection, cps: dict[str, Checkpoint], store: Store, policy: Policy,
                 path: Path, window: tuple[int, int] | None = None):
        self.conn = conn
        self.path = path
        self.seal = Seal.beside(path)
        self.forged = False
        self.cps = cps
        self.store = store
        self.policy = policy
        self.head = min((cp.seq for cp in cps.values()), default=0)
        self.floor = forget_floor(store, self.head)
        self.blocks = intervals.Blocks(conn, self.seal)  # the steps of an audit read mostly the same blocks
        #: the seqs the questions will fall in (an audit's steps): each question's versions are then
        #: selected and their seals checked once for all of them, and a state built from the same
        #: versions as the last one of its projection is that one again
        self.window = window
        self.selected: dict[tuple[str | None, ...], intervals.Selection] = {}
        self.built: dict[str, tuple[tuple[Any, ...], Any]] = {}
        #: with a window, the versions whose seals held (every column as read, the value's bytes
        #: among them): a seal is a function of those columns, so a version equal in each holds
        #: again, and one that differs in any is not in here. The steps' states share most of their
        #: versions: each is checked once, not again for every state built from it
        self.checked: set[tuple[Any, ...]] = set()

    def answers(self, seq: int, names: Iterable[str]) -> bool:
        return seq >= self.floor and all(
            n in INDEXED and n in self.cps and self.cps[n].seq >= seq
            and self.cps[n].fingerprint == fingerprint(n, self.policy) for n in names)

    def at(self, seq: int, domain: str | None, lesson_ids: Iterable[str] = (),
           trajectory_ids: Iterable[str] = ()) -> MemoryState:
        """Lessons (Tier 1 and `lesson_ids`), knowledge and selectors (of `domain`) and
        trajectories (`trajectory_ids`) as of `seq`; everything else is left out."""
        rows_at = functools.partial(self._rows, seq)
        lessons = rows_at("lessons", facet="tier1")
        for lid in dict.fromkeys(lesson_ids):
            lessons += rows_at("lessons", "lessons", lid)
        trajectories = []
        for tid in dict.fromkeys(trajectory_ids):
            found = rows_at("trajectories", "by_domain", domain or "", tid) if domain else []
            if not any(r[2] == tid for r in found):  # filed under another host: look at them all
                found = [r for r in rows_at("trajectories", "by_domain") if r[2] == tid]
            trajectories += found
        rows = {"lessons": lessons, "trajectories": trajectories,
                "knowledge": rows_at("knowledge", "current", domain) if domain else [],
                "selectors": rows_at("selectors", "by_domain", domain) if domain else []}
        state = MemoryState.empty(rows)
        for name, found in rows.items():
            setattr(state, name, self._state(name, seq, found))
        state.head = seq
        return state

    def _rows(self, seq: int, name: str, field: str | None = None, k1: str | None = None, k2: str | None = None,
              facet: str | None = None) -> list[tuple[Any, ...]]:
        """The versions a question selects at `seq` (`intervals.Selection`: selected once for the
        whole window when `seq` is in it); none, and projections.db distrusted, when they are not
        as many as counted (one was deleted)."""
        if self.window is None or not self.window[0] <= seq <= self.window[1]:
            selection = intervals.Selection(self.blocks, name, seq, seq, field, k1, facet)
        else:
            question = (name, field, k1, facet)
            selection = self.selected.get(question)  # type: ignore[assignment]
            if selection is None:
                selection = self.selected[question] = intervals.Selection(self.blocks, name, *self.window, field, k1,
                                                                          facet)
        found = selection.at(seq)
        if found is None:
            self._distrust(f"a version of {name!r}")
            return []
        return [r for r in found if r[2] in (k2, intervals.NO_KEY)] if k2 is not None else found

    def _distrust(self, what: str) -> None:
        """projections.db failed authentication: discarded; every later answer is folded."""
        if not self.forged:
            self.forged = True
            discard(self.path, f"{self.path}: {what} is not one this memory sealed")

    def _state(self, name: str, seq: int, rows: list[tuple[Any, ...]]) -> Any:
        versions = tuple((r[0], r[1], r[2], r[7]) for r in rows)  # (field, k1, k2, valid_from): the primary key
        last = self.built.get(name)
        if last is not None and last[0] == versions and not self.forged:
            return last[1]
        if not self.forged:
            unchecked = [r for r in rows if r not in self.checked] if self.window is not None else rows
            if not intervals.sealed(self.seal, unchecked):
                self._distrust(f"a version of {name!r}")
            elif self.window is not None:
                self.checked.update(unchecked)
        if self.forged:
            return projection_at(self.store, self.path, self.policy, name, seq)
        state = intervals.state_from_rows(name, rows)
        if self.window is not None:
            self.built[name] = (versions, state)
        return state

    def events(self, types: Iterable[str], items: Iterable[str]) -> Iterator[RecordedEvent]:
        """The events of `types` that name any of `items` (`mentions` keys), in log order: those up
        to the head projections.db reached by its index, each through the store's verified read;
        `subject_forgotten` (few) and anything appended since, by type. When the index does not
        hold as many as it counted, projections.db is discarded and every event of `types` read."""
        wanted = frozenset(types)
        seqs = mentions.seqs(self.conn, self.seal, items, self.head) if not self.forged else None
        if seqs is None:  # the index cannot answer: every event of those types
            if not self.forged:
                self._distrust("the index of mentions")
            yield from self.store.read(types=sorted(wanted))
            return
        found = (ev for ev in mentions.events_at(self.store, seqs) if ev.type in wanted)
        forgets = self.store.read(1, self.head, types=["subject_forgotten"]) if "subject_forgotten" in wanted else ()
        yield from heapq.merge(found, forgets, key=lambda ev: ev.seq)
        yield from self.store.read(self.head + 1, types=sorted(wanted))

    def projection(self, name: str, seq: int, field: str | None = None, key: str | None = None) -> Any:
        """Projection `name` as of `seq`: whole, or only one field's item (or inner dict) `key`."""
        return self._state(name, seq, self._rows(seq, name, field, key))


@contextmanager
def indexed_memory(store: Store, path: Path, policy: Policy = DEFAULT_POLICY,
                   window: tuple[int, int] | None = None) -> Iterator[IndexedMemory]:
    """projections.db caught up, and an `IndexedMemory` over it (asked mostly within `window`)."""
    caught_up(store, path, policy)
    with opened(path) as (conn, cps):  # a connection of its own: no lock held while the caller reads
        yield IndexedMemory(conn, cps, store, policy, Path(path), window)
