"""Full-text search over what memory holds: SQLite FTS5 ranked by BM25 (a PostgreSQL ledger:
PostgreSQL's own full-text search, `ts_rank_cd`).

The index is a disposable cache of one view (one head, or one as-of point): built in memory from
the view's records, in a fixed order, so the same memory always gives the same ranking. Forgotten
items are not in the view, so they are never in the index. A query is words: each word of the
query is quoted for FTS5, so `"`, `*`, `NEAR(` or `AND` are searched for as text (or dropped when
they hold no word), never read as FTS5 syntax.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from memtape.ledger.errors import InvalidEvent
from memtape.ledger.events import MAX_QUERY, SearchKind
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


class SearchIndex:
    """The documents of one view, ranked by the store's own full-text search where it has one
    (PostgreSQL's), else by an in-memory FTS5 table (porter stemming over unicode61 words, BM25)."""

    def __init__(self, docs: Iterable[Document], ranker: Ranker | None = None):
        self.docs = list(docs)
        self.ranker = ranker if ranker is not None and ranker([], ["probe"]) is not None else None
        self.db: sqlite3.Connection | None = None
        if self.ranker is None:
            self.db = sqlite3.connect(":memory:", check_same_thread=False)
            self.db.execute("CREATE VIRTUAL TABLE docs USING fts5(text, tokenize = 'porter unicode61')")
            self.db.executemany(
                "INSERT INTO docs(rowid, text) VALUES (?, ?)", ((i, d.text) for i, d in enumerate(self.docs))
            )

    def _ranked(self, words: Sequence[str]) -> Iterable[tuple[int, float]]:
        """(document index, score: higher is better) of the documents holding any of `words`, best first."""
        if self.ranker is not None:
            return self.ranker([d.text for d in self.docs], words) or []
        assert self.db is not None
        rows = self.db.execute(
            "SELECT rowid, bm25(docs) FROM docs WHERE docs MATCH ? ORDER BY bm25(docs), rowid",
            (match_expression(words),),
        )
        return ((rowid, -rank) for rowid, rank in rows)

    def search(
        self,
        query: str,
        kinds: Sequence[str] | None = None,
        domain: str | None = None,
        limit: int = 10,
    ) -> list[SearchResult]:
        """The best `limit` documents for the words of `query`, of `kinds`, and of `domain` when given
        (its items, its subdomains' and those scoped to a parent domain); best first, ties in index order."""
        words = query_words(query)
        if not words or not self.docs:
            return []
        out: list[SearchResult] = []
        for i, score in self._ranked(words):
            d = self.docs[i]
            if kinds is not None and d.kind not in kinds:
                continue
            if domain is not None and not (domain_matches(domain, d.domain) or domain_matches(d.domain, domain)):
                continue
            out.append(SearchResult(d.kind, d.item_id, d.text, d.domain, round(score, 6), d.event_ids))
            if len(out) == limit:
                break
        return out
