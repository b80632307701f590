"""Sealed counts: how many rows of a group a reader must find at every seq, so a deleted row is seen.

Each row projections.db serves carries its own seal, which proves the row but not that no row was
deleted beside it. So the rows are counted per group (a whole projection, one item's or inner
dict's versions, a facet's, the events that mention one item), and a reader compares the rows it selected with the count at the seq
it asks about. Per group the counts are a chain of sealed segments in `_alive`, each a list of
(seq, count from that seq on) pairs; the first starts at seq 0, and every one but the last names
the first seq of the next, so no segment can be dropped unseen. The groups themselves are listed
in `_groups` in key order, each naming the next (as DNSSEC's NSEC records do), so a group with no
chain is proven never to have had one — a group whose chain and rows were all deleted is not
taken for an empty one. Group keys are keyed hashes (`group`): an item's key (a forgotten domain)
is never kept in clear here.
"""
from __future__ import annotations

import bisect
import hmac
import itertools
import sqlite3
from collections.abc import Iterable

import orjson

from memtape.ledger.errors import LedgerError
from memtape.projections.cache import compression
from memtape.projections.cache.seal import Seal

OPEN = 1 << 62  # `next` of the last segment of a chain (as intervals' valid_to of a current version)
WHOLE = b""  # the group of every row of a projection: first in key order, so it can never be denied
#: pairs per segment before a new one is begun (a flush rewrites only a chain's last segment)
SEGMENT_PAIRS = 1024
GROUP_BYTES = 16

DDL = (
    "CREATE TABLE IF NOT EXISTS _alive (projection TEXT NOT NULL, grp BLOB NOT NULL, first INTEGER NOT NULL, "
    "next INTEGER NOT NULL, upto INTEGER NOT NULL, data BLOB NOT NULL, mac BLOB NOT NULL, "
    "PRIMARY KEY (projection, grp, first)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS _groups (projection TEXT NOT NULL, grp BLOB NOT NULL, next BLOB, mac BLOB NOT NULL, "
    "PRIMARY KEY (projection, grp)) WITHOUT ROWID",
)
TABLES = ("_alive", "_groups")


class Forged(LedgerError):
    """A stored row or count a catch-up would build on does not carry this memory's seal (it would
    be sealed again as if this memory had written it): projections.db is discarded and rebuilt."""


def group(seal: Seal, *parts: str) -> bytes:
    """The key of a group named by `parts` (a field and an item key, or a facet)."""
    return seal.tag("\x1f".join(("group", *parts)).encode("utf-8", "surrogatepass"))[:GROUP_BYTES]


def _segment_tag(seal: Seal, projection: str, grp: bytes, first: int, next_: int, upto: int, data: bytes) -> bytes:
    return seal.tag(f"alive\x1f{projection}\x1f{grp.hex()}\x1f{first}\x1f{next_}\x1f{upto}\x1e".encode() + data)


def _listing_tag(seal: Seal, projection: str, grp: bytes, next_: bytes | None) -> bytes:
    return seal.tag(f"group\x1f{projection}\x1f{grp.hex()}\x1f{'' if next_ is None else next_.hex()}\x1f"
                    f"{'-' if next_ is None else '+'}".encode())


def _listed_before(conn: sqlite3.Connection, seal: Seal, projection: str,
                   grp: bytes) -> tuple[bytes, bytes | None, bool] | None:
    """The group listed just before `grp` in key order, the one it names next, and whether it proves
    `grp` unlisted (its listing holds its seal and names a next after `grp`, or none); None when no
    group is listed before `grp`."""
    row = conn.execute("SELECT grp, next, mac FROM _groups WHERE projection = ? AND grp < ? "
                       "ORDER BY grp DESC LIMIT 1", (projection, grp)).fetchone()
    if row is None:
        return None
    prev, next_ = bytes(row[0]), None if row[1] is None else bytes(row[1])
    denies = hmac.compare_digest(bytes(row[2]), _listing_tag(seal, projection, prev, next_)) \
        and (next_ is None or next_ > grp)
    return prev, next_, denies


