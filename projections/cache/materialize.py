"""projections.db: materialized projection state beside the ledger — disposable.

Per projection it keeps a checkpoint (last seq folded, the fingerprint of the
projection's code and the policy, the ledger's hash at that seq), the latest state
(compressed canonical JSON), the validity intervals of the indexed projections
(intervals.py: as-of by index) and, for the others, periodic snapshots every
`SNAPSHOT_EVERY` events (less often for a larger state, see `spacing`), from which `as_of` folds
forward only the events of the projections a query touches. Readable tables for
DuckDB are the analytics mirror's (analytics/mirror.py), not this file's: it holds
only what memory is served from.

Reading memory first catches up incrementally, at the cost of what the new
events touch: a projection none of them is dispatched to is neither decoded nor
written again — its checkpoint moves on and its stored state stays as it was (its
row keeps the seq it was written at), read when first used. A projection is rebuilt
from the log by itself when its fingerprint changes. A catch-up is one write
transaction under the file's lock (db.py): two processes never fold the same events
into it, and one killed midway leaves the file as it was. What the file holds is
authenticated as a whole (seal.py, db.py): a file that fails is discarded and rebuilt,
with a one-line warning. A checkpoint whose ledger hash the ledger no longer holds is
not rebuilt around: the ledger was cut or rewritten, and reading stops with one line
naming the seq.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import heapq
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from memtape.ledger.anchor import Anchor, require_anchor
from memtape.ledger.envelope import RecordedEvent
from memtape.ledger.errors import LedgerError
from memtape.ledger.store import Store
from memtape.projections.cache import compression, intervals, kept, mentions
from memtape.projections.cache.db import (
    SOURCE,
    Cache,
    Checkpointed,
    lock,
    readable,
    writable,
)
from memtape.projections.cache.intervals import Tracker
from memtape.projections.cache.mentions import TYPES as MENTIONED
from memtape.projections.folds import FOLDS, INDEXED
from memtape.projections.folds.state import (
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
from memtape.projections.parameters import DEFAULT_POLICY, Thresholds

#: how often a small state is snapshotted (and every snapshot falls on a multiple of it): as of a
#: seq, such a state is read from its snapshot and at most this many events after it
SNAPSHOT_EVERY = 2_500
#: a state larger than this (canonical JSON) is snapshotted every `LARGE_EVERY` snapshots' spacing
#: at most: a copy every `SNAPSHOT_EVERY` events would cost more space than folding those events
#: costs time
SMALL_STATE_BYTES = 256 * 1024
LARGE_EVERY = 4
#: a projection whose state is S bytes is snapshotted at most every S / this many events, so a
#: large state costs about as much to load as the events folded after it (and storage stays bounded)
SNAPSHOT_BYTES_PER_EVENT = 500
FLUSH_SNAPSHOTS = 20  # write buffered snapshots in batches (bounded memory on a long rebuild)
MAX_SEQ = 2**63 - 1  # seqs are 64-bit integers in every store
#: SQLite's page cache (KiB) while a catch-up writes: the versions' primary key is filed in key
#: order, not seq order, so inserts land all over an index that soon outgrows the 2 MB default
CATCHUP_CACHE_KIB = 65_536
#: a stored state whose compressed row is larger than this is written again only when it is due
#: (`Catchup._writes`): encoding and compressing it whole after every few events would cost a
#: catch-up in proportion to the whole memory, not to the events it folds
DEFERRED_STATE_BYTES = 32 * 1024

#: told (what, events folded, events to fold) as a catch-up or rebuild advances, e.g. to draw a bar
FoldProgress = Callable[[str, int, int], None]
#: who is told when a caller passes no `progress` (the command line sets it for each command)
fold_progress: ContextVar[FoldProgress | None] = ContextVar("fold_progress", default=None)


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


class _Counter:
    """Counts the events of one fold for a `FoldProgress`."""

    def __init__(self, report: FoldProgress, what: str, total: int):
        self.report, self.what, self.total, self.done = report, what, total, 0

    def advance(self, n: int) -> None:
        self.done += n
        self.report(self.what, self.done, self.total)


def spacing(size: int) -> int:
    """How many events after a snapshot of `size` bytes the next one of the same projection falls
    due: `SNAPSHOT_EVERY` for a small state (its as-of then folds few events after it), more for a
    larger one."""
    if size <= SMALL_STATE_BYTES:
        return SNAPSHOT_EVERY
    return max(LARGE_EVERY * SNAPSHOT_EVERY, size // SNAPSHOT_BYTES_PER_EVENT)


def forget_floor(store: Store, head: int) -> int:
    """The seq of the latest `subject_forgotten` up to `head` (0 if none): no snapshot is taken below it."""
    floor = 0
    for ev in store.read(1, head, types=["subject_forgotten"]):
        floor = ev.seq
    return floor


def fold_from(
    state: MemoryState,
    starts: dict[str, int],
    events: Iterable[RecordedEvent],
    policy: Thresholds,
    snapshot: Any = None,
    progress: _Counter | None = None,
    tracker: Tracker | None = None,
    flush: Any = None,
) -> MemoryState:
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
        if (
            tracker is not None
            and (steps is not None or t in mentioned)
            and len(tracker.rows) + len(tracker.closes) + len(tracker.mentions.rows) >= flush_rows
        ):
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
    return {
        t: tuple(
            (name, fn, tracker.fold if name in tracked else None)  # type: ignore[union-attr]
            for name, fn in entries
        )
        for t, entries in dispatch(names).items()
    }


#: young objects past which a paused fold's are moved to the oldest generation (see
#: `collector_paused`): below it the first young collection walks them in about a millisecond
MANY_YOUNG = 100_000


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
    frozen (thawing would hand them back), and when the pause left few objects young (a catch-up
    of a few events: nothing to spare the young collection). Counting the frozen objects walks
    them all: in `memtape serve` at 1,000,000 events (its warm-up frozen) two counts were 0.33 s
    of a first `/ui/` at a new head's 0.52 s (cProfile), so the young count is asked first."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_count()[0] > MANY_YOUNG and gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        gc.enable()


# ---- catching up -------------------------------------------------------------------


class Catchup:
    """One catch-up of projections.db to the ledger's head (see `load_state`)."""

    def __init__(
        self,
        store: Store,
        path: Path,
        policy: Thresholds,
        only: Iterable[str] | None = None,
        rebuild: bool = False,
        progress: FoldProgress | None = None,
        lend: bool | None = False,
    ):
        self.store = store
        #: who may hold the states this catch-up returns: nobody (None: the caller only needs the
        #: file current), a reader that folds nothing into them (True), the caller alone (False:
        #: they are not kept, see `kept`)
        self.lend = lend
        #: projection -> (seq, compressed size) of its stored state row
        self.rows: dict[str, tuple[int, int]] = {}
        self.kept: dict[str, Any] = {}
        self.fresh: set[str] = set()  # the projections folded from the start of the log
        self.path = path
        self.policy = policy
        self.only = tuple(only) if only else PROJECTIONS
        self.rebuild = rebuild
        self.progress = progress or fold_progress.get()
        self.snapshots: list[tuple[str, int, str, str, int | None, int, str, bytes | None]] = []
        self.last_snap: dict[str, tuple[int, str, int]] = {}  # projection -> (seq, digest, size)
        self.blob_seq: dict[str, int] = {}  # projection -> seq of its latest snapshot holding a state
        self.hashes: dict[int, str] = {}  # seq -> the ledger's hash there
        self.tracker: Tracker | None = None
        #: one context each for every state and snapshot this catch-up reads or writes
        self.pack, self.unpack = compression.packer(), compression.unpacker()

    def run(self) -> MemoryState:
        with lock:
            with writable(self.path) as cache:
                out = self._run(cache)
            kept.keep(self.path, str(cache.digest), self.kept)  # committed: the file holds these states
        return out

    def _start(self, cp: Checkpointed | None, name: str) -> int:
        """The seq this projection can continue from, or 0 when it must be rebuilt. A ledger that
        no longer holds the hash its checkpoint saw was cut or rewritten (LedgerTampered)."""
        if cp is None:
            return 0
        if cp.seq not in self.hashes:
            require_anchor(self.store, Anchor(cp.seq, cp.ledger_hash, SOURCE))
            self.hashes[cp.seq] = cp.ledger_hash
        if self.rebuild and name in self.only or cp.fingerprint != fingerprint(name, self.policy):
            return 0
        return cp.seq

    def _stored(self, conn: sqlite3.Connection, name: str, start: int, taken: dict[str, Any]) -> Any:
        """The projection's state at its checkpoint `start`: the one this process kept (`kept`), else
        its stored row decoded, and the projection's events after the row's seq folded in (a
        catch-up that folds none of a projection's events, or too few to write a large state again,
        moves its checkpoint on, not its row)."""
        state = kept.owned(taken, name)
        if state is not None:
            return state
        row_seq, blob = conn.execute("SELECT seq, state FROM _states WHERE projection = ?", (name,)).fetchone()
        return fold_forward(self.store, name, decode(name, self.unpack(blob)), row_seq, start, self.policy)

    def _folds_any(self, name: str, start: int, head: int) -> bool:
        """Whether an event after `start` up to `head` is one projection `name` folds."""
        return next(iter(self.store.read(start + 1, head, types=FOLDS[name].TYPES, batch=1)), None) is not None

    def _due(self, name: str, seq: int) -> bool:
        """Whether a snapshot of projection `name` falls due at `seq` (a multiple of SNAPSHOT_EVERY)."""
        prev = self.last_snap.get(name)
        return prev is None or seq - prev[0] >= spacing(prev[2])

    def _needed(self, name: str, start: int, head: int) -> bool:
        """Whether this catch-up must load projection `name`'s state: it is rebuilt, an event to
        fold names it, or (not indexed) a snapshot falls due in the range (the range's last multiple
        of SNAPSHOT_EVERY, the furthest from its last snapshot). Otherwise its state at `head` is
        the stored one: it is neither decoded nor written again."""
        if start == 0 or start >= head:
            return start == 0
        last = head // SNAPSHOT_EVERY * SNAPSHOT_EVERY
        if name not in INDEXED and last > start and self._due(name, last):
            return True
        return self._folds_any(name, start, head)

    def _run(self, cache: Cache) -> MemoryState:
        conn, checkpoints = cache.conn, cache.checkpoints
        head = int(self.store.head())
        conn.execute(f"PRAGMA cache_size = -{CATCHUP_CACHE_KIB}")  # this connection only; closed after the run
        state = MemoryState()
        starts: dict[str, int] = {}
        for name in PROJECTIONS:
            starts[name] = self._start(checkpoints.get(name), name)
        rebuilt = [n for n in PROJECTIONS if starts[n] == 0 and (n in checkpoints or n in self.only and self.rebuild)]
        lo = min(starts.values())
        floor = forget_floor(self.store, head)
        # the index of mentions holds every event the last catch-up reached (all checkpoints reach one head)
        indexed_to = max((cp.seq for cp in checkpoints.values()), default=0)
        self.tracker = tracker = Tracker(conn, cache.key, cache.digest, PROJECTIONS, floor, indexed_to)
        for name in rebuilt:  # its snapshots and intervals are stale (so is its checkpoint)
            cache.delete("_snapshots", "projection = ?", (name,))
            if name in INDEXED:
                tracker.reset(name)
        for name in PROJECTIONS:
            row = conn.execute(
                "SELECT seq, digest, size, same_as FROM _snapshots WHERE projection = ? ORDER BY seq DESC LIMIT 1",
                (name,),
            ).fetchone()
            if row:
                self.last_snap[name] = (row[0], row[1], row[2])
                self.blob_seq[name] = row[3] if row[3] is not None else row[0]
        self.rows = {
            name: (seq, size) for name, seq, size in conn.execute("SELECT projection, seq, length(state) FROM _states")
        }
        self.fresh = {n for n in PROJECTIONS if starts[n] == 0}
        taken = {} if self.rebuild else kept.take(self.path, cache.sealed.digest)
        loaded = [n for n in PROJECTIONS if self._needed(n, starts[n], head)]
        with collector_paused():  # decoding builds as many objects as a fold does (3x slower collected)
            for name in loaded:  # the others stay None: nothing in the range reaches them
                setattr(
                    state, name, self._stored(conn, name, starts[name], taken) if starts[name] else FOLDS[name].empty()
                )
        state.head = lo
        fp = {n: fingerprint(n, self.policy) for n in PROJECTIONS}

        def snapshot(seq: int, ledger_hash: str) -> None:
            if seq < floor:  # a snapshot before a forget would hold the forgotten subject
                return
            for name in PROJECTIONS:
                if seq <= starts[name] or name in INDEXED:  # the indexed ones answer as-of from intervals
                    continue
                if not self._due(name, seq):
                    continue
                prev = self.last_snap.get(name)
                raw = encode(getattr(state, name))
                dig = hashlib.sha256(raw).hexdigest()
                if prev is not None and prev[1] == dig:  # unchanged: point at the stored one
                    self.snapshots.append((name, seq, fp[name], dig, self.blob_seq[name], len(raw), ledger_hash, None))
                else:
                    self.snapshots.append((name, seq, fp[name], dig, None, len(raw), ledger_hash, self.pack(raw)))
                    self.blob_seq[name] = seq
                self.last_snap[name] = (seq, dig, len(raw))
            if len(self.snapshots) >= FLUSH_SNAPSHOTS * len(PROJECTIONS):
                self._flush_snapshots(cache)

        if head > lo:
            tracker.defer_indexes()  # made again by `_save`, which follows any fold
            what = "rebuilding projections" if lo == 0 else "catching up projections"
            counter = _Counter(self.progress, what, head - lo) if self.progress is not None else None
            with collector_paused():
                fold_from(
                    state, starts, self.store.read(lo + 1, head), self.policy, snapshot, counter, tracker, tracker.flush
                )
        if head > lo or rebuilt or any(n not in checkpoints for n in PROJECTIONS):
            self._save(cache, state, fp, head, floor)
        lend = bool(self.lend)
        out = LazyState(lambda name: current_projection(self.store, self.path, self.policy, name, head, lend), head)
        for name in loaded:
            setattr(out, name, getattr(state, name))
        # what stays kept: the states taken and not folded into (unchanged), and the folded ones
        # unless the caller alone holds them now
        self.kept = {n: s for n, s in taken.items() if n not in loaded and starts[n]}
        if self.lend is not False:
            self.kept.update((n, getattr(state, n)) for n in loaded)
        return out

    def _flush_snapshots(self, cache: Cache) -> None:
        if self.snapshots:
            cache.insert("_snapshots", self.snapshots)
            self.snapshots = []

    def _writes(self, name: str, head: int, floor: int) -> bool:
        """Whether a folded projection's state is written again at `head`: it has no row, a small
        one, one from before the last forget (it may hold the forgotten subject), or one
        `SNAPSHOT_EVERY` events old or more. A large state is otherwise left at its row's seq, and
        whoever reads it folds the projection's own events since then (`fold_forward`): at most
        that many, where encoding it whole would cost as much as the memory is large."""
        row = self.rows.get(name)
        if row is None or name in self.fresh:
            return True
        seq, size = row
        return size <= DEFERRED_STATE_BYTES or seq < floor or head - seq >= SNAPSHOT_EVERY

    def _save(self, cache: Cache, state: MemoryState, fp: dict[str, str], head: int, floor: int) -> None:
        """Checkpoint every projection at `head`: the folded ones with their state encoded again
        when it is due (`_writes`), the others (not loaded: unchanged since their checkpoint) with
        their stored state left as it is; and bind the file to the ledger's head."""
        self._flush_snapshots(cache)
        ledger_hash = _hash_at(self.store, head)
        if self.tracker is not None:
            self.tracker.finish()
        for name in PROJECTIONS:
            new = getattr(state, name)
            if new is not None and self._writes(name, head, floor):
                cache.delete("_states", "projection = ?", (name,))
                cache.insert("_states", [(name, head, self.pack(encode(new)))])
            cache.delete("_checkpoints", "projection = ?", (name,))
            cache.insert("_checkpoints", [Checkpointed(name, head, fp[name], ledger_hash).row()])
        cache.bind(head, ledger_hash)


