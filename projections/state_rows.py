"""What the CLI shows: projection items as rows, and what changed between two points.

Library functions (the CLI only renders their results):

    state_page(view, "runs", limit=50).rows      -> the 50 newest runs (.total: how many)
    memory_diff(view.as_of(10), view.as_of(50))  -> list of changes
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal, get_args

from memtape.ledger.errors import InvalidEvent, LedgerError
from memtape.ledger.field_rules import INT64_MAX
from memtape.ledger.store import Store
from memtape.projections.cache.materialize import changed_between, resolve_seq
from memtape.projections.folds import runs as runs_mod
from memtape.projections.folds.context import ContextEntry
from memtape.projections.folds.credit import ItemCredit
from memtape.projections.folds.knowledge import Fact
from memtape.projections.folds.lessons import LessonEntry
from memtape.projections.folds.page_maps import PageMap
from memtape.projections.folds.patterns import Pattern
from memtape.projections.folds.runs import RunManifest
from memtape.projections.folds.scratch import ScratchEntry
from memtape.projections.folds.selectors import SelectorEntry
from memtape.projections.folds.sessions import SessionEntry
from memtape.projections.folds.short_term import ShortTerm
from memtape.projections.folds.sitemap import SitePage
from memtape.projections.folds.snapshots import Snapshot
from memtape.projections.folds.trajectories import Trajectory
from memtape.projections.parameters import DEFAULT_POLICY, Thresholds
from memtape.projections.recording.checks import check_storable
from memtape.projections.text import instruction_like
from memtape.projections.view import MemoryView

#: the projections `state` lists, as the type checker knows them (`Memory.state` overloads on it)
StateKindName = Literal[
    "lessons",
    "tier1",
    "facts",
    "sessions",
    "selectors",
    "trajectories",
    "runs",
    "short-term",
    "patterns",
    "context",
    "snapshots",
    "sitemap",
    "scratch",
    "page-maps",
    "credit",
]
STATE_KINDS: tuple[str, ...] = get_args(StateKindName)

#: columns the rich tables show per kind (--json prints every field)
COLUMNS: dict[str, tuple[str, ...]] = {
    "lessons": (
        "lesson_id",
        "category",
        "use_count",
        "triggered_domains",
        "scope_domain",
        "last_used",
        "source",
        "instruction_like",
        "lesson",
    ),
    "tier1": ("lesson_id", "category", "use_count", "source", "instruction_like", "lesson"),
    "facts": ("fact_id", "domain", "fact_type", "key", "value", "confidence", "sources", "valid_from", "valid_to"),
    "sessions": ("domain", "session_id", "run_id", "success", "goal", "outcome", "final_url", "turns_used"),
    "selectors": ("domain", "role", "name", "selector", "successes", "failures", "last_used"),
    "trajectories": ("domain", "trajectory_id", "goal", "steps", "occurred_at", "duration_ms", "run_id"),
    "runs": ("run_id", "status", "domain", "session_id", "parent_run_id", "goal", "turn_count", "started_at"),
    "short-term": (
        "run_id",
        "domain",
        "cycle_count",
        "completed",
        "current_url",
        "navigation_path",
        "failed_signatures",
        "loop_warnings",
    ),
    "patterns": (
        "pattern_id",
        "domain",
        "pattern_type",
        "description",
        "steps",
        "success_count",
        "failure_count",
        "success_rate",
        "last_used",
    ),
    "context": ("kind", "key", "value", "source", "run_id", "domain", "occurred_at", "served_count"),
    "snapshots": (
        "run_id",
        "snapshot_id",
        "associated_step",
        "url",
        "title",
        "visible_elements_summary",
        "scroll_y",
        "restored",
        "dead_ends",
    ),
    "sitemap": ("domain", "url", "depth", "link_type", "visited", "title", "section_count", "summary"),
    "scratch": ("run_id", "key", "value", "domain", "step", "writes", "occurred_at"),
    "page-maps": ("run_id", "url", "title", "summary", "total_height", "regions", "stored"),
    "credit": ("item", "kind", "shown", "changed", "turns_saved", "tokens_saved", "success_saved", "method", "text"),
}


@dataclass(frozen=True, slots=True)
class ListedLesson(LessonEntry):
    """A lesson as `state lessons|tier1` lists it: flagged when its text reads as instructions to
    the model (`instruction_like` names what), which the policy never promotes (a person may pin it)."""

    instruction_like: str | None = None


#: the record each kind lists: `Memory.state(kind)` answers a list of it, and the faces' schemas
#: name it (by the class's name) as the rows of `GET /state/{kind}`
STATE_ROWS: dict[str, type] = {
    "lessons": ListedLesson,
    "tier1": ListedLesson,
    "facts": Fact,
    "sessions": SessionEntry,
    "selectors": SelectorEntry,
    "trajectories": Trajectory,
    "runs": RunManifest,
    "short-term": ShortTerm,
    "patterns": Pattern,
    "context": ContextEntry,
    "snapshots": Snapshot,
    "sitemap": SitePage,
    "scratch": ScratchEntry,
    "page-maps": PageMap,
    "credit": ItemCredit,
}
#: a row of any kind
StateRow = (
    ListedLesson
    | Fact
    | SessionEntry
    | SelectorEntry
    | Trajectory
    | RunManifest
    | ShortTerm
    | Pattern
    | ContextEntry
    | Snapshot
    | SitePage
    | ScratchEntry
    | PageMap
    | ItemCredit
)


def listed(lessons: Sequence[LessonEntry]) -> list[ListedLesson]:
    return [
        ListedLesson(
            **{f.name: getattr(les, f.name) for f in fields(LessonEntry)}, instruction_like=instruction_like(les.lesson)
        )
        for les in lessons
    ]


#: a run's outcome as `state runs|sessions --outcome` keeps it (a session entry is a finished run)
OUTCOMES: tuple[str, ...] = tuple(runs_mod.OUTCOME_OF_STATUS.values())
#: the run status each outcome is
_STATUS = {outcome: status for status, outcome in runs_mod.OUTCOME_OF_STATUS.items()}
#: the most rows one page of `state` holds (the whole list: no limit)
MAX_PAGE = 10_000
#: kinds whose records belong to a session and end in an outcome (`session`, `outcome` filter them)
SESSION_KINDS = ("runs", "sessions")
#: kinds whose records name no run (`run` cannot filter them)
RUNLESS_KINDS = ("sitemap",)
#: the field naming the run that taught a record of each kind (`state KIND --run`): the kinds that
#: hold what runs learned, beside those of one run's own state (short-term, context, ...)
TAUGHT_BY: dict[str, str] = {
    "lessons": "taught_by_run",
    "tier1": "taught_by_run",
    "facts": "first_run",
    "selectors": "first_run",
    "trajectories": "run_id",
    "patterns": "first_run",
    "sessions": "run_id",
}


def check_selection(
    kind: str, session: str | None, outcome: str | None, run: str | None, limit: int | None, offset: int
) -> None:
    """Refuse, in one line, a filter the kind's records do not carry and a page that is not one:
    the same check for every face (the CLI calls `open_state`, the others `Memory.state`)."""
    for name, value in (("session", session), ("outcome", outcome)):
        if value is not None and not isinstance(value, str):
            raise InvalidEvent(f"{name} must be a string, got {type(value).__name__}")
        if value is not None and kind not in SESSION_KINDS:
            raise InvalidEvent(f"{name} filters {' and '.join(SESSION_KINDS)}, not {kind}")
    if outcome is not None and outcome not in OUTCOMES:
        raise InvalidEvent(f"outcome must be one of {', '.join(OUTCOMES)}, got {outcome!r:.60}")
    if run is not None and kind in RUNLESS_KINDS:
        raise InvalidEvent(f"run cannot filter {kind}: its records name no run")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE):
        raise InvalidEvent(f"limit must be a whole number from 1 to {MAX_PAGE}, got {limit!r:.60}")
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= INT64_MAX:
        raise InvalidEvent(f"offset must be a whole number from 0 to 2**63-1, got {offset!r:.60}")


def _runs(
    view: MemoryView, run: str | None, session: str | None, domain: str | None, outcome: str | None, first: int | None
) -> tuple[list[RunManifest], int]:
    """(the first `first` runs the filters keep, newest first; how many they keep): only what a
    page shows is ordered."""
    status = _STATUS[outcome] if outcome is not None else None
    kept = [r for r in runs_mod.matching(view.state.runs, session, domain, status) if run is None or r.run_id == run]
    return runs_mod.ordered(kept, first), len(kept)


def _selected(
    view: MemoryView,
    kind: str,
    domain: str | None,
    run: str | None,
    session: str | None,
    outcome: str | None,
    first: int | None,
) -> tuple[Sequence[Any], int]:
    """(the records of one projection kind that the filters keep, in the order `state` lists them,
    at least the `first` of them, as the projection holds them (lessons not yet `listed`: only a
    page of them is); how many the filters keep)."""
    if kind == "runs":
        return _runs(view, run, session, domain, outcome, first)
    records = _kept(view, kind, domain, run, session, outcome)
    return records, len(records)


def _kept(
    view: MemoryView, kind: str, domain: str | None, run: str | None, session: str | None, outcome: str | None
) -> Sequence[Any]:
    if kind == "credit":
        return [c for c in view.credit() if run is None or run in c.runs]
    records: Sequence[Any]
    if kind == "lessons":
        records = view.lessons(domain)
    elif kind == "tier1":
        records = view.tier1()
    elif kind == "facts":
        doms = [domain] if domain else sorted(view.state.knowledge.current.keys() | view.state.knowledge.closed.keys())
        records = [f for d in doms for f in view.facts(d, include_closed=True)]
    elif kind == "sessions":
        doms = [domain] if domain else sorted(view.state.sessions.by_domain)
        records = [
            s
            for d in doms
            for s in view.sessions(d)
            if (session is None or s.session_id == session)
            and (outcome is None or runs_mod.OUTCOME_OF_STATUS[runs_mod.finished_status(s.success)] == outcome)
        ]
    elif kind == "selectors":
        records = view.selectors(domain)
    elif kind == "trajectories":
        records = view.trajectories(domain)
    elif kind == "short-term":
        return view.short_terms(run, domain)
    elif kind == "patterns":
        records = view.patterns(domain)
    elif kind == "context":
        return view.context(run, domain)
    elif kind == "snapshots":
        return view.snapshots(run, domain)
    elif kind == "sitemap":
        return view.sitemap_pages(domain)
    elif kind == "scratch":
        return view.scratch_entries(run, domain)
    elif kind == "page-maps":
        return view.page_map_entries(run, domain)
    else:
        raise LedgerError(f"unknown state {kind!r}: choose from {', '.join(STATE_KINDS)}")
    if run is None:
        return records
    field = TAUGHT_BY[kind]
    return [r for r in records if getattr(r, field) == run]


@dataclass(frozen=True)
class StatePage:
    """A read of `state`: the rows (one page of them when a limit or an offset was given), the
    ledger head they were read at, and how many records the filters kept before paging (for a
    page's "51-100 of N")."""

    head: int
    rows: Sequence[StateRow]
    total: int


def state_page(
    view: MemoryView,
    kind: str,
    domain: str | None = None,
    run: str | None = None,
    session: str | None = None,
    outcome: str | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> StatePage:
    """The records of one projection kind, optionally of one domain (subdomains included), of one
    run (a per-run kind's state of that run; for lessons, facts, selectors, trajectories, patterns
    and sessions, what that run taught; the credit measured on it) and, for runs and sessions, of
    one session and one outcome; then `limit` of them from `offset` (the slice `[offset:offset +
    limit]` of the whole list). Only the page is turned into the records `state` answers: a page
    of 50 of 33,000 runs costs the filter, not 33,000 conversions."""
    check_selection(kind, session, outcome, run, limit, offset)
    end = None if limit is None else offset + limit
    records, total = _selected(view, kind, domain, run, session, outcome, end)
    page = records if end is None and not offset else records[offset:end]
    rows = listed(page) if kind in ("lessons", "tier1") else page
    return StatePage(view.head, rows, total)


def open_state(
    store: Store,
    projections_path: Path | None,
    kind: str,
    domain: str | None = None,
    as_of: int | str | None = None,
    policy: Thresholds = DEFAULT_POLICY,
    run: str | None = None,
    *,
    session: str | None = None,
    outcome: str | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> StatePage:
    """`memtape state` and `mem.state`: catch up, optionally go back in time, list a page."""
    check_selection(kind, session, outcome, run, limit, offset)  # before anything is read
    view = MemoryView.open(store, projections_path, policy, as_of=as_of, lend=True)
    return state_page(view, kind, domain, run, session, outcome, limit, offset)


@dataclass(frozen=True)
class Change:
    """One difference between two points of memory."""

    change: str  # gained | lost | promoted | demoted | used | confirmed | decayed | changed
    projection: str
    item: str
    detail: str


def _fact_label(f: Any) -> str:
    return f"{f.domain} {f.fact_type}:{f.key}={f.value}"


def _trajectories(view: MemoryView) -> dict[str, Any]:
    return {t.trajectory_id: t for t in view.trajectories()}


def _selector_key(e: Any) -> tuple[str, str, str, str]:
    return (e.domain, e.role, e.name, e.selector)


#: what `memory_diff` reads, per projection: the field (and, True, when an item there is known by
#: its inner key under any outer key: a trajectory by its id, whichever host holds it). Every
#: change it lists compares one item at `before` with the same item at `after`, so two states
#: holding only the items whose version differs (`changed_between`) give the same changes
DIFFED: dict[str, tuple[str, bool]] = {
    "lessons": ("lessons", False),
    "knowledge": ("current", False),
    "trajectories": ("by_domain", True),
    "runs": ("runs", False),
    "selectors": ("by_domain", False),
}


def memory_diff(before: MemoryView, after: MemoryView) -> list[Change]:
    """What memory gained, lost, promoted and decayed from `before` to `after` (the `DIFFED` fields),
    each projection's changes in the order of its items' keys: a state folded in this process and
    the same state decoded from its stored copy hold their items in different orders, and the same
    diff must read the same whichever a process has."""
    out: list[Change] = []
    a, b = before.state.lessons.lessons, after.state.lessons.lessons
    for lid, l in sorted(b.items()):
        old = a.get(lid)
        if old is None:
            out.append(Change("gained", "lessons", lid, f"[{l.category}] {l.lesson}"))
            continue
        if old.category != l.category:
            kind = "promoted" if l.tier < old.tier else "demoted" if l.tier > old.tier else "changed"
            out.append(Change(kind, "lessons", lid, f"{old.category} -> {l.category}: {l.lesson}"))
        if old.use_count != l.use_count:
            out.append(
                Change(
                    "used",
                    "lessons",
                    lid,
                    f"use_count {old.use_count} -> {l.use_count}, {len(l.triggered_domains)} domains",
                )
            )
    out.extend(Change("lost", "lessons", lid, l.lesson) for lid, l in sorted(a.items()) if lid not in b)
    fa = {(d, fid): f for d, fs in before.state.knowledge.current.items() for fid, f in fs.items()}
    fb = {(d, fid): f for d, fs in after.state.knowledge.current.items() for fid, f in fs.items()}
    for k, f in sorted(fb.items()):
        was = fa.get(k)
        if was is None:
            out.append(Change("gained", "facts", _fact_label(f), f"confidence {f.confidence:.3f}"))
        elif f.confidence > was.confidence:
            out.append(
                Change("confirmed", "facts", _fact_label(f), f"confidence {was.confidence:.3f} -> {f.confidence:.3f}")
            )
        elif f.confidence < was.confidence:
            out.append(
                Change("decayed", "facts", _fact_label(f), f"confidence {was.confidence:.3f} -> {f.confidence:.3f}")
            )
    out.extend(
        Change("lost", "facts", _fact_label(f), f"confidence {f.confidence:.3f}")
        for k, f in sorted(fa.items())
        if k not in fb
    )
    for proj, ia, ib in (
        ("trajectories", _trajectories(before), _trajectories(after)),
        ("runs", dict(before.state.runs.runs), dict(after.state.runs.runs)),
    ):
        for item_id, item in sorted(ib.items()):
            if item_id not in ia:
                out.append(Change("gained", proj, item_id, getattr(item, "goal", "")))
            elif proj == "runs" and ia[item_id].status != item.status:
                out.append(Change("changed", proj, item_id, f"{ia[item_id].status} -> {item.status}"))
        out.extend(
            Change("lost", proj, gone_id, getattr(gone, "goal", ""))
            for gone_id, gone in sorted(ia.items())
            if gone_id not in ib
        )
    sa = {_selector_key(e): e for e in sorted(before.selectors(), key=_selector_key)}
    for e in sorted(after.selectors(), key=_selector_key):
        key = _selector_key(e)
        earlier = sa.pop(key, None)
        label = f"{e.domain} {e.role} {e.name!r} {e.selector}"
        if earlier is None:
            out.append(Change("gained", "selectors", label, f"{e.successes} ok / {e.failures} failed"))
        elif (earlier.successes, earlier.failures) != (e.successes, e.failures):
            out.append(
                Change(
                    "changed",
                    "selectors",
                    label,
                    f"{earlier.successes}/{earlier.failures} -> {e.successes}/{e.failures} ok/failed",
                )
            )
    out.extend(Change("lost", "selectors", f"{e.domain} {e.role} {e.name!r} {e.selector}", "") for e in sa.values())
    return out


def run_end(store: Store, run_id: str) -> int | None:
    """The seq where run `run_id` ends as the ledger knows it now: its last event (its
    `run_completed` and the learning written with it, or the latest event of a run still going);
    None when no event names the run."""
    last = None
    for ev in store.read(run_id=run_id):
        last = ev.seq
    return last


def diff_point(store: Store, point: int | str, what: str = "diff point") -> int:
    """A point of the log as a person names it in a diff: a seq, an ISO time (recorded time), or
    a run id (the end of that run, so that a diff up to a run shows what the run taught)."""
    if isinstance(point, str) and not (point.strip().isascii() and point.strip().isdigit()):
        end = run_end(store, point.strip())
        if end is not None:
            return end
        try:
            return resolve_seq(store, point, what)
        except LedgerError:
            raise LedgerError(f"{what} {point.strip()[:40]!r}: expected a seq, an ISO time or a run id") from None
    return resolve_seq(store, point, what)


def diff_between(
    store: Store,
    projections_path: Path | None,
    from_seq: int | str,
    to_seq: int | str,
    policy: Thresholds = DEFAULT_POLICY,
) -> list[Change]:
    """`memtape diff` and `mem.diff`: memory at `from_seq` against memory at `to_seq` (`from_seq`
    not after `to_seq`), each a seq, an ISO time or a run id (`diff_point`); anything else (an
    empty text, a negative seq, another type) is refused in one line, on every face alike."""
    for name, point in (("start", from_seq), ("end", to_seq)):
        if (
            isinstance(point, bool)
            or not isinstance(point, (int, str))
            or (isinstance(point, str) and not point.strip())
        ):
            raise LedgerError(f"{name} must be a seq, an ISO time or a run id, got {point!r:.60}")
        check_storable(point, name)
        if isinstance(point, int) and point < 0:
            raise LedgerError(f"{name} must be a seq >= 0, got {point}")
    start, end = diff_point(store, from_seq, "diff start"), diff_point(store, to_seq, "diff end")
    if start > end:
        raise LedgerError(
            f"the diff starts at {from_seq} (seq {start}), after its end at {to_seq} (seq {end}): "
            "a diff runs forward; swap them"
        )
    if projections_path is not None:
        changed = changed_between(store, Path(projections_path), policy, start, end, DIFFED)
        if changed is not None:
            return memory_diff(MemoryView(changed[0], policy), MemoryView(changed[1], policy))
    from_seq, to_seq = start, end
    view = MemoryView.open(store, projections_path, policy, lend=True)  # read only: the kept states serve
    return memory_diff(
        view.as_of(from_seq) if projections_path else MemoryView.open(store, None, policy, from_seq),
        view.as_of(to_seq) if projections_path else MemoryView.open(store, None, policy, to_seq),
    )
