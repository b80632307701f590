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
the rows to the projection's own `decode`. Every row carries the memory directory's
seal (`mac`, over all its columns) and is served only when it holds (`sealed`).
"""
from __future__ import annotations

import hashlib
import sqlite3
import zlib
from collections.abc import Iterable
from typing import Any

import orjson

from memledger.ledger.events import RecordedEvent
from memledger.projections.seal import Seal
from memledger.projections.state import module

#: the projections filed as intervals (short-term memory lives only while its run does: it keeps
#: periodic snapshots, small because finished runs leave it)
INDEXED: tuple[str, ...] = ("lessons", "knowledge", "sessions", "selectors", "trajectories", "runs", "step_memories")
OPEN = 1 << 62  # valid_to of a version still current
NO_KEY = "\x00"  # k1 / k2 when a level has no key (events cannot hold NUL)
PER_EVENT = 1 << 16  # positions: seq * PER_EVENT + the order of insertion within that event
FLUSH_ROWS = 20_000

DDL = (
    "CREATE TABLE IF NOT EXISTS _intervals (projection TEXT NOT NULL, field TEXT NOT NULL, k1 TEXT NOT NULL, "
    "k2 TEXT NOT NULL, valid_from INTEGER NOT NULL, valid_to INTEGER NOT NULL, o1 INTEGER NOT NULL, "
    "o2 INTEGER NOT NULL, facet TEXT, value BLOB, mac TEXT NOT NULL, PRIMARY KEY (projection, field, k1, k2, valid_from))",
    "CREATE INDEX IF NOT EXISTS _intervals_from ON _intervals (projection, valid_from)",
    "CREATE INDEX IF NOT EXISTS _intervals_to ON _intervals (projection, valid_to)",
    "CREATE INDEX IF NOT EXISTS _intervals_facet ON _intervals (projection, facet, valid_to) WHERE facet IS NOT NULL",
)
_INSERT = ("INSERT OR REPLACE INTO _intervals (projection, field, k1, k2, valid_from, valid_to, o1, o2, facet, value, "
           "mac) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
_OPEN_ROW = ("SELECT projection, field, k1, k2, valid_from, valid_to, o1, o2, facet, value FROM _intervals "
             f"WHERE projection = ? AND field = ? AND k1 = ? AND k2 = ? AND valid_to = {OPEN}")
_CLOSE = "UPDATE _intervals SET valid_to = ?, mac = ? WHERE projection = ? AND field = ? AND k1 = ? AND k2 = ? AND valid_from = ?"
#: what a read returns: the six columns a state is built from, then the projection and the rest the seal covers
_COLS = "field, k1, k2, o1, o2, value, projection, valid_from, valid_to, facet, mac"


def row_mac(seal: Seal, row: Any) -> str:
    """The seal of one version: (projection, field, k1, k2, valid_from, valid_to, o1, o2, facet, value)."""
    *head, value = row
    return seal.mac(*head, hashlib.sha256(value).hexdigest() if value is not None else None)


def sealed(seal: Seal, rows: Iterable[tuple[Any, ...]]) -> bool:
    """Every row read (in `_COLS` order) carries its seal."""
    for field, k1, k2, o1, o2, value, projection, valid_from, valid_to, facet, mac in rows:
        if not seal.holds(mac, *(projection, field, k1, k2, valid_from, valid_to, o1, o2, facet),
                          hashlib.sha256(value).hexdigest() if value is not None else None):
            return False
    return True

Path_ = tuple[str, ...]


def _encode(item: Any) -> bytes:
    """An item version as stored: its canonical JSON, zlib'd (versions are many; JSON packs ~2x)."""
    return zlib.compress(orjson.dumps(item, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS), 1)


def _decode(blob: bytes) -> Any:
    return orjson.loads(zlib.decompress(blob))


def _capture(state: Any, layout: dict[str, int], path: Path_, leaves: dict[Path_, Any],
             containers: set[Path_]) -> None:
    """The leaves (lists copied: some folds edit them in place) and inner dicts under `path`."""
    field = path[0]
    depth = layout[field]
    value = getattr(state, field)
    if depth == 0:
        leaves[(field,)] = value
        return
    if depth == 1:
        if len(path) == 1:
            for k, v in value.items():
                leaves[(field, k)] = list(v) if isinstance(v, list) else v
        elif path[1] in value:
            v = value[path[1]]
            leaves[(field, path[1])] = list(v) if isinstance(v, list) else v
        return
    outer = value.items() if len(path) == 1 else ((path[1], value[path[1]]),) if path[1] in value else ()
    for k1, inner in outer:
        containers.add((field, k1))
        if len(path) == 3:
            if path[2] in inner:
                leaves[(field, k1, path[2])] = inner[path[2]]
        else:
            for k2, v in inner.items():
                leaves[(field, k1, k2)] = v