def load_state(
    store: Store,
    projections_path: Path | None,
    policy: Thresholds = DEFAULT_POLICY,
    as_of: int | str | None = None,
    progress: FoldProgress | None = None,
    lend: bool = False,
) -> MemoryState:
    """Every projection at the ledger's head (catching projections.db up first), or at `as_of`.

    When projections.db is already current (and for `as_of`), each projection is loaded
    when first used: most queries touch one or two of them. `lend`: the caller only reads the
    states (folds nothing into them), so those this process keeps between catch-ups may be
    handed to it (`kept`)."""
    to_seq = resolve_seq(store, as_of) if as_of is not None else None
    if projections_path is None:
        return fold(MemoryState.empty(), store.read(1, to_seq), policy)
    path = Path(projections_path)
    head = int(store.head())
    if to_seq is None or to_seq >= head:
        if not _current(store, path, policy, head):
            return Catchup(store, path, policy, progress=progress, lend=lend).run()
        return LazyState(lambda name: current_projection(store, path, policy, name, head, lend), head)
    caught_up(store, path, policy, progress)
    return LazyState(lambda name: projection_at(store, path, policy, name, to_seq), to_seq)


def _current(store: Store, path: Path, policy: Thresholds, head: int) -> bool:
    """projections.db holds every projection at `head`, for this policy, code and ledger."""
    with readable(path) as cache:
        cps = cache.checkpoints
        current = all(
            n in cps and cps[n].seq == head and cps[n].fingerprint == fingerprint(n, policy) for n in PROJECTIONS
        )
        return current and (head == 0 or cps[PROJECTIONS[0]].ledger_hash == _hash_at(store, head))


