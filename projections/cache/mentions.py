"""Mentions: which events name a memory item, so the life of one item is read by index.

`explain ITEM` tells every event that recorded, deduplicated, recalled, promoted,
confirmed, decayed, pruned or expired one lesson, fact, selector or trajectory.
Scanning every event of those types grows with the log; instead each catch-up
files, per event of those types, the items it names (`keys`), and the life is
read from the events at those seqs — each still read through the store's verified
read and filtered by its content, so the index can only narrow what is read. The
rows go into projections.db's digest like every other (`seal.Digest`), so one
deleted from the file is not taken for an event that never named it. Keys are
stored as the memory's keyed hash of the item (a fact key or a selector of a
forgotten domain is never kept in clear beside the ledger).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator

from memtape.ledger.envelope import RecordedEvent
from memtape.ledger.seal import Digest, Key
from memtape.ledger.store import Store
from memtape.projections.folds.knowledge import TYPES as knowledge_types
from memtape.projections.folds.knowledge import fact_id_for
from memtape.projections.folds.lessons import LIFE_TYPES, lesson_id_in

#: the table's columns, in the order its rows are hashed (`seal.Key.row`)
COLUMNS = {"_mentions": ("item", "seq")}
DDL = ("CREATE TABLE _mentions (item INTEGER NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (item, seq)) WITHOUT ROWID",)
TABLES = tuple(COLUMNS)
LESSON_TYPES = LIFE_TYPES
RECALL_TYPES = ("error_recall", "domain_recall", "lessons_used", "tier1_loaded", "lessons_pruned")
#: what the knowledge fold folds, but a forget (it names a subject, not a fact)
FACT_TYPES = tuple(t for t in knowledge_types if t != "subject_forgotten")
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
        lid = (
            d.get("lesson_id")
            if t in ("lesson_promoted", "lesson_pinned", "lesson_unpinned", "lesson_demoted")
            else lesson_id_in(d)
        )
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
        return [
            group,
            fact(str(d.get("key"))),
            fact(fact_id_for(dom, str(d.get("fact_type")), str(d.get("key")), str(d.get("value")))),
        ]
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


def hashed(key: Key, item: str) -> int:
    """An item as the index files it: the memory's keyed hash, as a signed 64-bit integer."""
    return int.from_bytes(
        key.tag(b"mention\x1f" + item.encode("utf-8", "surrogatepass"), KEY_BYTES), "little", signed=True
    )


TYPES = frozenset((*LESSON_TYPES, *RECALL_TYPES, *FACT_TYPES, *SELECTOR_TYPES, *TRAJECTORY_TYPES))


class Mentions:
    """Collects the mentions of the events folded by a catch-up after seq `after` (the index holds
    those before); `flush` writes them, each into `digest`."""

    def __init__(self, conn: sqlite3.Connection, key: Key, digest: Digest, after: int = 0):
        self.conn = conn
        self.key = key
        self.digest = digest
        self.after = after
        self.rows: list[tuple[int, int]] = []
        self._hashed: dict[str, int] = {}

    def record(self, ev: RecordedEvent) -> None:
        if ev.type in TYPES and ev.seq > self.after:
            seq = ev.seq
            for k in keys(ev):
                self.rows.append((self.hashed(k), seq))

    def hashed(self, item: str) -> int:
        h = self._hashed.get(item)
        if h is None:
            h = self._hashed[item] = hashed(self.key, item)
        return h

    def flush(self) -> None:
        """Write what was recorded (inside the write transaction), once per item and event (an
        event may name an item twice)."""
        rows = list(dict.fromkeys(self.rows))
        self.conn.executemany("INSERT INTO _mentions (item, seq) VALUES (?, ?)", rows)
        self.digest.rows(self.key, "_mentions", rows)
        self.rows = []


def seqs(conn: sqlite3.Connection, key: Key, items: Iterable[str], up_to: int) -> list[int]:
    """The seqs (ascending, at most `up_to`) of the events that name any of `items`."""
    found: set[int] = set()
    for item in dict.fromkeys(items):
        found.update(
            s
            for (s,) in conn.execute(
                "SELECT seq FROM _mentions WHERE item = ? AND seq <= ?", (hashed(key, item), up_to)
            )
        )
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