class Tracker:
    """Records the interval rows of the indexed projections while they are folded (see module doc)."""

    def __init__(self, conn: sqlite3.Connection, names: Iterable[str], seal: Seal, floor: int = 0):
        self.conn = conn
        self.seal = seal
        self.names = [n for n in names if n in INDEXED]
        self.mods = {n: module(n) for n in self.names}
        self.floor = floor  # versions closed at or before the last forget are not kept
        self.pos: dict[tuple[str, Path_], tuple[int, int]] = {}  # live item / inner dict -> (o1, o2)
        self.rows: list[list[Any]] = []
        self.open_rows: dict[tuple[str, Path_], int] = {}  # versions opened since the last flush -> index
        self.closes: list[tuple[Any, ...]] = []

    def reset(self, name: str) -> None:
        """Forget every stored version of a projection (it is being rebuilt)."""
        self.conn.execute("DELETE FROM _intervals WHERE projection = ?", (name,))

    def before(self, name: str, state: Any, ev: RecordedEvent) -> tuple[list[Path_], dict[Path_, Any], set[Path_]]:
        mod = self.mods[name]
        paths = mod.touched(state, ev)
        if paths is None:
            paths = [(f,) for f in mod.LAYOUT]
        leaves: dict[Path_, Any] = {}
        containers: set[Path_] = set()
        for p in paths:
            _capture(state, mod.LAYOUT, p, leaves, containers)
        return paths, leaves, containers

    def after(self, name: str, state: Any, seq: int, captured: tuple[list[Path_], dict[Path_, Any], set[Path_]]) -> None:
        paths, old, old_containers = captured
        mod = self.mods[name]
        new: dict[Path_, Any] = {}
        new_containers: set[Path_] = set()
        for p in paths:
            _capture(state, mod.LAYOUT, p, new, new_containers)
        counter = 0
        for c in old_containers - new_containers:
            self._close(name, c, seq)
        created = new_containers - old_containers
        for c in sorted(created, key=self._order_hint(state, mod.LAYOUT)) if len(created) > 1 else created:
            counter += 1
            self._open(name, c, seq, (seq * PER_EVENT + counter, 0), None, None)
        for p, v in old.items():
            if p not in new:
                self._close(name, p, seq)
        facet = getattr(mod, "facet", None)
        for p, v in new.items():
            was = old.get(p, old)
            if was is v or (was is not old and was == v):
                continue
            if was is old:  # a new key: it goes to the end of its dict
                counter += 1
                at = seq * PER_EVENT + counter
                pos = (at, 0) if len(p) < 3 else (self._position(name, p[:2])[0], at)
            else:
                pos = self._position(name, p)
                self._close(name, p, seq)
            self._open(name, p, seq, pos, _encode(v), facet(p[0], v) if facet is not None else None)

    @staticmethod
    def _order_hint(state: Any, layout: dict[str, int]) -> Any:
        """Inner dicts created by one event, in their dict's order."""
        def key(c: Path_) -> tuple[str, int]:
            return c[0], list(getattr(state, c[0])).index(c[1])
        return key

    def _position(self, name: str, p: Path_) -> tuple[int, int]:
        pos = self.pos.get((name, p))
        if pos is None:  # opened by an earlier catch-up
            k1, k2 = (p[1] if len(p) > 1 else NO_KEY), (p[2] if len(p) > 2 else NO_KEY)
            row = self.conn.execute(
                f"SELECT o1, o2 FROM _intervals WHERE projection = ? AND field = ? AND k1 = ? AND k2 = ? "
                f"AND valid_to = {OPEN}", (name, p[0], k1, k2)).fetchone()
            pos = (row[0], row[1]) if row is not None else (0, 0)
        return pos

    def _open(self, name: str, p: Path_, seq: int, pos: tuple[int, int], value: bytes | None,
              facet: str | None) -> None:
        self.pos[(name, p)] = pos
        self.open_rows[(name, p)] = len(self.rows)
        self.rows.append([name, p[0], p[1] if len(p) > 1 else NO_KEY, p[2] if len(p) > 2 else NO_KEY,
                          seq, OPEN, pos[0], pos[1], facet, value])

    def _close(self, name: str, p: Path_, seq: int) -> None:
        self.pos.pop((name, p), None)
        i = self.open_rows.pop((name, p), None)
        if i is not None:
            self.rows[i][5] = seq
        else:
            self.closes.append((seq, name, p[0], p[1] if len(p) > 1 else NO_KEY, p[2] if len(p) > 2 else NO_KEY))

    def pending(self) -> int:
        return len(self.rows) + len(self.closes)

    def flush(self) -> None:
        """Write what was recorded (call inside the module's write transaction). Rows are
        idempotent: folding the same events again writes the same rows."""
        floor, seal, closed = self.floor, self.seal, []
        for seq, *key in self.closes:  # before the inserts: they must not reach the versions opened since
            row = self.conn.execute(_OPEN_ROW, key).fetchone()
            if row is not None:
                row = (*row[:5], seq, *row[6:])
                closed.append((seq, row_mac(seal, row), *key, row[4]))
        self.conn.executemany(_CLOSE, closed)
        self.conn.executemany(_INSERT, [(*r, row_mac(seal, r)) for r in self.rows if r[5] > floor])
        if floor:
            self.conn.executemany("DELETE FROM _intervals WHERE projection = ? AND valid_to <= ?",
                                  [(n, floor) for n in self.names])
        self.rows, self.open_rows, self.closes = [], {}, []