def caught_up(
    store: Store, path: Path, policy: Thresholds = DEFAULT_POLICY, progress: FoldProgress | None = None
) -> None:
    """Make sure projections.db is at the ledger's head (loading no state when it already is)."""
    if not _current(store, path, policy, int(store.head())):
        Catchup(store, path, policy, progress=progress, lend=None).run()


def fold_forward(store: Store, name: str, state: Any, after: int, to: int, policy: Thresholds) -> Any:
    """Projection `name`'s `state` at seq `after` brought to seq `to`: its own events between folded in."""
    if to > after:
        apply = FOLDS[name].apply
        for ev in store.read(after + 1, to, types=FOLDS[name].TYPES):
            state = apply(state, ev, policy)
    return state


def current_projection(store: Store, path: Path, policy: Thresholds, name: str, head: int, lend: bool = False) -> Any:
    """One projection's state at `head` from its stored row, read in the same transaction as its
    checkpoint (the events since the row's seq folded in); else (projections.db moved on
    meanwhile) as of `head`. `lend`: the caller folds nothing into it, so the state this process
    keeps for the checkpoint is handed out, or the one decoded is kept (`kept`)."""
    with readable(path) as cache:
        cp = cache.checkpoints.get(name)
        if cp is not None and cp.seq == head and cp.fingerprint == fingerprint(name, policy):
            digest = cache.sealed.digest
            state = kept.lend(path, digest, name) if lend else None
            if state is not None:
                return state
            row = cache.conn.execute("SELECT seq, state FROM _states WHERE projection = ?", (name,)).fetchone()
            if row is not None and row[0] <= cp.seq:
                with collector_paused():  # the state built is acyclic (see `projection_at`)
                    state = decode(name, compression.unpacker()(row[1]))
                    state = fold_forward(store, name, state, row[0], cp.seq, policy)
                if lend:
                    kept.add(path, digest, name, state)
                return state
    return projection_at(store, path, policy, name, head)


