"""Full-text search over what memory holds: SQLite FTS5 ranked by BM25 (a PostgreSQL ledger:
PostgreSQL's own full-text search, `ts_rank_cd`).

The index is a disposable cache of one view (one head, or one as-of point), kept in memory: a
memory's index at its head is kept up to date as the head moves (`SearchIndex.update` writes
only the documents whose records changed), and answers exactly as one built afresh there, so
the same memory always gives the same ranking. Forgotten items are not in the view, so they
are deleted from the index and never found. A query is words: each word of the
query is quoted for FTS5, so `"`, `*`, `NEAR(` or `AND` are searched for as text (or dropped when
they hold no word), never read as FTS5 syntax.
"""

from __future__ import annotations

import itertools
import re
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from memtape.ledger.errors import InvalidEvent
from memtape.ledger.events import MAX_QUERY, SearchKind
from memtape.projections.folds.knowledge import confidence_order
from memtape.projections.folds.lessons import listing_order
from memtape.projections.folds.patterns import best_first
from memtape.projections.folds.selectors import best_selector_first
from memtape.projections.text import domain_matches

#: every kind a search reads, in the order an index holds them (ties in rank keep this order)
SEARCH_KINDS: tuple[SearchKind, ...] = (
    "lessons",
    "facts",
    "patterns",
    "selectors",
    "trajectories",
    "sessions",
    "context",
)
#: the most hits one search returns
MAX_LIMIT = 1_000
#: the most distinct words of a query searched for (a query is at most MAX_QUERY characters)
MAX_WORDS = 64
WORD = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class Document:
    """One memory item as the index holds it: its text and where it applies."""

    kind: SearchKind
    item_id: str
    domain: str | None
    text: str
    event_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SearchResult:
    """One hit: the item, its text, the site it applies to (None: every site), and its BM25 score
    (higher ranks first)."""

    kind: str
    item_id: str
    text: str
    domain: str | None
    score: float
    event_ids: tuple[str, ...]


def check_query(query: Any) -> str:
    """The query as searched, or InvalidEvent naming what is wrong with it in one line."""
    if not isinstance(query, str):
        raise InvalidEvent(f"query must be a string, got {type(query).__name__}")
    if not query.strip():
        raise InvalidEvent("query must hold at least one word, got an empty query")
    if len(query) > MAX_QUERY:
        raise InvalidEvent(f"query is {len(query)} characters long; a search takes at most {MAX_QUERY}")
    if "\x00" in query or any("\ud800" <= c <= "\udfff" for c in query):
        raise InvalidEvent("query must be text without NUL characters or lone surrogates")
    return query


def check_kinds(kinds: Any) -> tuple[SearchKind, ...] | None:
    """The kinds a search is limited to (None: every kind), or InvalidEvent."""
    if kinds is None:
        return None
    if isinstance(kinds, str):
        kinds = [kinds]
    if not isinstance(kinds, (list, tuple, set, frozenset)) or not kinds:
        raise InvalidEvent(f"kinds must be a non-empty list of {', '.join(SEARCH_KINDS)}, got {kinds!r:.60}")
    unknown = [k for k in kinds if k not in SEARCH_KINDS]
    if unknown:
        raise InvalidEvent(f"unknown search kind {unknown[0]!r:.60}: choose from {', '.join(SEARCH_KINDS)}")
    return tuple(k for k in SEARCH_KINDS if k in kinds)


