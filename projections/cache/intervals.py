"""Validity intervals: every version of every memory item, with the seq range in which it held.

Memory as of a seq is then a lookup (as Datomic and XTDB answer "as of"), not a
fold: the rows whose `valid_from <= seq < valid_to`. A version is opened by the
event that made it and closed by the event that replaced or removed it.

A projection takes part by meeting `folds.IndexedFold`: its `LAYOUT` (its state's
fields: depth 0 a value, 1 key -> item, 2 key -> key -> item) and `touched(state,
event)`: the paths an event may change, computed before it is folded (None:
anything, e.g. a forget). `Tracker` compares those paths before and after each
event and records what changed. Items keep the position they had in their dict
(`o1`, `o2`: the seq at which their key was inserted), so a state rebuilt from the
rows iterates in the fold's order; a depth-2 field also records its inner dicts
(`k2` = NO_KEY, no value), so empty ones come back too. `state_from_rows` hands the
rows to the projection's own `decode`. The values (canonical JSON) are kept in
`_blocks`, compressed BLOCK_VALUES at a time; a row names its block and slot.

Every row written or deleted goes into (or out of) its table's digest (`seal.Digest`),
which projections.db's sealed checkpoint holds: the rows themselves carry no seal, and
are read as they are (the file is checked whole when someone else touched it).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from operator import itemgetter
from typing import Any

import orjson

from memtape.ledger.envelope import RecordedEvent
from memtape.ledger.seal import Digest, Key
from memtape.projections.cache import compression
from memtape.projections.cache.mentions import Mentions
from memtape.projections.folds import FACETS, INDEXED

OPEN = 1 << 62  # valid_to of a version still current
NO_KEY = "\x00"  # k1 / k2 when a level has no key (events cannot hold NUL)
PER_EVENT = 1 << 16  # positions: seq * PER_EVENT + the order of insertion within that event
FLUSH_ROWS = 20_000
#: values per block: versions of one projection written together are compressed together (small
#: JSON items share their keys and most of their text: ~10x, against ~2x one by one)
BLOCK_VALUES = 64
_SEP = b"\n"  # between the values of a block (orjson never writes a raw newline)

#: each table's columns, in the order its rows are hashed (`seal.Key.row`)
COLUMNS = {
    "_intervals": ("projection", "field", "k1", "k2", "valid_from", "valid_to", "o1", "o2", "facet", "block", "slot"),
    "_blocks": ("id", "projection", "data"),
}
DDL = (
    "CREATE TABLE _intervals (projection TEXT NOT NULL, field TEXT NOT NULL, k1 TEXT NOT NULL, "
    "k2 TEXT NOT NULL, valid_from INTEGER NOT NULL, valid_to INTEGER NOT NULL, o1 INTEGER NOT NULL, "
    "o2 INTEGER NOT NULL, facet TEXT, block INTEGER, slot INTEGER, "
    "PRIMARY KEY (projection, field, k1, k2, valid_from))",
    "CREATE TABLE _blocks (id INTEGER PRIMARY KEY, projection TEXT NOT NULL, data BLOB NOT NULL)",
    "CREATE INDEX _intervals_to ON _intervals (projection, valid_to, valid_from)",
    "CREATE INDEX _intervals_from ON _intervals (projection, valid_from, valid_to)",
    "CREATE INDEX _intervals_facet ON _intervals (projection, facet, valid_to) WHERE facet IS NOT NULL",
)
TABLES = tuple(COLUMNS)
#: the indexes a whole projection as of a seq is read by, name -> how it is made: a rebuild into
#: an empty table makes them once after its last insert (sorting every version once) rather than
#: keeping each up to date through every insert and close
INDEXES = {ddl.split()[2]: ddl for ddl in DDL if ddl.startswith("CREATE INDEX")}
_ROW = ", ".join(COLUMNS["_intervals"])
_INSERT = f"INSERT INTO _intervals ({_ROW}) VALUES ({', '.join('?' * len(COLUMNS['_intervals']))})"
_OPEN_ROW = (
    f"SELECT {_ROW} FROM _intervals WHERE projection = ? AND field = ? AND k1 = ? AND k2 = ? AND valid_to = {OPEN}"
)
_CLOSE = (
    "UPDATE _intervals SET valid_to = ? WHERE projection = ? AND field = ? AND k1 = ? AND k2 = ? AND valid_from = ?"
)
#: what a read selects: the columns a state is built from (the value as block and slot), then the seqs
_COLS = "field, k1, k2, o1, o2, block, slot, valid_from, valid_to"
#: every version of a projection valid at a seq, by one of two indexes, the other bound checked in
#: the index itself and only those versions read from the table: late in the log, walked from
#: `valid_to > seq` to the end (the versions current now and the few closed since); early, from
#: the start to `valid_from <= seq` (the few begun by then). Either walk alone would read nearly
#: every version of the projection at the other end of the log, for an answer of a few
_ALIVE = {
    late: f"SELECT {_COLS} FROM _intervals INDEXED BY {index} WHERE projection = ? AND valid_to > ? AND valid_from <= ?"
    for late, index in ((True, "_intervals_to"), (False, "_intervals_from"))
}
#: what a whole projection as of a seq reads of each version: where it goes and where its value is
_PLACED = {late: query.replace(_COLS, "field, k1, k2, o1, o2, block, slot") for late, query in _ALIVE.items()}
#: the last seq a projection's versions reach (by `_intervals_from`: one step of the index)
_LAST = "SELECT MAX(valid_from) FROM _intervals WHERE projection = ?"


class Blocks:
    """The values of stored blocks, each decompressed once. A reader that asks many questions keeps one."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn
        self.values: dict[int, list[bytes]] = {}
        self.unpack = compression.unpacker()  # one context for every block (not per call)

    def load(self, ids: Iterable[int | None]) -> None:
        wanted = sorted({i for i in ids if i is not None and i not in self.values})
        unpack, values = self.unpack, self.values
        for at in range(0, len(wanted), 500):
            chunk = wanted[at : at + 500]
            for bid, data in self.conn.execute(
                f"SELECT id, data FROM _blocks WHERE id IN ({', '.join('?' * len(chunk))})", chunk
            ):
                values[bid] = unpack(data).split(_SEP)

    def value(self, block: int | None, slot: int | None) -> bytes | None:
        if block is None:
            return None
        values = self.values.get(block)
        if values is None:
            self.load((block,))
            values = self.values[block]
        return values[slot]  # type: ignore[index]