#: a segment's pairs are stored as JSON, compressed from this many bytes on (most groups change
#: count a few times: a compressed frame would be larger than their few numbers)
PACK_FROM = 64


def _pack(pairs: list[int], pack: compression.Transform) -> bytes:
    """Flattened (seq, count) pairs as stored: each number as its difference from the one two
    places before (small numbers, a third of the bytes)."""
    raw = orjson.dumps([v - pairs[i - 2] if i >= 2 else v for i, v in enumerate(pairs)])
    return pack(raw) if len(raw) >= PACK_FROM else raw


def _unpack(data: bytes, unpack: compression.Transform) -> list[int]:
    """The flattened pairs of a segment (JSON starts with '['; anything else is a compressed frame)."""
    steps = orjson.loads(data if data[:1] == b"[" else unpack(data))
    pairs = [0] * len(steps)
    pairs[0::2], pairs[1::2] = itertools.accumulate(steps[0::2]), itertools.accumulate(steps[1::2])
    return pairs


def count_at(pairs: list[int], seq: int) -> int:
    """The count at `seq` from flattened (seq, count) pairs, as `span` returns them."""
    at = bisect.bisect_right(pairs[0::2], seq) - 1
    return pairs[2 * at + 1] if at >= 0 else 0


class Counts:
    """Reads the counts of groups, checking each segment's seal and the chain's links."""

    def __init__(self, conn: sqlite3.Connection, seal: Seal):
        self.conn = conn
        self.seal = seal
        self.unpack = compression.unpacker()

    def span(self, projection: str, grp: bytes, lo: int, hi: int) -> list[int] | None:
        """The (seq, count) pairs, flattened, that give the group's count at every seq from `lo` to
        `hi`; None when a segment is missing or not sealed, or the group is listed with no chain."""
        rows = self.conn.execute("SELECT first, next, upto, data, mac FROM _alive WHERE projection = ? AND grp = ? "
                                 "AND first <= ? AND next > ? ORDER BY first", (projection, grp, hi, lo)).fetchall()
        if not rows:
            return [] if self.denied(projection, grp) else None
        if rows[0][0] > lo or rows[-1][1] <= hi:
            return None
        pairs: list[int] = []
        for i, (first, next_, upto, data, mac) in enumerate(rows):
            if i + 1 < len(rows) and rows[i + 1][0] != next_:
                return None
            if not hmac.compare_digest(bytes(mac), _segment_tag(self.seal, projection, grp, first, next_, upto,
                                                                bytes(data))):
                return None
            try:
                pairs += _unpack(data, self.unpack)
            except compression.ERRORS:  # orjson's JSONDecodeError among them (a ValueError)
                return None
        return pairs

    def at(self, projection: str, grp: bytes, seq: int) -> int | None:
        pairs = self.span(projection, grp, seq, seq)
        return None if pairs is None else count_at(pairs, seq)

    def denied(self, projection: str, grp: bytes) -> bool:
        """The group is proven absent: the group before it in key order is sealed naming a later next."""
        before = _listed_before(self.conn, self.seal, projection, grp)
        return before is not None and before[2]


