"""Mentions: which events name a memory item, so the life of one item is read by index.

`explain ITEM` tells every event that recorded, deduplicated, recalled, promoted,
confirmed, decayed, pruned or expired one lesson, fact, selector or trajectory.
Scanning every event of those types grows with the log; instead each catch-up
files, per event of those types, the items it names (`keys`), and the life is
read from the events at those seqs — each still read through the store's verified
read and filtered by its content, so the index can only narrow what is read —
and the mentions are counted (counts.py, by bucket of item hashes), so one deleted
from the file is not taken for an event that never named it: `seqs` answers only
when an item's bucket holds as many as counted. Keys are stored as the memory's keyed hash of the item (a
fact key or a selector of a forgotten domain is never kept in clear beside the
ledger).
"""
from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator

from memtape.ledger.events import RecordedEvent
from memtape.ledger.store import Store
from memtape.projections.cache.counts import Counter, Counts
from memtape.projections.cache.seal import Seal
from memtape.projections.knowledge import fact_id_for
from memtape.projections.lessons import lesson_id_in

DDL = ("CREATE TABLE IF NOT EXISTS _mentions (item BLOB NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (item, seq)) "
       "WITHOUT ROWID",)
TABLES = ("_mentions",)
COUNTED = "_mentions"  # the name its counts are filed under (beside the projections')
LESSON_TYPES = ("lesson_seeded", "lesson_recorded", "lesson_deduplicated", "lesson_promoted", "lesson_pinned")
RECALL_TYPES = ("error_recall", "domain_recall", "tier1_loaded", "lessons_pruned")
FACT_TYPES = ("fact_observed", "fact_contradicted", "facts_pruned")
SELECTOR_TYPES = ("selector_succeeded", "selector_failed")
TRAJECTORY_TYPES = ("trajectory_recorded", "trajectory_recalled", "trajectories_expired")


def lesson(lesson_id: str) -> str:
    return f"lesson\x1f{lesson_id}"


def fact(key_or_id: str) -> str:
    """A fact key, or a fact id."""
    return f"fact\x1f{key_or_id}"


def fact_group(domain: str, fact_type: str, key: str) -> str:
    return f"facts\x1f{domain}\x1f{fact_type}\x1f{key}"


def selector(text: str) -> str:
    return f"selector\x1f{text}"


def trajectory(trajectory_id: str) -> str:
    return f"trajectory\x1f{trajectory_id}"


def keys(ev: RecordedEvent) -> list[str]:
    """The items an event names (in the terms `explain` looks them up by)."""
    t, d = ev.type, ev.data
    if t in LESSON_TYPES:
        lid = d.get("lesson_id") if t in ("lesson_promoted", "lesson_pinned") else lesson_id_in(d)
        return [lesson(str(lid))] if lid else []
    if t in RECALL_TYPES:
        return [lesson(str(lid)) for lid in d.get("lesson_ids") or ()]
    if t in FACT_TYPES:
        dom = ev.domain or ""
        if t == "facts_pruned":
            out = []
            for f in d.get("facts") or ():
                fdom = f.get("domain", dom) or ""
                out.append(fact_group(fdom, str(f.get("fact_type")), str(f.get("key"))))
                if f.get("fact_id"):
                    out.append(fact(str(f["fact_id"])))
            return out
        group = fact_group(dom, str(d.get("fact_type")), str(d.get("key")))
        if t == "fact_contradicted":
            return [group]
        return [group, fact(str(d.get("key"))),
                fact(fact_id_for(dom, str(d.get("fact_type")), str(d.get("key")), str(d.get("value"))))]
    if t in SELECTOR_TYPES:
        return [selector(str(d.get("selector")))]
    if t in TRAJECTORY_TYPES:
        if t == "trajectories_expired":
            return [trajectory(str(tid)) for tid in d.get("trajectory_ids") or ()]
        return [trajectory(str(d.get("trajectory_id")))]
    return []