# ---- reading ---------------------------------------------------------------------------

def rows_at(conn: sqlite3.Connection, name: str, seq: int, head: int, field: str | None = None,
            k1: str | None = None, k2: str | None = None, facet: str | None = None) -> list[tuple[Any, ...]]:
    """The versions of projection `name` valid at `seq`: all of them, or one field's, one key's
    (and its inner dict's), or those of one facet."""
    alive = "valid_from <= ? AND valid_to > ?"
    if facet is not None:
        return conn.execute(f"SELECT {_COLS} FROM _intervals INDEXED BY _intervals_facet WHERE projection = ? "
                            f"AND facet = ? AND valid_to > ? AND valid_from <= ?", (name, facet, seq, seq)).fetchall()
    if field is not None and k1 is not None:
        where = "projection = ? AND field = ? AND k1 = ?"
        params: list[Any] = [name, field, k1]
        if k2 is not None:
            where += " AND k2 IN (?, ?)"
            params += [k2, NO_KEY]
        # by key (the primary key's prefix); `+` keeps the planner off the seq indexes
        return conn.execute(f"SELECT {_COLS} FROM _intervals WHERE {where} AND +valid_from <= ? AND +valid_to > ?",
                            (*params, seq, seq)).fetchall()
    # scan from whichever end of the log is nearer `seq`
    index = "_intervals_from" if seq * 2 <= head else "_intervals_to"
    rows = conn.execute(f"SELECT {_COLS} FROM _intervals INDEXED BY {index} WHERE projection = ? AND {alive}",
                        (name, seq, seq)).fetchall()
    return [r for r in rows if r[0] == field] if field is not None else rows


def raw_from_rows(layout: dict[str, int], rows: Iterable[tuple[Any, ...]]) -> dict[str, Any]:
    """The JSON shape of a state (as `encode` writes it) from interval rows, in the fold's order."""
    raw: dict[str, Any] = {f: {} for f, depth in layout.items() if depth > 0}
    ordered = sorted(rows, key=lambda r: (r[3], r[2] != NO_KEY, r[4]))
    for field, k1, k2, _o1, _o2, value, *_sealed in ordered:
        depth = layout[field]
        if depth == 0:
            raw[field] = _decode(value)
        elif depth == 1:
            raw[field][k1] = _decode(value)
        elif k2 == NO_KEY:
            raw[field][k1] = {}
    for field, k1, k2, _o1, _o2, value, *_sealed in sorted((r for r in rows if layout[r[0]] == 2 and r[2] != NO_KEY),
                                                 key=lambda r: r[4]):
        raw[field].setdefault(k1, {})[k2] = _decode(value)
    return raw


def state_from_rows(name: str, rows: Iterable[tuple[Any, ...]]) -> Any:
    mod = module(name)
    return mod.decode(raw_from_rows(mod.LAYOUT, rows))


def history(conn: sqlite3.Connection, name: str, field: str, k1: str, k2: str = NO_KEY) -> list[tuple[int, int | None, Any]]:
    """Every version of one item, oldest first: (valid_from, valid_to or None while current, item JSON)."""
    rows = conn.execute("SELECT valid_from, valid_to, value FROM _intervals WHERE projection = ? AND field = ? "
                        "AND k1 = ? AND k2 = ? ORDER BY valid_from", (name, field, k1, k2)).fetchall()
    return [(f, None if t == OPEN else t, _decode(v)) for f, t, v in rows]