def indexed_at(cache: Cache, store: Store, policy: Thresholds, name: str, seq: int) -> bool:
    """Whether projections.db's intervals answer projection `name` at `seq`: it is indexed, its
    checkpoint is this code's and policy's and reaches `seq`, and no forget since `seq` dropped
    the versions that held then."""
    cp = cache.checkpoints.get(name)
    return (
        name in INDEXED
        and cp is not None
        and cp.seq >= seq
        and cp.fingerprint == fingerprint(name, policy)
        and forget_floor(store, cp.seq) <= seq
    )


def projection_at(store: Store, path: Path, policy: Thresholds, name: str, seq: int) -> Any:
    """One projection at `seq`: read from its validity intervals when it is indexed, else its
    nearest snapshot at or before `seq`, then only its own event types folded forward."""
    with collector_paused():  # the state built is acyclic too
        return _projection_at(store, path, policy, name, seq)


def _projection_at(store: Store, path: Path, policy: Thresholds, name: str, seq: int) -> Any:
    mod = FOLDS[name]
    state, start = mod.empty(), 0
    with readable(path) as cache:
        if indexed_at(cache, store, policy, name, seq):
            return intervals.state_at(intervals.Blocks(cache.conn), name, seq)
        row = cache.conn.execute(
            "SELECT seq, state, same_as, ledger_hash FROM _snapshots WHERE projection = ? AND seq <= ? "
            "AND fingerprint = ? ORDER BY seq DESC LIMIT 1",
            (name, seq, fingerprint(name, policy)),
        ).fetchone()
        if row is not None:
            snap_seq, blob, same_as, ledger_hash = row
            if blob is None:
                blob = cache.conn.execute(
                    "SELECT state FROM _snapshots WHERE projection = ? AND seq = ?", (name, same_as)
                ).fetchone()[0]
            require_anchor(store, Anchor(snap_seq, ledger_hash, SOURCE))
            state, start = decode(name, compression.unpacker()(blob)), snap_seq
    if seq > start:
        apply = mod.apply
        for ev in store.read(start + 1, seq, types=mod.TYPES):
            state = apply(state, ev, policy)
    return state


