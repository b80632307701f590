"""Validity intervals: every version of every memory item, with the seq range in which it held.

Memory as of a seq is then a lookup (as Datomic and XTDB answer "as of"), not a
fold: the rows whose `valid_from <= seq < valid_to`. A version is opened by the
event that made it and closed by the event that replaced or removed it.

A projection takes part by declaring `LAYOUT` (its state's fields: depth 0 a
value, 1 key -> item, 2 key -> key -> item) and `touched(state, event)`: the
paths an event may change, computed before it is folded (None: anything, e.g. a
forget). `Tracker` compares those paths before and after each event and records
what changed. Items keep the position they had in their dict (`o1`, `o2`: the
seq at which their key was inserted), so a state rebuilt from the rows iterates
in the fold's order; a depth-2 field also records its inner dicts
(`k2` = NO_KEY, no value), so empty ones come back too. `state_from_rows` hands
the rows to the projection's own `decode`. The values (canonical JSON) are kept in
`_blocks`, compressed BLOCK_VALUES at a time; a row names its block and slot. Every
block carries the memory directory's seal (`mac`, over its id, projection and bytes),
checked when it is read, and so does every row (over all its columns, its block and slot
among them: closing a version re-seals its row without reading its value, once the seal it had
holds); a row is served only when both hold (`sealed`). Seals prove each row, not that none was
deleted: so the versions valid at every seq are counted (counts.py) for the whole projection, for
each item or inner dict (field and k1) and for each facet, and what a question selects is served
only when it is as many versions as its group counts there (`Selection`, `state_at`).
"""
from __future__ import annotations

import hmac
import sqlite3
from collections.abc import Iterable
from operator import itemgetter
from typing import Any

import orjson

from memtape.ledger.events import RecordedEvent
from memtape.projections.cache import compression, counts, mentions
from memtape.projections.cache.counts import WHOLE, Counter, Counts, Forged, count_at
from memtape.projections.cache.mentions import Mentions
from memtape.projections.cache.seal import Seal
from memtape.projections.folds import FACETS, INDEXED

#: the projections filed as intervals (the others are small: periodic snapshots and a short fold)
#: the fields whose items (or inner dicts) are read by key (`IndexedMemory`): their versions are
#: counted per key too, so one item is checked without reading its projection whole (the others
#: only in their projection's whole count and their facet's: a run's steps in step memories and
#: short-term memory are asked with the rest, and counting each run's would cost projections.db
#: ~0.03x of the ledger's size at 1,000,000 events)
KEYED: dict[str, frozenset[str]] = {"lessons": frozenset({"lessons"}), "knowledge": frozenset({"current"}),
                                    "selectors": frozenset({"by_domain"}), "trajectories": frozenset({"by_domain"}),
                                    "runs": frozenset({"runs"}), "sessions": frozenset({"by_domain"})}
OPEN = counts.OPEN  # valid_to of a version still current
NO_KEY = "\x00"  # k1 / k2 when a level has no key (events cannot hold NUL)
PER_EVENT = 1 << 16  # positions: seq * PER_EVENT + the order of insertion within that event
FLUSH_ROWS = 20_000
#: values per block: versions of one projection written together are compressed together (small
#: JSON items share their keys and most of their text: ~10x, against ~2x one by one)
BLOCK_VALUES = 64
_SEP = b"\n"  # between the values of a block (orjson never writes a raw newline)

