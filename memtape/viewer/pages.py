"""What each page of the viewer shows, read through the public API only (`Memory.state`, `audit`,
`explain`, `diff`): the same answers the HTTP API and MCP give, shaped for a person to look at.

Long lists are cut into pages of `PAGE_SIZE`: the runs by the library (`state(limit=, offset=)`),
a run's steps and an item's life, read whole, here (`paged`); every function here returns plain data the
templates render (autoescaped), and raises the library's own errors (an unknown run or item is
`UnknownItem`, a 404) for the app to show in one line.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from memtape.api import Memory, MemtapeError
from memtape.projections.folds.runs import OUTCOME_OF_STATUS
from memtape.projections.recording.checks import plain

PAGE_SIZE = 50
#: hits a search page shows (Memory.search ranks them, BM25)
SEARCH_LIMIT = 100
#: the kinds a search hit links to: its item page, or its run (a session is one run's)
ITEM_KINDS = frozenset({"lessons", "facts", "trajectories"})
#: answers kept per ledger head (the pages a person walks back and forth between)
KEPT = 64


class Reads:
    """The public reads the pages make, each answer kept while the ledger's head has not moved.

    The log is append-only, so every read is a function of its arguments and the head: paging a
    list, changing a filter or going back to a page reuses what was read at this head, and the
    first event appended after it drops everything kept. At 100,000 events a whole projection
    (`state("runs")`) takes a few hundred ms to read (docs/benchmarks.md, "Web viewer")."""

    def __init__(self, memory: Memory, size: int = KEPT):
        self.memory, self.size = memory, size
        self.head: int | None = None
        self.kept: OrderedDict[Hashable, Any] = OrderedDict()

    def _kept(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        head = int(self.memory.store.head())
        if head != self.head:
            self.kept.clear()
            self.head = head
        if key in self.kept:
            self.kept.move_to_end(key)
            return self.kept[key]
        value = compute()
        self.kept[key] = value
        if len(self.kept) > self.size:
            self.kept.popitem(last=False)
        return value

    @property
    def policy(self) -> Any:
        return self.memory.policy

    def state(
        self,
        kind: str,
        *,
        domain: str | None = None,
        run: str | None = None,
        session: str | None = None,
        outcome: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """`Memory.state` as JSON gives it: a whole kind, or the page of it a list shows."""
        asked = {"domain": domain, "run": run, "session": session, "outcome": outcome}
        return self._kept(
            ("state", kind, *asked.values(), limit, offset),
            lambda: plain(self.memory.state(kind, **asked, limit=limit, offset=offset)),
        )

    def count(
        self, kind: str, *, domain: str | None = None, session: str | None = None, outcome: str | None = None
    ) -> int:
        """`Memory.count`: how many rows the same `state` read lists in all (a list's "of N")."""
        return self._kept(
            ("count", kind, domain, session, outcome),
            lambda: self.memory.count(kind, domain=domain, session=session, outcome=outcome),
        )

    def audit(self, run_id: str, step: int | None = None) -> dict[str, Any]:
        return self._kept(("audit", run_id, step), lambda: self.memory.audit(run_id, step=step))

    def explain(self, item: str, domain: str | None = None) -> dict[str, Any]:
        return self._kept(("explain", item, domain), lambda: self.memory.explain(item, domain=domain))

    def diff(self, start: str, end: str) -> list[dict[str, Any]]:
        return self._kept(("diff", start, end), lambda: plain(self.memory.diff(start, end)))

    def credit(self) -> dict[str, dict[str, Any]]:
        """item id -> what `memtape credit` measured it to be worth (over the runs it was credited on)."""
        return self._kept(("credit",), lambda: {c["item"]: c for c in plain(self.memory.state("credit"))})

    def funnel(self) -> list[tuple[str, int]]:
        return self._kept(("funnel",), lambda: _funnel(self))


@dataclass(frozen=True)
class Page:
    """One page of a long list: its rows, its number (from 1), how many pages, how many rows in all,
    and where its rows start in the list (from 0)."""

    rows: Sequence[Any]
    number: int
    pages: int
    total: int
    start: int = 0

    @property
    def span(self) -> str:
        """The rows it holds, as a person reads them: "51–100 of 3,410"."""
        if not self.rows:
            return f"none of {self.total:,}"
        return f"{self.start + 1:,}–{self.start + len(self.rows):,} of {self.total:,}"


def page_number(raw: str | None) -> int:
    """`?page=` as a person may type it: digits from 1; anything else is refused in one line."""
    if raw is None or raw == "":
        return 1
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9 or int(raw) < 1:
        raise MemtapeError(f"page must be a whole number from 1, got {raw[:40]!r}")
    return int(raw)


def last_page(total: int, number: int, size: int = PAGE_SIZE) -> tuple[int, int]:
    """(page number, pages) of a list of `total` rows: a page past the last is the last, so a stale
    link still shows rows."""
    pages = max(1, -(-total // size))
    return min(number, pages), pages


def paged(rows: Sequence[Any], number: int, size: int = PAGE_SIZE) -> Page:
    """Page `number` of `rows` read whole (a run's steps, an item's life)."""
    number, pages = last_page(len(rows), number, size)
    start = (number - 1) * size
    return Page(rows[start : start + size], number, pages, len(rows), start)


def outcome(run: dict[str, Any]) -> str:
    """A run's outcome as the list filters it (the library's own rule, by the run's status)."""
    return OUTCOME_OF_STATUS[run["status"]]


def runs(
    reads: Reads,
    number: int = 1,
    *,
    site: str | None = None,
    session: str | None = None,
    result: str | None = None,
) -> Page:
    """Page `number` of the runs, newest first, of one site (and its subdomains), session and
    outcome when given: the library filters and pages (`state("runs", limit=, offset=)`, `count`),
    so a page reads its 50 runs, not every run."""
    filters = {"domain": site, "session": session, "outcome": result}
    total = reads.count("runs", **filters)
    number, pages = last_page(total, number)
    start = (number - 1) * PAGE_SIZE
    rows = reads.state("runs", **filters, limit=PAGE_SIZE, offset=start)
    return Page([dict(r, outcome=outcome(r)) for r in rows], number, pages, total, start)


def funnel(reads: Reads) -> list[tuple[str, int]]:
    """The promotion funnel of learned lessons: learned, used again, used as often as promotion
    asks, on as many domains as it asks, in Tier 1 (the policy's thresholds)."""
    return reads.funnel()


def _funnel(reads: Reads) -> list[tuple[str, int]]:
    policy = reads.policy
    learned = [l for l in reads.state("lessons") if l.get("source") != "seed"]
    tier1 = {l["lesson_id"] for l in reads.state("tier1")}
    return [
        ("learned", len(learned)),
        ("used again", sum(1 for l in learned if l["use_count"] >= 2)),
        (f"≥ {policy.promotion_min_uses} uses", sum(1 for l in learned if l["use_count"] >= policy.promotion_min_uses)),
        (
            f"≥ {policy.promotion_min_domains} domains",
            sum(1 for l in learned if len(l["triggered_domains"]) >= policy.promotion_min_domains),
        ),
        ("in Tier 1", sum(1 for l in learned if l["lesson_id"] in tier1)),
    ]


def step_tokens(step: dict[str, Any]) -> int:
    """Tokens of the prompts recorded at a step (system and step prompt)."""
    return sum(int(p.get("total_tokens") or 0) for p in step.get("prompt", ()))


#: what a run taught that memory may hold, by kind (`state KIND --run RUN` reads a run's)
TAUGHT = ("lessons", "facts", "trajectories", "patterns")


def taught(reads: Reads, run_id: str) -> dict[str, list[dict[str, Any]]]:
    """What memory holds now that run `run_id` taught: its lessons, facts, trajectory, and the
    patterns first learned in it (each kind read for that run only)."""
    return {kind: reads.state(kind, run=run_id) for kind in TAUGHT}


def records_now(explained: dict[str, Any]) -> list[dict[str, Any]]:
    """An explained item as memory holds it now: a fact key or a selector may name several records
    (one per site), a lesson or trajectory one, a forgotten item none."""
    now = explained.get("now")
    if isinstance(now, list):
        return now
    return [now] if now else []


def confidence_points(life: Sequence[dict[str, Any]]) -> list[tuple[int, float]]:
    """(seq, confidence) along a fact's life, for its chart."""
    return [(int(e["seq"]), float(e["confidence"])) for e in life if e.get("confidence") is not None]


def changes_by_projection(changes: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """A diff's changes grouped by kind of memory, in the order the diff lists them."""
    out: dict[str, list[dict[str, Any]]] = {}
    for change in changes:
        out.setdefault(change["projection"], []).append(change)
    return out


def search(reads: Reads, query: str) -> dict[str, list[Any]]:
    """`Memory.search` (full text, ranked) of `query`, its hits grouped by kind in rank order; no
    query, no search. A search is a recall: the library logs it as a `memory_searched` event, so
    it is never kept (each one is asked, and logged, again)."""
    if not query.strip():
        return {}
    found: dict[str, list[Any]] = {}
    for hit in reads.memory.search(query, limit=SEARCH_LIMIT):
        found.setdefault(hit.kind, []).append(hit)
    return found