def resolved(blocks: Blocks, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows as selected (`_COLS`) with each value read from its block: (field, k1, k2, o1, o2,
    value, valid_from, valid_to)."""
    blocks.load(r[5] for r in rows)
    value = blocks.value
    return [(f, k1, k2, o1, o2, value(b, s), *rest) for f, k1, k2, o1, o2, b, s, *rest in rows]


Path_ = tuple[str, ...]


def _encode(item: Any) -> bytes:
    """An item version as stored: its canonical JSON (compressed with its block when flushed)."""
    return orjson.dumps(item, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


_decode = orjson.loads


_MISSING = object()
Captured = tuple[dict[Path_, Any], set[Path_]]


def _capture(state: Any, layout: dict[str, int], paths: Iterable[Path_], copy: bool) -> Captured:
    """The leaves and inner dicts under `paths` (lists copied when `copy`: some folds edit them in
    place, so what held before an event is kept apart from what holds after it)."""
    leaves: dict[Path_, Any] = {}
    containers: set[Path_] = set()
    for path in paths:
        field = path[0]
        depth = layout[field]
        value = getattr(state, field)
        if depth == 0:
            leaves[(field,)] = value
        elif depth == 1:
            if len(path) == 1:
                for k, v in value.items():
                    leaves[(field, k)] = list(v) if copy and isinstance(v, list) else v
            else:
                v = value.get(path[1], _MISSING)
                if v is not _MISSING:
                    leaves[(field, path[1])] = list(v) if copy and isinstance(v, list) else v
        elif len(path) == 1:
            for k1, inner in value.items():
                containers.add((field, k1))
                for k2, v in inner.items():
                    leaves[(field, k1, k2)] = v
        else:
            k1 = path[1]
            inner = value.get(k1, _MISSING)
            if inner is _MISSING:
                continue
            containers.add((field, k1))
            if len(path) == 3:
                v = inner.get(path[2], _MISSING)
                if v is not _MISSING:
                    leaves[(field, k1, path[2])] = v
            else:
                for k2, v in inner.items():
                    leaves[(field, k1, k2)] = v
    return leaves, containers


class Tracker:
    """Records the interval rows of the indexed projections while they are folded (see module doc),
    and writes them (`flush`) inside the caller's write transaction, each into `digest`."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        key: Key,
        digest: Digest,
        names: Iterable[str],
        floor: int = 0,
        mentions_after: int = 0,
    ):
        self.conn = conn
        self.key = key
        self.digest = digest
        self.names = [n for n in names if n in INDEXED]
        self.mods = {n: INDEXED[n] for n in self.names}
        self.floor = floor  # versions closed at or before the last forget are not kept
        #: per projection: its `touched`, its LAYOUT, the paths of every field, its `facet`
        self.specs: dict[str, tuple[Any, dict[str, int], list[Path_], Any]] = {
            n: (m.touched, m.LAYOUT, [(f,) for f in m.LAYOUT], FACETS.get(n)) for n, m in self.mods.items()
        }
        #: per projection, live item / inner dict -> (o1, o2)
        self.pos: dict[str, dict[Path_, tuple[int, int]]] = {n: {} for n in self.names}
        self.rows: list[list[Any]] = []
        #: per projection, versions opened since the last flush -> their index in `rows`
        self.open_rows: dict[str, dict[Path_, int]] = {n: {} for n in self.names}
        self.closes: list[tuple[Any, ...]] = []
        #: filed with the versions, in the same transaction (only events after `mentions_after`: the
        #: index already holds those before)
        self.mentions = Mentions(conn, key, digest, mentions_after)
        self.pack = compression.packer()  # one context for every block (not per call)
        self.deferred = False  # the seq indexes dropped until `finish` (see `defer_indexes`)

    def reset(self, name: str) -> None:
        """Forget every stored version of a projection (it is being rebuilt)."""
        self._delete("_intervals", "projection = ?", (name,))
        self._delete("_blocks", "projection = ?", (name,))

    def defer_indexes(self) -> None:
        """Before folding into an empty `_intervals` (a rebuild, a first catch-up): drop its `INDEXES`,
        which `finish` makes again, in the same transaction, once every version is in. Not after a
        forget: dropping the versions it reaches reads them by `valid_to` at every flush."""
        if self.floor or self.conn.execute("SELECT 1 FROM _intervals LIMIT 1").fetchone() is not None:
            return
        for index in INDEXES:
            self.conn.execute(f"DROP INDEX IF EXISTS {index}")
        self.deferred = True

    def finish(self) -> None:
        """Write what is left to write, and make again the indexes `defer_indexes` dropped."""
        self.flush()
        if self.deferred:
            for ddl in INDEXES.values():
                self.conn.execute(ddl)
            self.deferred = False

    def _delete(self, table: str, where: str, params: tuple[Any, ...]) -> None:
        """Delete the rows of `table` that `where` selects, out of its digest first."""
        cols = ", ".join(COLUMNS[table])
        self.digest.rows(self.key, table, self.conn.execute(f"SELECT {cols} FROM {table} WHERE {where}", params), -1)
        self.conn.execute(f"DELETE FROM {table} WHERE {where}", params)

    def fold(self, name: str, apply: Any, state: Any, ev: RecordedEvent, policy: Any) -> Any:
        """`apply(state, ev, policy)`, recording the versions it opens and closes: the paths
        `touched` names are captured before and after, and only what changed is filed."""
        touched, layout, every, facet = self.specs[name]
        paths = touched(state, ev)
        if paths is None:
            paths = every
        elif not paths:
            return apply(state, ev, policy)
        elif len(paths) == 1 and len(paths[0]) == layout[paths[0][0]] + 1 > 1:
            return self._fold_item(name, apply, state, ev, policy, paths[0], facet)
        old, old_containers = _capture(state, layout, paths, True)
        state = apply(state, ev, policy)
        new, new_containers = _capture(state, layout, paths, False)
        seq = ev.seq
        counter = 0
        if old_containers != new_containers:
            for c in old_containers - new_containers:
                self._close(name, c, seq)
            created = new_containers - old_containers
            for c in sorted(created, key=self._order_hint(state)) if len(created) > 1 else created:
                counter += 1
                self._open(name, c, seq, (seq * PER_EVENT + counter, 0), None, None)
        for p in old:
            if p not in new:
                self._close(name, p, seq)
        for p, v in new.items():
            counter = self._file(name, p, seq, old.get(p, _MISSING), v, counter, facet)
        return state

    def _fold_item(
        self, name: str, apply: Any, state: Any, ev: RecordedEvent, policy: Any, p: Path_, facet: Any
    ) -> Any:
        """`fold` when the event touches one item (most do: a step, a selector, a fact, a run):
        what `fold` records, without capturing into dicts and sets."""
        field, k1 = p[0], p[1]
        inner = len(p) == 3
        held = getattr(state, field).get(k1, _MISSING)
        if inner:
            had = held is not _MISSING
            was = held.get(p[2], _MISSING) if had else _MISSING
        else:
            was = list(held) if isinstance(held, list) else held
        state = apply(state, ev, policy)
        holds = getattr(state, field).get(k1, _MISSING)
        if inner:
            has = holds is not _MISSING
            now = holds.get(p[2], _MISSING) if has else _MISSING
        else:
            now = holds
        seq = ev.seq
        counter = 0
        if inner and had != has:
            if had:
                self._close(name, (field, k1), seq)
            else:
                counter += 1
                self._open(name, (field, k1), seq, (seq * PER_EVENT + counter, 0), None, None)
        if now is _MISSING:
            if was is not _MISSING:
                self._close(name, p, seq)
            return state
        self._file(name, p, seq, was, now, counter, facet)
        return state

    def _file(self, name: str, p: Path_, seq: int, was: Any, now: Any, counter: int, facet: Any) -> int:
        """File item `p` as `now` after event `seq` when it differs from what it `was` (_MISSING: a
        new key, which goes to the end of its dict, numbered after the `counter` positions this
        event gave before it); the counter as this leaves it."""
        if was is now:
            return counter
        if was is _MISSING:
            counter += 1
            at = seq * PER_EVENT + counter
            pos = (at, 0) if len(p) < 3 else (self._position(name, p[:2])[0], at)
        elif was == now:
            return counter
        else:
            pos = self._position(name, p)
            self._close(name, p, seq)
        self._open(name, p, seq, pos, _encode(now), facet(p[0], now) if facet is not None else None)
        return counter

    @staticmethod
    def _order_hint(state: Any) -> Any:
        """Inner dicts created by one event, in their dict's order."""

        def key(c: Path_) -> tuple[str, int]:
            return c[0], list(getattr(state, c[0])).index(c[1])

        return key

    def _position(self, name: str, p: Path_) -> tuple[int, int]:
        pos = self.pos[name].get(p)
        if pos is None:  # opened by an earlier catch-up
            k1, k2 = (p[1] if len(p) > 1 else NO_KEY), (p[2] if len(p) > 2 else NO_KEY)
            row = self._current((name, p[0], k1, k2))
            pos = (row[6], row[7]) if row is not None else (0, 0)
        return pos

    def _current(self, key: tuple[str, str, str, str]) -> tuple[Any, ...] | None:
        """The current version of an item (projection, field, k1, k2), every column, as stored."""
        return self.conn.execute(_OPEN_ROW, key).fetchone()  # type: ignore[no-any-return]

    def _open(
        self, name: str, p: Path_, seq: int, pos: tuple[int, int], value: bytes | None, facet: str | None
    ) -> None:
        self.pos[name][p] = pos
        self.open_rows[name][p] = len(self.rows)
        self.rows.append(
            [
                name,
                p[0],
                p[1] if len(p) > 1 else NO_KEY,
                p[2] if len(p) > 2 else NO_KEY,
                seq,
                OPEN,
                pos[0],
                pos[1],
                facet,
                value,
            ]
        )

    def _close(self, name: str, p: Path_, seq: int) -> None:
        self.pos[name].pop(p, None)
        i = self.open_rows[name].pop(p, None)
        if i is not None:
            self.rows[i][5] = seq
        else:
            self.closes.append((seq, name, p[0], p[1] if len(p) > 1 else NO_KEY, p[2] if len(p) > 2 else NO_KEY))

    def flush(self) -> None:
        """Write what was recorded (call inside the write transaction): the values in blocks of
        BLOCK_VALUES per projection, each row into its table's digest."""
        conn, floor, key, digest = self.conn, self.floor, self.key, self.digest
        row_hash = key.row
        closed, gone, came = [], 0, 0
        for seq, *item in self.closes:  # before the inserts: they must not reach the versions opened since
            row = self._current(tuple(item))
            if row is not None:
                closed.append((seq, *item, row[4]))
                gone += row_hash(row)
                came += row_hash((*row[:5], seq, *row[6:]))
        conn.executemany(_CLOSE, closed)
        digest.add("_intervals", len(closed), gone, -1)
        digest.add("_intervals", len(closed), came)
        kept = [r for r in self.rows if r[5] > floor]
        next_id = (conn.execute("SELECT MAX(id) FROM _blocks").fetchone()[0] or 0) + 1
        packed: list[tuple[int, str, bytes]] = []
        out = []
        by_projection: dict[str, tuple[list[list[Any]], list[list[Any]]]] = {}
        for r in kept:  # the versions closed since they opened apart from those still current, which
            # fill blocks of their own: memory as of a seq then reads few blocks (those of the
            # current versions, the most of what held at any seq, and only one flush's others)
            by_projection.setdefault(r[0], ([], []))[r[5] == OPEN].append(r)
        for name, (done, current) in by_projection.items():
            rows = done + current
            values: list[bytes] = []
            for r in rows:
                value = r[9]
                block = slot = None
                if value is not None:
                    if len(values) == BLOCK_VALUES:
                        packed.append(self._block(next_id, name, values))
                        next_id, values = next_id + 1, []
                    block, slot = next_id, len(values)
                    values.append(value)
                out.append((*r[:9], block, slot))
            if values:
                packed.append(self._block(next_id, name, values))
                next_id += 1
        conn.executemany("INSERT INTO _blocks (id, projection, data) VALUES (?, ?, ?)", packed)
        digest.rows(key, "_blocks", packed)
        conn.executemany(_INSERT, out)
        digest.rows(key, "_intervals", out)
        self.mentions.flush()
        if floor:
            for name in self.names:
                self._drop_before(name, floor)
        self.rows, self.closes = [], []
        for opened in self.open_rows.values():
            opened.clear()

    def _block(self, block: int, name: str, values: list[bytes]) -> tuple[int, str, bytes]:
        """A block row as stored: its values compressed."""
        return block, name, self.pack(_SEP.join(values))

    def _drop_before(self, name: str, floor: int) -> None:
        """Drop the versions of `name` that ended at or before the last forget (they may hold the
        forgotten subject), and their values from the blocks that held them."""
        conn = self.conn
        hit = [
            b
            for (b,) in conn.execute(
                "SELECT DISTINCT block FROM _intervals WHERE projection = ? AND valid_to <= ? AND block IS NOT NULL",
                (name, floor),
            )
        ]
        self._delete("_intervals", "projection = ? AND valid_to <= ?", (name, floor))
        if not hit:
            return
        live: dict[int, set[int]] = {b: set() for b in hit}
        marks = ", ".join("?" * len(hit)) if len(hit) <= 500 else None
        rows = (
            conn.execute(
                f"SELECT block, slot FROM _intervals WHERE projection = ? AND block IN ({marks})", (name, *hit)
            )
            if marks
            else conn.execute("SELECT block, slot FROM _intervals WHERE projection = ? AND block IS NOT NULL", (name,))
        )
        for block, slot in rows:
            if block in live:
                live[block].add(slot)
        blocks = Blocks(conn)
        blocks.load(hit)
        for block, slots in live.items():
            old = (block, name, conn.execute("SELECT data FROM _blocks WHERE id = ?", (block,)).fetchone()[0])
            self.digest.rows(self.key, "_blocks", [old], -1)
            if not slots:
                conn.execute("DELETE FROM _blocks WHERE id = ?", (block,))
                continue
            new = self._block(block, name, [v if i in slots else b"" for i, v in enumerate(blocks.values[block])])
            conn.execute("UPDATE _blocks SET data = ? WHERE id = ?", (new[2], block))
            self.digest.rows(self.key, "_blocks", [new])