class Counter:
    """Collects the changes in the counts of the groups a catch-up touches; `flush` files them."""

    def __init__(self, conn: sqlite3.Connection, seal: Seal, fresh: Iterable[str] = ()):
        self.conn = conn
        self.seal = seal
        self.fresh = set(fresh)  # projections counted from seq 1 (only theirs may have no chain yet)
        self.deltas: dict[tuple[str, bytes], dict[int, int]] = {}
        self.pack = compression.packer()  # one context for every segment written (not per call)
        self.unpack = compression.unpacker()

    def add(self, projection: str, grp: bytes, seq: int, delta: int) -> None:
        counts = self.deltas.setdefault((projection, grp), {})
        counts[seq] = counts.get(seq, 0) + delta

    def reset(self, projection: str) -> None:
        """Forget every count of a projection (it is being rebuilt)."""
        self.conn.execute("DELETE FROM _alive WHERE projection = ?", (projection,))
        self.conn.execute("DELETE FROM _groups WHERE projection = ?", (projection,))
        self.fresh.add(projection)

    def flush(self, upto: int, projections: Iterable[str]) -> None:
        """File the changes collected (inside the caller's write transaction), the counts now
        reaching seq `upto`; each of `projections` has its whole chain (begun when fresh)."""
        for projection in projections:
            self.deltas.setdefault((projection, WHOLE), {})
        for projection, grp in sorted(self.deltas):  # WHOLE first: every other group is listed after it
            self._file(projection, grp, self.deltas[(projection, grp)], upto)
        self.deltas = {}

    def _file(self, projection: str, grp: bytes, deltas: dict[int, int], upto: int) -> None:
        """Add `deltas` to the group's chain: to its last segment, or to a new one linked from it.
        Changes at seqs the chain already reaches were filed by another catch-up of the same events
        (rows are idempotent; counts must be too)."""
        conn, seal = self.conn, self.seal
        tail = conn.execute(f"SELECT first, upto, data, mac FROM _alive WHERE projection = ? AND grp = ? "
                            f"AND next = {OPEN}", (projection, grp)).fetchone()
        if tail is None:
            if not any(deltas.values()) and grp != WHOLE:
                return
            if grp == WHOLE and projection not in self.fresh:
                raise Forged(f"the count of {projection!r}'s rows is gone")
            self._list(projection, grp)
            first, reached, pairs, data = 0, 0, [], b""
        else:
            first, reached, data, mac = tail
            data = bytes(data)
            if not hmac.compare_digest(bytes(mac), _segment_tag(seal, projection, grp, first, OPEN, reached, data)):
                raise Forged(f"a count of {projection!r}'s rows is not one this memory sealed")
            if upto <= reached:
                return
            pairs = _unpack(data, self.unpack)
        count = pairs[-1] if pairs else 0
        added: list[int] = []
        for seq in sorted(s for s, d in deltas.items() if d and s > reached):
            count += deltas[seq]
            added += [seq, count]
        if tail is not None and not added:
            return
        if tail is not None and len(pairs) >= 2 * SEGMENT_PAIRS:  # the last segment is full: begin the next
            conn.execute("UPDATE _alive SET next = ?, mac = ? WHERE projection = ? AND grp = ? AND first = ?",
                         (added[0], _segment_tag(seal, projection, grp, first, added[0], reached, data),
                          projection, grp, first))
            first, pairs = added[0], []
        pairs += added
        reached = max(reached, upto)
        data = _pack(pairs, self.pack)
        conn.execute("INSERT OR REPLACE INTO _alive (projection, grp, first, next, upto, data, mac) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (projection, grp, first, OPEN, reached, data,
                      _segment_tag(seal, projection, grp, first, OPEN, reached, data)))

    def _list(self, projection: str, grp: bytes) -> None:
        """List a new group after the one before it in key order (which must prove it was absent)."""
        conn, seal = self.conn, self.seal
        if conn.execute("SELECT 1 FROM _groups WHERE projection = ? AND grp = ?", (projection, grp)).fetchone():
            raise Forged(f"the count of a group of {projection!r}'s rows is gone")
        listed = _listed_before(conn, seal, projection, grp)
        next_ = None
        if listed is not None:
            before, next_, denies = listed
            if not denies:
                raise Forged(f"the list of {projection!r}'s counted groups is not one this memory sealed")
            conn.execute("UPDATE _groups SET next = ?, mac = ? WHERE projection = ? AND grp = ?",
                         (grp, _listing_tag(seal, projection, before, grp), projection, before))
        elif grp != WHOLE:
            raise Forged(f"the list of {projection!r}'s counted groups is gone")
        conn.execute("INSERT INTO _groups (projection, grp, next, mac) VALUES (?, ?, ?, ?)",
                     (projection, grp, next_, _listing_tag(seal, projection, grp, next_)))
