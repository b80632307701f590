"""Forgetting a subject: a domain, a run, a session, a lesson or one fact (by its id).

The ledger is append-only, so forgetting is itself an event
(`subject_forgotten`): every projection folds it by dropping the subject, so
memory, exports, reports and audit answers built after it no longer hold it.
What the log itself keeps is on purpose: the earlier events stay (the chain
still verifies, `memtape events` still prints them), and an as-of view at a
seq before the forget, folded from the log, still shows the subject.

projections.db is disposable but physical, so `forget` also scrubs it: the
periodic snapshots taken before the forget (which still hold the subject) are
dropped — and `projections.cache.materialize` never takes a snapshot before the
latest forget again — and the file is vacuumed and its WAL truncated, so the
deleted rows leave no bytes behind in free pages or old WAL frames. The
analytics mirror beside it (analytics.duckdb) is deleted outright: the next
analytics answer rebuilds it without the subject.

Usage::

    result = forget(store, "domain", "shop.test", reason="user asked",
                    projections_path=Path(".agent-memory/projections.db"))
    print(result.seq, result.removed)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from memtape.ledger import location
from memtape.ledger.envelope import NewEvent, RecordedEvent
from memtape.ledger.errors import LedgerError, UnknownItem
from memtape.ledger.events import SubjectForgotten
from memtape.ledger.field_rules import check_domain
from memtape.ledger.store import Store
from memtape.projections.cache.db import lock, writable
from memtape.projections.cache.materialize import load_state
from memtape.projections.folds import FOLDS, knowledge
from memtape.projections.folds import lessons as lessons_projection
from memtape.projections.folds.runs import covered
from memtape.projections.folds.state import PROJECTIONS, MemoryState
from memtape.projections.parameters import DEFAULT_POLICY, Thresholds
from memtape.projections.text import domain_matches
from memtape.projections.writer import MemoryWriter

KINDS = ("domain", "run", "session", "lesson", "fact")


@dataclass
class ForgetResult:
    kind: str
    subject: str
    seq: int
    #: readable table -> rows the forget removed from memory
    removed: dict[str, int] = field(default_factory=dict)
    snapshots_dropped: int = 0
    projections_scrubbed: bool = False
    #: the analytics mirror beside projections.db was there and is gone
    mirror_dropped: bool = False

    @property
    def total_removed(self) -> int:
        return sum(self.removed.values())


def normalize_subject(kind: str, subject: str) -> str:
    """The subject as projections match it (domains are host names: lower case, no trailing dot)."""
    if kind not in KINDS:
        raise LedgerError(f"unknown subject kind {kind!r}: one of {', '.join(KINDS)}")
    text = (subject or "").strip()
    if kind == "domain":
        try:
            text = check_domain(text.rstrip(".")) or ""
        except ValueError as exc:
            raise LedgerError(str(exc).encode("unicode_escape").decode("ascii")) from None
    if not text:
        raise LedgerError(f"the {kind} to forget must not be empty")
    if any(ord(c) < 32 for c in text):
        raise LedgerError(f"the {kind} to forget must not contain control characters")
    return text


def holds(store: Store, state: MemoryState, kind: str, subject: str) -> bool:
    """Whether memory knows the subject: a lesson by its id (held, or named by a lesson event of
    the log: a pruned lesson's lines are still in exports), a run by its id, a session by one of
    its runs, a domain (or a subdomain) by a run started there, a lesson scoped to it, or any event
    the log files under it (facts, selectors, recalls: read until the first), a fact by its id
    (held, current or closed, or observed by an event of the log)."""
    if kind == "fact":
        return (
            any(subject in facts for facts in state.knowledge.current.values())
            or any(subject == f.fact_id for closed in state.knowledge.closed.values() for f in closed)
            or any(
                knowledge.fact_id_for(ev.domain or "", ev.data["fact_type"], ev.data["key"], ev.data["value"])
                == subject
                for ev in store.read(types=["fact_observed"])
            )
        )
    if kind == "lesson":
        return subject in state.lessons.lessons or any(
            subject in ev.payload_json for ev in store.read(types=lessons_projection.TYPES)
        )
    runs = state.runs.runs.values()
    if any(covered(kind, subject, r.run_id, r.session_id, r.domain) for r in runs):
        return True
    if kind != "domain":
        return False
    if any(domain_matches(les.scope_domain, subject) for les in state.lessons.lessons.values()):
        return True
    return any(domain_matches(ev.domain, subject) for ev in store.read())


def answer_forgotten(response: Any, forgets: Iterable[RecordedEvent]) -> RecordedEvent | None:
    """The first of `forgets` (`subject_forgotten` events recorded after an answer was kept for an
    idempotency key) whose subject the answer carries: its id, host or one of the runs it took
    along appears anywhere in it. Such an answer is never given again (`Memory.once`)."""
    text = orjson.dumps(response, default=str).decode().lower()
    for ev in forgets:
        names = (ev.data["subject"], *(ev.data.get("run_ids") or ()))
        if any(name.lower() in text for name in names):
            return ev
    return None


def _row_counts(state: MemoryState) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name in PROJECTIONS:
        for table, rows in FOLDS[name].tables(getattr(state, name)).items():
            counts[table] = counts.get(table, 0) + len(rows)
    return counts


def forget(
    store: Store,
    kind: str,
    subject: str,
    reason: str | None = None,
    *,
    projections_path: Path | None = None,
    policy: Thresholds = DEFAULT_POLICY,
    force: bool = False,
) -> ForgetResult:
    """Append `subject_forgotten` and scrub projections.db (when given) of the subject.

    A subject memory does not hold (a typo) is refused with UnknownItem, since the event would
    stay in the log for good; `force` records it anyway. Appends through the policy writer, so
    any decision the forget causes lands in the same transaction."""
    subject = normalize_subject(kind, subject)
    state = load_state(store, projections_path, policy)
    if not force and not holds(store, state, kind, subject):
        raise UnknownItem(
            f"no {kind} {subject!r} in memory, so nothing to forget; nothing was written "
            "(--force, or force=True, records the forget anyway, for a subject an import may bring later)"
        )
    before = _row_counts(state)
    runs = sorted(
        r.run_id
        for r in state.runs.runs.values()
        if kind != "run" and covered(kind, subject, r.run_id, r.session_id, r.domain)
    )
    recorded = MemoryWriter(store, policy, projections_path).append(
        [NewEvent(SubjectForgotten(subject_kind=kind, subject=subject, reason=reason or None, run_ids=runs))]  # type: ignore[arg-type]
    )
    seq = next(ev.seq for ev in recorded if ev.type == "subject_forgotten")
    after = _row_counts(load_state(store, projections_path, policy))
    result = ForgetResult(
        kind, subject, seq, removed={t: n - after.get(t, 0) for t, n in before.items() if n > after.get(t, 0)}
    )
    if projections_path is not None:
        result.snapshots_dropped = scrub_projections(Path(projections_path), seq)
        result.projections_scrubbed = True
        result.mirror_dropped = drop_mirror(Path(projections_path))
    return result


def drop_mirror(projections: Path) -> bool:
    """Delete the analytics mirror beside `projections` (its WAL, stamp and half-built copies too),
    so no byte of a forgotten subject waits for the next analytics answer to rebuild it. True when
    there was one. Every file is tried: one that cannot go (a directory in its place) is named
    after the others went, in one error."""
    found = False
    stuck = []
    for path in location.mirror_files(projections):
        try:
            path.unlink()
            found = True
        except FileNotFoundError:
            pass
        except OSError as exc:
            stuck.append(f"{path} ({exc.strerror})")
    if stuck:
        raise LedgerError(
            f"forgotten, but the analytics mirror could not be deleted: {', '.join(stuck)}; "
            "move it out of the memory directory"
        )
    return found


def scrub_projections(path: Path, forget_seq: int) -> int:
    """Drop the snapshots taken before `forget_seq` (and those pointing at them), then vacuum
    projections.db and truncate its WAL; returns how many snapshots were dropped."""
    with lock, writable(path, vacuum=True) as cache:
        return cache.delete("_snapshots", "seq < ? OR same_as < ?", (forget_seq, forget_seq))