# ---- reading ---------------------------------------------------------------------------


def rows_at(
    blocks: Blocks,
    name: str,
    seq: int,
    field: str | None = None,
    k1: str | None = None,
    k2: str | None = None,
    facet: str | None = None,
) -> list[tuple[Any, ...]]:
    """The versions of projection `name` valid at `seq`: all of them, or one field's, one key's
    (and its inner dict's), or those of one facet (values read through `blocks`)."""
    return rows_during(blocks, name, seq, seq, field, k1, k2, facet)


def rows_during(
    blocks: Blocks,
    name: str,
    lo: int,
    hi: int,
    field: str | None = None,
    k1: str | None = None,
    k2: str | None = None,
    facet: str | None = None,
) -> list[tuple[Any, ...]]:
    """`rows_at` for every seq from `lo` to `hi` at once: the versions valid at any of them (a
    reader asking about several close seqs selects once, then keeps those `valid(row, seq)`)."""
    conn = blocks.conn
    if facet is not None:
        return resolved(
            blocks,
            conn.execute(
                f"SELECT {_COLS} FROM _intervals INDEXED BY _intervals_facet WHERE projection = ? "
                f"AND facet = ? AND valid_to > ? AND valid_from <= ?",
                (name, facet, lo, hi),
            ).fetchall(),
        )
    if field is not None and k1 is not None:
        where = "projection = ? AND field = ? AND k1 = ?"
        params: list[Any] = [name, field, k1]
        if k2 is not None:
            where += " AND k2 IN (?, ?)"
            params += [k2, NO_KEY]
        # by key (the primary key's prefix); `+` keeps the planner off the seq indexes
        return resolved(
            blocks,
            conn.execute(
                f"SELECT {_COLS} FROM _intervals WHERE {where} AND +valid_from <= ? AND +valid_to > ?",
                (*params, hi, lo),
            ).fetchall(),
        )
    last = conn.execute(_LAST, (name,)).fetchone()[0] or 0
    rows = conn.execute(_ALIVE[2 * hi > last], (name, lo, hi)).fetchall()
    return resolved(blocks, [r for r in rows if r[0] == field] if field is not None else rows)