def rebuild(
    store: Store,
    path: Path,
    policy: Thresholds = DEFAULT_POLICY,
    projections: Iterable[str] | None = None,
    progress: FoldProgress | None = None,
) -> MemoryState:
    """Rebuild the named projections (all by default) from the log, telling `progress` as it goes."""
    names = tuple(projections) if projections else PROJECTIONS
    unknown = [n for n in names if n not in PROJECTIONS]
    if unknown:
        raise LedgerError(f"unknown projection {unknown[0]!r}: choose from {', '.join(PROJECTIONS)}")
    return Catchup(store, Path(path), policy, only=names, rebuild=True, progress=progress).run()


def interval_versions(
    store: Store, path: Path, policy: Thresholds, names: Iterable[str], after: int, head: int
) -> Iterator[tuple[str, list[tuple[Any, ...]]]]:
    """The cache's one door for a copy of it kept by a layer above (the analytics mirror):
    projections.db caught up to the ledger's head, then (projection, batch) of the versions of the
    indexed projections `names` that began or ended after `after`, as of `head` — each row
    (field, item, part, valid_from, valid_to, value bytes), an item or part a field lacks as None."""
    caught_up(store, path, policy)
    none = intervals.NO_KEY
    with readable(path) as cache:  # every projection's versions in one read of projections.db
        blocks = intervals.Blocks(cache.conn)
        for name in names:
            for batch in intervals.changed(blocks, name, after, head):
                yield (
                    name,
                    [
                        (field, None if k1 == none else k1, None if k2 == none else k2, valid_from, valid_to, value)
                        for field, k1, k2, valid_from, valid_to, value in batch
                    ],
                )
            blocks.values.clear()  # the next projection's blocks are others