#: bytes of an item's keyed hash: a collision only makes explain read an event more (it is then
#: filtered by its content), so 64 bits are plenty
KEY_BYTES = 8


def hashed(seal: Seal, item: str) -> bytes:
    """An item as the index files it: the memory's keyed hash, cut to KEY_BYTES."""
    return seal.tag(b"mention\x1f" + item.encode("utf-8", "surrogatepass"))[:KEY_BYTES]


#: the mentions are counted by bucket: the items whose hashes share their first BUCKET_BITS bits (a
#: count per item would be a row per item; a bucket is read whole, a few hundred mentions at most
#: in a log of millions of events)
BUCKET_BITS = 10


def bucket(key: bytes) -> tuple[bytes, bytes | None]:
    """The counted group of a hashed item (the first key of its bucket: no key sorts before it), and
    the first key of the next bucket (None after the last)."""
    shift = 16 - BUCKET_BITS
    prefix = int.from_bytes(key[:2], "big") >> shift
    nxt = prefix + 1
    return (prefix << shift).to_bytes(2, "big"), None if nxt >> BUCKET_BITS else (nxt << shift).to_bytes(2, "big")


TYPES = frozenset((*LESSON_TYPES, *RECALL_TYPES, *FACT_TYPES, *SELECTOR_TYPES, *TRAJECTORY_TYPES))


class Mentions:
    """Collects the mentions of the events folded by a catch-up; `flush` writes them."""

    def __init__(self, conn: sqlite3.Connection, seal: Seal, counter: Counter):
        self.conn = conn
        self.seal = seal
        self.counter = counter
        self.upto = 0  # the last seq recorded
        self.rows: list[tuple[bytes, int]] = []
        self._hashed: dict[str, bytes] = {}

    def record(self, ev: RecordedEvent) -> None:
        if ev.type in TYPES:
            seq = self.upto = ev.seq
            for k in keys(ev):
                self.rows.append((self.hashed(k), seq))

    def hashed(self, key: str) -> bytes:
        h = self._hashed.get(key)
        if h is None:
            h = self._hashed[key] = hashed(self.seal, key)
        return h

    def pending(self) -> int:
        return len(self.rows)

    def flush(self) -> None:
        """Write what was recorded (inside the module's write transaction), and count it (once per
        item and event: an event may name an item twice); idempotent."""
        rows = list(dict.fromkeys(self.rows))
        self.conn.executemany("INSERT OR IGNORE INTO _mentions (item, seq) VALUES (?, ?)", rows)
        for item, seq in rows:
            self.counter.add(COUNTED, bucket(item)[0], seq, 1)
        self.rows = []


def seqs(conn: sqlite3.Connection, seal: Seal, items: Iterable[str], up_to: int) -> list[int] | None:
    """The seqs (ascending, at most `up_to`) of the events that name any of `items`; None when the
    mentions of an item's bucket are not as many as counted (the index was edited: read the events
    by type instead)."""
    found: set[int] = set()
    counts = Counts(conn, seal)
    buckets: dict[bytes, list[tuple[bytes, int]]] = {}
    for item in dict.fromkeys(items):
        h = hashed(seal, item)
        grp, after = bucket(h)
        rows = buckets.get(grp)
        if rows is None:
            rows = buckets[grp] = conn.execute(
                "SELECT item, seq FROM _mentions WHERE item >= ? AND seq <= ?" + (" AND item < ?" if after else ""),
                (grp, up_to, *((after,) if after else ()))).fetchall()
            if counts.at(COUNTED, grp, up_to) != len(rows):
                return None
        found.update(s for i, s in rows if i == h)
    return sorted(found)


def events_at(store: Store, seqs_: Iterable[int]) -> Iterator[RecordedEvent]:
    """The events at these seqs, in order, each through the store's verified read (runs of
    consecutive seqs in one read)."""
    ordered = sorted(set(seqs_))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        yield from store.read(ordered[i], ordered[j])
        i = j + 1