def valid(row: tuple[Any, ...], seq: int) -> bool:
    """A row as `rows_during` returns it holds at `seq`."""
    return bool(row[6] <= seq < row[7])


def state_at(blocks: Blocks, name: str, seq: int) -> Any:
    """Projection `name` as of `seq`, built from the versions valid then: only where each goes
    and its value read, in one pass (a whole projection is up to hundreds of thousands of them)."""
    conn = blocks.conn
    last = conn.execute(_LAST, (name,)).fetchone()[0] or 0
    rows = conn.execute(_PLACED[2 * seq > last], (name, seq, seq)).fetchall()
    blocks.load({r[5] for r in rows})
    values = blocks.values
    return state_from_rows(
        name,
        [
            (field, k1, k2, o1, o2, None if block is None else values[block][slot])
            for field, k1, k2, o1, o2, block, slot in rows
        ],
    )


def changed(blocks: Blocks, name: str, after: int, head: int) -> Iterator[list[tuple[Any, ...]]]:
    """The versions of `name` with a value that began after `after` or ended after it (closed
    since), as of `head`, in batches: (field, k1, k2, valid_from, valid_to, value), `valid_to` None
    for a version still current at `head`. What a copy of the versions kept up to `after` needs to
    reach `head` (a version that began after `after` ends after it too: one walk of the
    (projection, valid_to, valid_from) index from `after`, not a scan of the projection)."""
    cursor = blocks.conn.execute(
        f"SELECT {_COLS} FROM _intervals INDEXED BY _intervals_to WHERE projection = ? AND valid_to > ? "
        f"AND valid_from <= ? AND block IS NOT NULL AND (valid_from > ? OR valid_to <> {OPEN})",
        (name, after, head, after),
    )
    while stored := cursor.fetchmany(FLUSH_ROWS):
        yield [
            (field, k1, k2, valid_from, None if valid_to > head else valid_to, value)
            for field, k1, k2, _o1, _o2, value, valid_from, valid_to in resolved(blocks, stored)
        ]