class ProjectionsHead:
    """The head projections.db remembers (a `ledger.anchor.Keeper`): the ledger head its sealed
    checkpoint is bound to. Saved only into an existing projections.db (a command that never
    materialized memory does not create one)."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def load(self) -> Anchor | None:
        if not self.path.exists():
            return None
        with lock, readable(self.path) as cache:
            seq, ledger_hash = cache.head
        return Anchor(seq, ledger_hash, SOURCE) if seq > 0 else None

    def save(self, anchor: Anchor) -> None:
        if not self.path.exists():
            return
        with lock:
            with readable(self.path) as cache:
                if cache.head[0] >= anchor.seq:
                    return
            with writable(self.path) as cache:
                cache.bind(anchor.seq, anchor.hash)


class IndexedMemory:
    """Chosen items of the indexed projections at any seq, each read by key from projections.db's
    intervals (what an audit shows at a step: Tier 1, the recalled lessons, one domain's facts
    and selectors, the offered trajectories) — no fold, however long the log."""

    def __init__(self, cache: Cache, store: Store, policy: Thresholds, window: tuple[int, int] | None = None):
        self.conn = cache.conn
        self.key = cache.key
        self.cps = cache.checkpoints
        self.store = store
        self.policy = policy
        self.head = min((cp.seq for cp in self.cps.values()), default=0)
        self.floor = forget_floor(store, self.head)
        self.blocks = intervals.Blocks(self.conn)  # the steps of an audit read mostly the same blocks
        #: the seqs the questions will fall in (an audit's steps): each question's versions are then
        #: selected once for all of them, and a state built from the same versions as the last one of
        #: its projection is that one again
        self.window = window
        self.selected: dict[tuple[str | None, ...], list[tuple[Any, ...]]] = {}
        self.built: dict[str, tuple[tuple[Any, ...], Any]] = {}

    def answers(self, seq: int, names: Iterable[str]) -> bool:
        return seq >= self.floor and all(
            n in INDEXED
            and n in self.cps
            and self.cps[n].seq >= seq
            and self.cps[n].fingerprint == fingerprint(n, self.policy)
            for n in names
        )

    def at(
        self, seq: int, domain: str | None, lesson_ids: Iterable[str] = (), trajectory_ids: Iterable[str] = ()
    ) -> MemoryState:
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
        rows = {
            "lessons": lessons,
            "trajectories": trajectories,
            "knowledge": rows_at("knowledge", "current", domain) if domain else [],
            "selectors": rows_at("selectors", "by_domain", domain) if domain else [],
        }
        state = MemoryState.empty(rows)
        for name, found in rows.items():
            setattr(state, name, self._state(name, found))
        state.head = seq
        return state

    def _rows(
        self,
        seq: int,
        name: str,
        field: str | None = None,
        k1: str | None = None,
        k2: str | None = None,
        facet: str | None = None,
    ) -> list[tuple[Any, ...]]:
        """The versions a question selects at `seq` (selected once for the whole window when `seq`
        is in it)."""
        if self.window is None or not self.window[0] <= seq <= self.window[1]:
            found = intervals.rows_at(self.blocks, name, seq, field, k1, None, facet)
        else:
            question = (name, field, k1, facet)
            selected = self.selected.get(question)
            if selected is None:
                selected = self.selected[question] = intervals.rows_during(
                    self.blocks, name, *self.window, field, k1, None, facet
                )
            found = [r for r in selected if intervals.valid(r, seq)]
        return [r for r in found if r[2] in (k2, intervals.NO_KEY)] if k2 is not None else found

    def _state(self, name: str, rows: list[tuple[Any, ...]]) -> Any:
        versions = tuple((r[0], r[1], r[2], r[6]) for r in rows)  # (field, k1, k2, valid_from): the primary key
        last = self.built.get(name)
        if last is not None and last[0] == versions:
            return last[1]
        state = intervals.state_from_rows(name, rows)
        if self.window is not None:
            self.built[name] = (versions, state)
        return state

    def between(self, lo: int, hi: int, fields: dict[str, tuple[str, bool]]) -> tuple[MemoryState, MemoryState]:
        """Two partial states, at seq `lo` and at seq `hi` (`lo` <= `hi`), holding only the items of
        `fields` (projection -> (its field, known by part)) whose version differs between them, in
        the fold's order; every other item is the same at both and left out. An item known by part
        is an inner key whatever outer key holds it (a trajectory id under any host): every version
        of a changed one is read, so each side holds it under all the keys it had there."""
        before, after = MemoryState.empty(fields), MemoryState.empty(fields)
        for name, (field, by_part) in fields.items():
            ended, begun = intervals.between(self.blocks, name, field, lo, hi)
            if by_part and (ended or begun):
                rows = intervals.holding(self.blocks, name, field, {r[2] for r in ended + begun}, lo, hi)
                ended = [r for r in rows if intervals.valid(r, lo)]
                begun = [r for r in rows if intervals.valid(r, hi)]
            setattr(before, name, intervals.state_from_rows(name, ended))
            setattr(after, name, intervals.state_from_rows(name, begun))
        before.head, after.head = lo, hi
        return before, after

    def events(self, types: Iterable[str], items: Iterable[str]) -> Iterator[RecordedEvent]:
        """The events of `types` that name any of `items` (`mentions` keys), in log order: those up
        to the head projections.db reached by its index, each through the store's verified read;
        `subject_forgotten` (few) and anything appended since, by type."""
        wanted = frozenset(types)
        seqs = mentions.seqs(self.conn, self.key, items, self.head)
        found = (ev for ev in mentions.events_at(self.store, seqs) if ev.type in wanted)
        forgets = self.store.read(1, self.head, types=["subject_forgotten"]) if "subject_forgotten" in wanted else ()
        yield from heapq.merge(found, forgets, key=lambda ev: ev.seq)
        yield from self.store.read(self.head + 1, types=sorted(wanted))

    def projection(self, name: str, seq: int, field: str | None = None, key: str | None = None) -> Any:
        """Projection `name` as of `seq`: whole, or only one field's item (or inner dict) `key`."""
        return self._state(name, self._rows(seq, name, field, key))


@contextmanager
def indexed_memory(
    store: Store, path: Path, policy: Thresholds = DEFAULT_POLICY, window: tuple[int, int] | None = None
) -> Iterator[IndexedMemory]:
    """projections.db caught up, and an `IndexedMemory` over it (asked mostly within `window`):
    every answer read in one read transaction."""
    caught_up(store, path, policy)
    with readable(path) as cache:  # a connection of its own: no lock held while the caller reads
        yield IndexedMemory(cache, store, policy, window)


def changed_between(
    store: Store, path: Path, policy: Thresholds, lo: int, hi: int, fields: dict[str, tuple[str, bool]]
) -> tuple[MemoryState, MemoryState] | None:
    """`IndexedMemory.between` over projections.db caught up; None when its versions cannot say
    (`lo` below the last forget, which dropped the versions that held then — at seq 0 nothing held
    yet — or a projection not indexed for this policy): the caller builds both points whole."""
    with indexed_memory(store, path, policy) as memory:
        if memory.answers(hi, fields) and (lo == 0 or memory.answers(lo, fields)):
            with collector_paused():  # the states built are acyclic (see `projection_at`)
                return memory.between(lo, hi, fields)
    return None