DDL = (
    *mentions.DDL,
    *counts.DDL,
    "CREATE TABLE IF NOT EXISTS _intervals (projection TEXT NOT NULL, field TEXT NOT NULL, k1 TEXT NOT NULL, "
    "k2 TEXT NOT NULL, valid_from INTEGER NOT NULL, valid_to INTEGER NOT NULL, o1 INTEGER NOT NULL, "
    "o2 INTEGER NOT NULL, facet TEXT, block INTEGER, slot INTEGER, mac BLOB NOT NULL, "
    "PRIMARY KEY (projection, field, k1, k2, valid_from))",
    "CREATE TABLE IF NOT EXISTS _blocks (id INTEGER PRIMARY KEY, projection TEXT NOT NULL, data BLOB NOT NULL, "
    "mac BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS _intervals_to ON _intervals (projection, valid_to, valid_from)",
    "CREATE INDEX IF NOT EXISTS _intervals_facet ON _intervals (projection, facet, valid_to) WHERE facet IS NOT NULL",
)
TABLES = ("_intervals", "_blocks", *counts.TABLES, *mentions.TABLES)
_INSERT = ("INSERT OR REPLACE INTO _intervals (projection, field, k1, k2, valid_from, valid_to, o1, o2, facet, block, "
           "slot, mac) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
_OPEN_ROW = ("SELECT projection, field, k1, k2, valid_from, o1, o2, facet, block, slot, mac FROM _intervals "
             f"WHERE projection = ? AND field = ? AND k1 = ? AND k2 = ? AND valid_to = {OPEN}")
_CLOSE = "UPDATE _intervals SET valid_to = ?, mac = ? WHERE projection = ? AND field = ? AND k1 = ? AND k2 = ? AND valid_from = ?"
#: what a read selects: the six columns a state is built from (the value as block and slot), then
#: the projection and the rest the seal covers
_COLS = "field, k1, k2, o1, o2, block, slot, projection, valid_from, valid_to, facet, mac"
#: every version of a projection valid at a seq: the index walked from `valid_to > seq` to the end,
#: `valid_from` checked in the index itself, and only those versions read from the table
_ALIVE = (f"SELECT {_COLS} FROM _intervals INDEXED BY _intervals_to WHERE projection = ? AND valid_to > ? "
          "AND valid_from <= ?")


def row_tag(seal: Seal, projection: str, field: str, k1: str, k2: str, valid_from: int, valid_to: int, o1: int,
            o2: int, facet: str | None, block: int | None, slot: int | None) -> bytes:
    """The seal of one version: every column (its value is its block's and slot's: the block's
    own seal covers the bytes)."""
    return seal.tag(f"{projection}\x1f{field}\x1f{k1}\x1f{k2}\x1f{valid_from}\x1f{valid_to}\x1f{o1}\x1f{o2}\x1f"
                    f"{'' if facet is None else facet}\x1f{'-' if facet is None else '+'}\x1f{block}\x1f{slot}".encode())


def block_tag(seal: Seal, block: int, projection: str, data: bytes) -> bytes:
    """The seal of one block of values: its id, its projection and its bytes as stored."""
    return seal.tag(f"block\x1f{block}\x1f{projection}\x1e".encode() + data)


def holds(seal: Seal, mac: bytes | None, projection: str, field: str, k1: str, k2: str, valid_from: int,
          valid_to: int, o1: int, o2: int, facet: str | None, block: int | None, slot: int | None,
          value: bytes | None) -> bool:
    """One version may be served: its seal holds, and the value it names came from a block that
    carries its own (`Blocks` serves an empty value for any other)."""
    return mac is not None and (block is None or bool(value)) and hmac.compare_digest(
        bytes(mac), row_tag(seal, projection, field, k1, k2, valid_from, valid_to, o1, o2, facet, block, slot))


def sealed(seal: Seal, rows: Iterable[tuple[Any, ...]]) -> bool:
    """Every row read (as `rows_at` returns them) `holds`."""
    return all(holds(seal, mac, projection, field, k1, k2, valid_from, valid_to, o1, o2, facet, block, slot, value)
               for field, k1, k2, o1, o2, value, projection, valid_from, valid_to, facet, mac, block, slot in rows)


class Blocks:
    """The values of stored blocks, each checked against its seal and decompressed once (a
    missing, unreadable or unsealed block holds nothing: the versions that point into it then
    fail `sealed`). A reader that asks many questions keeps one."""

    def __init__(self, conn: sqlite3.Connection, seal: Seal):
        self.conn = conn
        self.seal = seal
        self.values: dict[int, list[bytes]] = {}
        self.unpack = compression.unpacker()  # one context for every block (not per call)

    def load(self, ids: Iterable[int]) -> None:
        wanted = sorted({i for i in ids if i is not None and i not in self.values})
        same, seal = hmac.compare_digest, self.seal
        for at in range(0, len(wanted), 500):
            chunk = wanted[at:at + 500]
            for bid, projection, data, mac in self.conn.execute(
                    f"SELECT id, projection, data, mac FROM _blocks WHERE id IN ({', '.join('?' * len(chunk))})", chunk):
                try:
                    if not same(bytes(mac), block_tag(seal, bid, projection, data)):
                        raise ValueError(bid)
                    self.values[bid] = self.unpack(data).split(_SEP)
                except compression.ERRORS:  # ValueError among them: an unsealed block
                    self.values[bid] = []
            for bid in chunk:
                self.values.setdefault(bid, [])

    def value(self, block: int | None, slot: int | None) -> bytes | None:
        if block is None:
            return None
        values = self.values.get(block)
        if values is None:
            self.load((block,))
            values = self.values[block]
        return values[slot] if slot is not None and 0 <= slot < len(values) else b""


def resolved(blocks: Blocks, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows as selected (`_COLS`) with each value read from its block: (field, k1, k2, o1, o2,
    value, projection, valid_from, valid_to, facet, mac, block, slot)."""
    blocks.load(r[5] for r in rows)
    value = blocks.value
    return [(f, k1, k2, o1, o2, value(b, s), *rest, b, s) for f, k1, k2, o1, o2, b, s, *rest in rows]

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
    """Records the interval rows of the indexed projections while they are folded (see module doc)."""

    def __init__(self, conn: sqlite3.Connection, names: Iterable[str], seal: Seal, floor: int = 0,
                 fresh: Iterable[str] = ()):
        self.conn = conn
        self.seal = seal
        self.names = [n for n in names if n in INDEXED]
        self.mods = {n: INDEXED[n] for n in self.names}
        self.floor = floor  # versions closed at or before the last forget are not kept
        self.counter = Counter(conn, seal, fresh)  # the projections in `fresh` are folded from seq 1
        self.groups: dict[tuple[str | None, ...], bytes] = {}  # a question (see `group_of`) -> its group
        self.upto = 0  # the last seq folded: the counts of a flush reach it
        #: per projection: its `touched`, its LAYOUT, the paths of every field, its `facet`
        self.specs: dict[str, tuple[Any, dict[str, int], list[Path_], Any]] = {
            n: (m.touched, m.LAYOUT, [(f,) for f in m.LAYOUT], FACETS.get(n))
                      for n, m in self.mods.items()}
        #: per projection, live item / inner dict -> (o1, o2)
        self.pos: dict[str, dict[Path_, tuple[int, int]]] = {n: {} for n in self.names}
        self.rows: list[list[Any]] = []
        #: per projection, versions opened since the last flush -> their index in `rows`
        self.open_rows: dict[str, dict[Path_, int]] = {n: {} for n in self.names}
        self.closes: list[tuple[Any, ...]] = []
        self.mentions = Mentions(conn, seal, self.counter)  # filed with the versions, in the same transactions
        self.pack = compression.packer()  # one context for every block (not per call)

    def reset(self, name: str) -> None:
        """Forget every stored version of a projection (it is being rebuilt)."""
        self.conn.execute("DELETE FROM _intervals WHERE projection = ?", (name,))
        self.conn.execute("DELETE FROM _blocks WHERE projection = ?", (name,))
        self.counter.reset(name)

    def fold(self, name: str, apply: Any, state: Any, ev: RecordedEvent, policy: Any) -> Any:
        """`apply(state, ev, policy)`, recording the versions it opens and closes: the paths
        `touched` names are captured before and after, and only what changed is filed."""
        touched, layout, every, facet = self.specs[name]
        self.upto = ev.seq
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

    def _fold_item(self, name: str, apply: Any, state: Any, ev: RecordedEvent, policy: Any, p: Path_,
                   facet: Any) -> Any:
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
            pos = (row[5], row[6]) if row is not None else (0, 0)
        return pos

    def _current(self, key: tuple[str, str, str, str]) -> tuple[Any, ...] | None:
        """The current version of an item (projection, field, k1, k2) as `_OPEN_ROW` selects it, once
        it holds its seal: a catch-up builds on it (seals it again as closed, or gives its position
        to the version that replaces it), so a hand edit must not pass as this memory's own."""
        row = self.conn.execute(_OPEN_ROW, key).fetchone()
        if row is None:
            return None
        projection, field, k1, k2, valid_from, o1, o2, facet, block, slot, mac = row
        if mac is None or not hmac.compare_digest(
                bytes(mac), row_tag(self.seal, projection, field, k1, k2, valid_from, OPEN, o1, o2, facet, block, slot)):
            raise Forged(f"a current version of {projection!r} is not one this memory sealed")
        return row  # type: ignore[no-any-return]

    def _open(self, name: str, p: Path_, seq: int, pos: tuple[int, int], value: bytes | None,
              facet: str | None) -> None:
        self.pos[name][p] = pos
        self.open_rows[name][p] = len(self.rows)
        self.rows.append([name, p[0], p[1] if len(p) > 1 else NO_KEY, p[2] if len(p) > 2 else NO_KEY,
                          seq, OPEN, pos[0], pos[1], facet, value])

    def _close(self, name: str, p: Path_, seq: int) -> None:
        self.pos[name].pop(p, None)
        i = self.open_rows[name].pop(p, None)
        if i is not None:
            self.rows[i][5] = seq
        else:
            self.closes.append((seq, name, p[0], p[1] if len(p) > 1 else NO_KEY, p[2] if len(p) > 2 else NO_KEY))

    def pending(self) -> int:
        return len(self.rows) + len(self.closes) + self.mentions.pending()

    def flush(self) -> None:
        """Write what was recorded (call inside the module's write transaction): the values in
        blocks of BLOCK_VALUES per projection, each version with its seal. Rows are idempotent:
        folding the same events again writes the same rows."""
        conn, floor, seal = self.conn, self.floor, self.seal
        closed = []
        count = self._count
        for seq, *key in self.closes:  # before the inserts: they must not reach the versions opened since
            row = self._current(tuple(key))
            if row is not None:
                projection, field, k1, k2, valid_from, o1, o2, facet, block, slot, _ = row
                closed.append((seq, row_tag(seal, projection, field, k1, k2, valid_from, seq, o1, o2, facet, block,
                                            slot), *key, valid_from))
                count(projection, field, k1, facet, seq, -1)
        conn.executemany(_CLOSE, closed)
        kept = [r for r in self.rows if r[5] > floor]
        for name, field, k1, _, valid_from, valid_to, _, _, facet, _ in kept:
            count(name, field, k1, facet, valid_from, 1)
            if valid_to != OPEN:
                count(name, field, k1, facet, valid_to, -1)
        next_id = (conn.execute("SELECT MAX(id) FROM _blocks").fetchone()[0] or 0) + 1
        packed: list[tuple[int, str, bytes, bytes]] = []
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
                _, field, k1, k2, valid_from, valid_to, o1, o2, facet = r[:9]
                out.append((name, field, k1, k2, valid_from, valid_to, o1, o2, facet, block, slot,
                            row_tag(seal, name, field, k1, k2, valid_from, valid_to, o1, o2, facet, block, slot)))
            if values:
                packed.append(self._block(next_id, name, values))
                next_id += 1
        conn.executemany("INSERT OR REPLACE INTO _blocks (id, projection, data, mac) VALUES (?, ?, ?, ?)", packed)
        conn.executemany(_INSERT, out)
        self.mentions.flush()
        self.counter.flush(max(self.upto, self.mentions.upto), [*self.names, mentions.COUNTED])
        if floor:
            for name in self.names:
                self._drop_before(name, floor)
        self.rows, self.closes = [], []
        for opened in self.open_rows.values():
            opened.clear()

    def _count(self, name: str, field: str, k1: str, facet: str | None, seq: int, delta: int) -> None:
        """A version of `name` begins (1) or ends (-1) at `seq`: counted in each group it is read by
        (its projection's, its key's, its facet's: `group_of`)."""
        add = self.counter.add
        for grp in {WHOLE, self._group(name, field, k1, None), self._group(name, None, None, facet)}:
            add(name, grp, seq, delta)

    def _group(self, name: str, field: str | None, k1: str | None, facet: str | None) -> bytes:
        question = (name, field, k1, facet)
        grp = self.groups.get(question)
        if grp is None:
            grp = self.groups[question] = group_of(self.seal, name, field, k1, facet)
        return grp

    def _block(self, block: int, name: str, values: list[bytes]) -> tuple[int, str, bytes, bytes]:
        """A block row as stored: its values compressed, and its seal."""
        data = self.pack(_SEP.join(values))
        return block, name, data, block_tag(self.seal, block, name, data)

    def _drop_before(self, name: str, floor: int) -> None:
        """Drop the versions of `name` that ended at or before the last forget (they may hold the
        forgotten subject), and their values from the blocks that held them."""
        conn = self.conn
        hit = [b for (b,) in conn.execute("SELECT DISTINCT block FROM _intervals WHERE projection = ? AND valid_to <= ? "
                                          "AND block IS NOT NULL", (name, floor))]
        conn.execute("DELETE FROM _intervals WHERE projection = ? AND valid_to <= ?", (name, floor))
        if not hit:
            return
        live: dict[int, set[int]] = {b: set() for b in hit}
        marks = ", ".join("?" * len(hit)) if len(hit) <= 500 else None
        rows = conn.execute(f"SELECT block, slot FROM _intervals WHERE projection = ? AND block IN ({marks})",
                            (name, *hit)) if marks else conn.execute(
            "SELECT block, slot FROM _intervals WHERE projection = ? AND block IS NOT NULL", (name,))
        for block, slot in rows:
            if block in live:
                live[block].add(slot)
        blocks = Blocks(conn, self.seal)  # an unsealed block is re-sealed empty: its versions still fail
        blocks.load(hit)
        for block, slots in live.items():
            if not slots:
                conn.execute("DELETE FROM _blocks WHERE id = ?", (block,))
                continue
            values = [v if i in slots else b"" for i, v in enumerate(blocks.values[block])]
            _, _, data, mac = self._block(block, name, values)
            conn.execute("UPDATE _blocks SET data = ?, mac = ? WHERE id = ?", (data, mac, block))


# ---- reading ---------------------------------------------------------------------------

def rows_at(blocks: Blocks, name: str, seq: int, field: str | None = None, k1: str | None = None,
            k2: str | None = None, facet: str | None = None) -> list[tuple[Any, ...]]:
    """The versions of projection `name` valid at `seq`: all of them, or one field's, one key's
    (and its inner dict's), or those of one facet (values read through `blocks`)."""
    return rows_during(blocks, name, seq, seq, field, k1, k2, facet)


def rows_during(blocks: Blocks, name: str, lo: int, hi: int, field: str | None = None, k1: str | None = None,
                k2: str | None = None, facet: str | None = None) -> list[tuple[Any, ...]]:
    """`rows_at` for every seq from `lo` to `hi` at once: the versions valid at any of them (a
    reader asking about several close seqs selects once, then keeps those `valid(row, seq)`)."""
    conn = blocks.conn
    if facet is not None:
        return resolved(blocks, conn.execute(
            f"SELECT {_COLS} FROM _intervals INDEXED BY _intervals_facet WHERE projection = ? "
            f"AND facet = ? AND valid_to > ? AND valid_from <= ?", (name, facet, lo, hi)).fetchall())
    if field is not None and k1 is not None:
        where = "projection = ? AND field = ? AND k1 = ?"
        params: list[Any] = [name, field, k1]
        if k2 is not None:
            where += " AND k2 IN (?, ?)"
            params += [k2, NO_KEY]
        # by key (the primary key's prefix); `+` keeps the planner off the seq indexes
        return resolved(blocks, conn.execute(
            f"SELECT {_COLS} FROM _intervals WHERE {where} AND +valid_from <= ? AND +valid_to > ?",
            (*params, hi, lo)).fetchall())
    rows = conn.execute(_ALIVE, (name, lo, hi)).fetchall()
    return resolved(blocks, [r for r in rows if r[0] == field] if field is not None else rows)


def group_of(seal: Seal, name: str, field: str | None, k1: str | None, facet: str | None) -> bytes:
    """The counted group a question reads: one facet's versions, one item's or inner dict's (of a
    KEYED field), else the whole projection (the rest is read with it and kept apart)."""
    if facet is not None:
        return counts.group(seal, "", facet)
    if field is not None and k1 is not None and field in KEYED.get(name, ()):
        return counts.group(seal, field, k1)
    return WHOLE


class Selection:
    """The versions one question (a whole projection, a field, an item or inner dict by key, a
    facet) selects for every seq from `lo` to `hi`, served at a seq only when they are as many as
    their group counts there — a version deleted from the file is not taken for one never made."""

    def __init__(self, blocks: Blocks, name: str, lo: int, hi: int, field: str | None = None,
                 k1: str | None = None, facet: str | None = None):
        grp = group_of(blocks.seal, name, field, k1, facet)
        #: what is kept of the rows of the group read (those of one field, or of one key of it)
        self.kept = (field, k1) if grp == WHOLE and field is not None else None
        self.rows = rows_during(blocks, name, lo, hi, None if self.kept else field, None if self.kept else k1, None,
                                facet)
        self.pairs = Counts(blocks.conn, blocks.seal).span(name, grp, lo, hi)

    def at(self, seq: int) -> list[tuple[Any, ...]] | None:
        """The versions valid at `seq`; None when they are not as many as counted."""
        found = [r for r in self.rows if valid(r, seq)]
        if self.pairs is None or count_at(self.pairs, seq) != len(found):
            return None
        if self.kept is None:
            return found
        field, k1 = self.kept
        return [r for r in found if r[0] == field and (k1 is None or r[1] == k1)]


def valid(row: tuple[Any, ...], seq: int) -> bool:
    """A row as `rows_during` returns it holds at `seq`."""
    return bool(row[7] <= seq < row[8])


def state_at(blocks: Blocks, name: str, seq: int) -> Any | None:
    """Projection `name` as of `seq`, built from the versions valid then; None when one of them
    does not hold its seal, or when they are fewer or more than its versions counted then (it is
    then not served). What `rows_at` and `sealed` do, in one pass over the rows as selected (a
    whole projection is up to hundreds of thousands of them)."""
    rows = blocks.conn.execute(_ALIVE, (name, seq, seq)).fetchall()
    if Counts(blocks.conn, blocks.seal).at(name, WHOLE, seq) != len(rows):
        return None
    blocks.load({r[5] for r in rows})
    value_of, seal = blocks.value, blocks.seal
    found = []
    for field, k1, k2, o1, o2, block, slot, projection, valid_from, valid_to, facet, mac in rows:
        value = value_of(block, slot)
        if not holds(seal, mac, projection, field, k1, k2, valid_from, valid_to, o1, o2, facet, block, slot, value):
            return None
        found.append((field, k1, k2, o1, o2, value))
    return state_from_rows(name, found)


def raw_from_rows(layout: dict[str, int], rows: Iterable[tuple[Any, ...]]) -> dict[str, Any]:
    """The JSON shape of a state (as `encode` writes it) from interval rows, in the fold's order:
    by position (o1, o2), which puts an inner dict (o2 = 0) before its items (o2 = the seq-based
    position of their insertion), and each dict's keys in their insertion order."""
    raw: dict[str, Any] = {f: {} for f, depth in layout.items() if depth > 0}
    loads = orjson.loads
    for field, k1, k2, _o1, _o2, value, *_sealed in sorted(rows, key=_POSITION):
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
    rows = blocks.conn.execute("SELECT valid_from, valid_to, block, slot FROM _intervals WHERE projection = ? AND field = ? "
                        "AND k1 = ? AND k2 = ? ORDER BY valid_from", (name, field, k1, k2)).fetchall()
    blocks.load(r[2] for r in rows)
    return [(f, None if t == OPEN else t, _decode(blocks.value(b, s) or b"null")) for f, t, b, s in rows]