def between(
    blocks: Blocks, name: str, field: str, lo: int, hi: int
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The items of one field of `name` whose version at seq `lo` is not their version at `hi`
    (`lo` <= `hi`), as two lists of rows (`rows_during`'s shape): the versions valid at `lo` that
    ended by `hi`, and those valid at `hi` that began after `lo`. No version overlaps another of
    its item, so an item missing from both holds the same version at both seqs. Each list is one
    walk of a seq index over (`lo`, `hi`]: what a diff reads grows with what changed between the
    two seqs, not with the projection. Inner dicts (no value) are left out."""
    conn = blocks.conn
    ended = conn.execute(
        f"SELECT {_COLS} FROM _intervals INDEXED BY _intervals_to WHERE projection = ? AND valid_to > ? "
        "AND valid_to <= ? AND valid_from <= ? AND field = ? AND block IS NOT NULL",
        (name, lo, hi, lo, field),
    ).fetchall()
    begun = conn.execute(
        f"SELECT {_COLS} FROM _intervals INDEXED BY _intervals_from WHERE projection = ? AND valid_from > ? "
        "AND valid_from <= ? AND valid_to > ? AND field = ? AND block IS NOT NULL",
        (name, lo, hi, hi, field),
    ).fetchall()
    return resolved(blocks, ended), resolved(blocks, begun)


def holding(blocks: Blocks, name: str, field: str, parts: Iterable[str], lo: int, hi: int) -> list[tuple[Any, ...]]:
    """The versions of a depth-2 `field` whose inner key (k2) is one of `parts`, under any outer key,
    valid at any seq from `lo` to `hi`: an item known by its id whatever the host it is filed under
    (a trajectory). One walk of the field's stretch of the table's key, reading only the rows found."""
    wanted = sorted(set(parts))
    rows = []
    for at in range(0, len(wanted), 500):
        chunk = wanted[at : at + 500]
        rows += blocks.conn.execute(
            f"SELECT {_COLS} FROM _intervals WHERE projection = ? AND field = ? "
            f"AND k2 IN ({', '.join('?' * len(chunk))}) AND +valid_from <= ? AND +valid_to > ?",
            (name, field, *chunk, hi, lo),
        ).fetchall()
    return resolved(blocks, rows)


def raw_from_rows(layout: dict[str, int], rows: Iterable[tuple[Any, ...]]) -> dict[str, Any]:
    """The JSON shape of a state (as `encode` writes it) from interval rows, in the fold's order:
    by position (o1, o2), which puts an inner dict (o2 = 0) before its items (o2 = the seq-based
    position of their insertion), and each dict's keys in their insertion order."""
    raw: dict[str, Any] = {f: {} for f, depth in layout.items() if depth > 0}
    loads = orjson.loads
    for field, k1, k2, _o1, _o2, value, *_seqs in sorted(rows, key=_POSITION):  # seqs: as `rows_during` reads them
        depth = layout[field]
        if depth == 1:
            raw[field][k1] = loads(value)
        elif depth == 0:
            raw[field] = loads(value)
        elif k2 == NO_KEY:
            if k1 not in raw[field]:
                raw[field][k1] = {}
        else:
            inner = raw[field].get(k1)
            if inner is None:
                inner = raw[field][k1] = {}
            inner[k2] = loads(value)
    return raw


_POSITION = itemgetter(3, 4)


def state_from_rows(name: str, rows: Iterable[tuple[Any, ...]]) -> Any:
    mod = INDEXED[name]
    return mod.decode(raw_from_rows(mod.LAYOUT, rows))


def history(blocks: Blocks, name: str, field: str, k1: str, k2: str = NO_KEY) -> list[tuple[int, int | None, Any]]:
    """Every version of one item, oldest first: (valid_from, valid_to or None while current, item JSON)."""
    rows = blocks.conn.execute(
        "SELECT valid_from, valid_to, block, slot FROM _intervals WHERE projection = ? AND field = ? "
        "AND k1 = ? AND k2 = ? ORDER BY valid_from",
        (name, field, k1, k2),
    ).fetchall()
    blocks.load(r[2] for r in rows)
    return [(f, None if t == OPEN else t, _decode(blocks.value(b, s) or b"null")) for f, t, b, s in rows]