def check_limit(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidEvent(f"limit must be a whole number from 1 to {MAX_LIMIT}, got {limit!r:.60}")
    return limit


def check_search(query: Any, kinds: Any, limit: Any) -> tuple[str, tuple[SearchKind, ...] | None, int]:
    """A search's query, kinds and limit as searched, or InvalidEvent naming the first bad one."""
    return check_query(query), check_kinds(kinds), check_limit(limit)


def query_words(query: str) -> list[str]:
    """The distinct words of `query`, lower-cased, in order (at most MAX_WORDS)."""
    out: list[str] = []
    for word in WORD.findall(query.lower()):
        if word not in out:
            out.append(word)
            if len(out) == MAX_WORDS:
                break
    return out


def match_expression(words: Sequence[str]) -> str:
    """An FTS5 query for any of `words`, each a quoted string (a word holds no `"`)."""
    return " OR ".join(f'"{w}"' for w in words)


def _steps_text(steps: Iterable[Any]) -> str:
    parts: list[str] = []
    for s in steps:
        if isinstance(s, dict):
            parts.extend(str(v) for v in s.values() if isinstance(v, str))
        else:
            parts.extend(str(v) for v in (s.command, s.role, s.name, s.selector, s.url) if v)
    return " ".join(parts)


def documents(kind: SearchKind, records: Iterable[Any], domain: str | None = None) -> Iterator[Document]:
    """The documents of one kind's records (the projections' own record types); `domain` is the
    domain of sessions (a session entry is kept under its domain, not with it)."""
    for r in records:
        if kind == "lessons":
            text = " ".join(t for t in (r.lesson, r.failed_command, r.error_pattern) if t)
            yield Document(kind, r.lesson_id, r.scope_domain, text, r.event_ids)
        elif kind == "facts":
            text = f"{r.fact_type} {r.key} {r.value}"
            yield Document(kind, r.fact_id, r.domain, text, r.event_ids)
        elif kind == "patterns":
            text = f"{r.pattern_type} {r.description} {_steps_text(r.steps)}"
            yield Document(kind, r.pattern_id, r.domain, text, r.event_ids)
        elif kind == "selectors":
            text = f"{r.role} {r.name} {r.selector}"
            yield Document(kind, f"{r.domain} {r.role} {r.name} {r.selector}", r.domain, text, r.event_ids)
        elif kind == "trajectories":
            text = f"{r.goal} {_steps_text(r.steps)}"
            yield Document(kind, r.trajectory_id, r.domain, text, r.event_ids)
        elif kind == "sessions":
            text = " ".join(t for t in (r.goal, r.outcome, r.final_url) if t)
            yield Document(kind, r.run_id or r.session_id, domain, text, r.event_ids)
        else:
            scope = r.run_id if r.kind == "user" else r.domain
            text = f"{r.key} {r.value} {r.title}".strip()
            yield Document(kind, f"{r.kind}:{scope}:{r.key}", r.domain or None, text, r.event_ids)


#: a server's own ranking of texts for any of some words (`Store.text_ranks`): (index, rank), best first
Ranker = Callable[[Sequence[str], Sequence[str]], "list[tuple[int, float]] | None"]
#: records of one container not indexed yet: (kind, the domain they are kept under, [(key, record)])
New = tuple[SearchKind, "str | None", "list[tuple[Any, Any]]"]
#: a document's place among equal scores: its kind's place in SEARCH_KINDS, then its kind's own order
Tie = tuple[Any, ...]


def held(state: Any) -> Iterator[tuple[SearchKind, str | None, dict[Any, Any] | list[Any]]]:
    """Each kind a search reads with its records in `state` (a MemoryState), by container: (kind,
    the domain the records are kept under (None: not kept by domain), the records by key, or a
    list). Lessons, current facts, patterns, selectors, trajectories, the sessions kept, context."""
    yield "lessons", None, state.lessons.lessons
    for domain, facts in state.knowledge.current.items():
        yield "facts", domain, facts
    yield "patterns", None, state.patterns.patterns
    for domain, selectors in state.selectors.by_domain.items():
        yield "selectors", domain, selectors
    for domain, trajectories in state.trajectories.by_domain.items():
        yield "trajectories", domain, trajectories
    for domain, sessions in state.sessions.by_domain.items():
        yield "sessions", domain, sessions
    yield "context", None, state.context.entries


def _values(records: dict[Any, Any] | list[Any]) -> Iterable[Any]:
    return records.values() if isinstance(records, dict) else records


def tie(kind: SearchKind, where: str | None, key: Any, record: Any, rowid: int) -> Tie:
    """Where a document goes among documents of equal score: kinds in SEARCH_KINDS order, then
    the order the view lists that kind in: lessons Tier 1 and most used first, facts by domain and
    most confident first, patterns and selectors best first, sessions by domain oldest first (kept
    in the order they were indexed: a domain's sessions are only appended to, trimmed and
    filtered); trajectories by domain and id, context by kind, scope and key. Never a record's
    place in a dict, so an index kept up to date and one built afresh order ties alike."""
    order = SEARCH_KINDS.index(kind)
    if kind == "lessons":
        return (order, *listing_order(record))
    if kind == "facts":
        return (order, where, *confidence_order(record))
    if kind == "patterns":
        return (order, *best_first(record))
    if kind == "selectors":
        return (order, *best_selector_first(record))
    if kind == "sessions":
        return (order, where, rowid)
    return (order, where or "", key)


class SearchIndex:
    """The documents of one view, ranked by the store's own full-text search where it has one
    (PostgreSQL's), else by an in-memory FTS5 table (porter stemming over unicode61 words, BM25;
    contentless: the texts are kept here, and a document is deleted with the text it was indexed with).

    Kept up to date, not rebuilt: `update` brings it to a later state of the same memory by
    indexing only the records it has not indexed yet and deleting those no longer in memory
    (forgotten, closed, decayed, changed). Projections' records are frozen: a record that changed
    is another object, so a record is known by its identity (the index holds each record it
    indexed, so no identity is reused while it is known), and a container whose records are the
    same objects as at the last update is passed over. BM25 reads counts the table keeps exact
    under deletes, and ties keep `tie` order, so an index kept up to date answers exactly as one
    built afresh at that state."""

    def __init__(self, ranker: Ranker | None = None):
        self.ranker = ranker if ranker is not None and ranker([], ["probe"]) is not None else None
        self.db: sqlite3.Connection | None = None
        if self.ranker is None:
            self.db = sqlite3.connect(":memory:", check_same_thread=False)
            self.db.execute("CREATE VIRTUAL TABLE docs USING fts5(text, content = '', tokenize = 'porter unicode61')")
        #: (kind, the domain records are kept under) -> that container's records as last indexed
        self.containers: dict[tuple[SearchKind, str | None], list[Any]] = {}
        #: id(record) -> (the record, its rowid)
        self.records: dict[int, tuple[Any, int]] = {}
        #: rowid -> (document, its tie order)
        self.docs: dict[int, tuple[Document, Tie]] = {}
        self._rowids = itertools.count()
        self._by_tie: list[int] | None = None
        #: one update or search at a time (a server answers from several threads)
        self.lock = threading.RLock()

    @classmethod
    def of(cls, state: Any, ranker: Ranker | None = None) -> SearchIndex:
        """The index of the documents of `state` (a MemoryState)."""
        index = cls(ranker)
        index.update(state)
        return index

    def update(self, state: Any) -> None:
        """Bring the index to `state`: records not indexed yet are indexed, those gone deleted.
        Each container of records (a projection's dict, a domain's) is compared with the copy
        kept at the last update, in C (a list comparison tests identity first): only the
        containers that changed are walked in Python."""
        with self.lock:
            seen: set[tuple[SearchKind, str | None]] = set()
            gone: list[int] = []
            new: list[New] = []
            for kind, where, records in held(state):
                place = (kind, where)
                seen.add(place)
                now = list(_values(records))
                was = self.containers.get(place, [])
                if was == now:  # the same records (or equal ones: the same documents)
                    continue
                self.containers[place] = now
                before, after = set(map(id, was)), set(map(id, now))
                gone.extend(before - after)
                fresh = after - before
                if fresh:
                    pairs = records.items() if isinstance(records, dict) else enumerate(records)
                    new.append((kind, where, [(key, r) for key, r in pairs if id(r) in fresh]))
            for place in [p for p in self.containers if p not in seen]:
                gone.extend(map(id, self.containers.pop(place)))
            if gone or new:
                self._write(gone, new)

    def _write(self, gone: Iterable[int], new: list[New]) -> None:
        self._by_tie = None
        deleted: list[tuple[int, str]] = []
        for identity in gone:
            _, rowid = self.records.pop(identity)
            deleted.append((rowid, self.docs.pop(rowid)[0].text))
        inserted: list[tuple[int, str]] = []
        for kind, where, pairs in new:
            made = documents(kind, (record for _, record in pairs), where or None)
            for (key, record), doc in zip(pairs, made, strict=True):
                rowid = next(self._rowids)
                self.records[id(record)] = (record, rowid)
                self.docs[rowid] = (doc, tie(kind, where, key, record, rowid))
                inserted.append((rowid, doc.text))
        if self.db is not None:
            with self.db:
                self.db.executemany("INSERT INTO docs(docs, rowid, text) VALUES ('delete', ?, ?)", deleted)
                self.db.executemany("INSERT INTO docs(rowid, text) VALUES (?, ?)", inserted)

    def _ranked(self, words: Sequence[str]) -> Iterator[list[tuple[int, float]]]:
        """Groups of (rowid, score: higher is better) of equal score, of the documents holding any
        of `words`, best group first."""
        if self.ranker is not None:
            if self._by_tie is None:
                self._by_tie = sorted(self.docs, key=lambda rowid: self.docs[rowid][1])
            by_tie = self._by_tie
            ranked = self.ranker([self.docs[rowid][0].text for rowid in by_tie], words) or []
            yield from ([(by_tie[i], score)] for i, score in ranked)
            return
        assert self.db is not None
        rows = self.db.execute(
            "SELECT rowid, bm25(docs) FROM docs WHERE docs MATCH ? ORDER BY bm25(docs)",
            (match_expression(words),),
        )
        for _, group in itertools.groupby(rows, key=lambda row: row[1]):
            yield [(rowid, -rank) for rowid, rank in group]

    def search(
        self,
        query: str,
        kinds: Sequence[str] | None = None,
        domain: str | None = None,
        limit: int = 10,
    ) -> list[SearchResult]:
        """The best `limit` documents for the words of `query`, of `kinds`, and of `domain` when given
        (its items, its subdomains' and those scoped to a parent domain); best first, ties in `tie` order."""
        words = query_words(query)
        out: list[SearchResult] = []
        with self.lock:
            if not words or not self.docs:
                return out
            for group in self._ranked(words):
                group.sort(key=lambda hit: self.docs[hit[0]][1])
                for rowid, score in group:
                    d = self.docs[rowid][0]
                    if kinds is not None and d.kind not in kinds:
                        continue
                    if domain is not None and not (
                        domain_matches(domain, d.domain) or domain_matches(d.domain, domain)
                    ):
                        continue
                    out.append(SearchResult(d.kind, d.item_id, d.text, d.domain, round(score, 6), d.event_ids))
                    if len(out) == limit:
                        return out
        return out
