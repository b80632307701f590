"""Pinning a lesson into Tier 1: a person's explicit command, recorded with who and why.

Tier 1 lessons go into every system prompt, so their text may come only from the seeds, from
promotion (the policy's decision over uses on several sites) or from a person who says so
(`memtape lessons pin LESSON --by NAME --reason TEXT`). An agent's or a page's call records
error_recovery and site_specific lessons only (`projections.recording` refuses the Tier 1 categories).

Usage::

    recorded = pin(store, "lsn_0123456789abcdef", pinned_by="ada", reason="reviewed",
                   projections_path=Path(".agent-memory/projections.db"))
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from memtape.ledger.envelope import NewEvent, RecordedEvent
from memtape.ledger.errors import InvalidEvent, UnknownItem
from memtape.ledger.events import LessonPinned, LessonUnpinned
from memtape.ledger.store import Store
from memtape.projections.cache.materialize import load_state
from memtape.projections.decisions import DECISION_TYPES
from memtape.projections.folds.lessons import TIER1_CATEGORIES
from memtape.projections.parameters import DEFAULT_POLICY, Thresholds
from memtape.projections.writer import MemoryWriter

#: the categories a caller may record; the others (`TIER1_CATEGORIES`) come only from seeds, promotion or a pin
CALLER_CATEGORIES = ("error_recovery", "site_specific")


def tier1_refusal(category: str) -> str | None:
    """The one-line refusal of a Tier 1 category from an agent's call (None: the category is a caller's)."""
    if category not in TIER1_CATEGORIES:
        return None
    return (
        f"category {category!r} is Tier 1 (it goes into every system prompt): a caller records "
        f"{' or '.join(CALLER_CATEGORIES)}; a person puts a lesson in Tier 1 with "
        "`memtape lessons pin LESSON --by NAME --reason TEXT`"
    )


#: events that put text into Tier 1 by themselves (a lesson_recorded does when its category is Tier 1)
TIER1_WRITES = ("lesson_seeded", "lesson_promoted", "lesson_pinned")

#: events only one door of memtape writes, never a caller's lines (append with or without --raw,
#: HTTP, MCP, import): a pin is a person's command, an answer is what the server itself answered
#: (a planted one would answer another client's Idempotency-Key and write nothing)
DOOR_ONLY = {
    "lesson_pinned": "a caller cannot write Tier 1 text; a person pins a lesson with "
    "`memtape lessons pin LESSON --by NAME --reason TEXT`",
    "request_answered": "only the server records the answer it gave to an Idempotency-Key",
}


def door_refusal(events: Sequence[NewEvent]) -> str | None:
    """Why lines given as a log (`memtape append --raw`, an import) cannot be stored (one line), or
    None: they hold an event only its own door writes (`DOOR_ONLY`)."""
    for i, ev in enumerate(events, 1):
        if ev.type in DOOR_ONLY:
            return f"event {i} ({ev.type}): {DOOR_ONLY[ev.type]}; nothing was written"
    return None


def pinner_refusal(pinned_by: str) -> str | None:
    """Why `pinned_by` cannot name who pinned (one line), or None: a name is one line, as every
    explanation of the lesson shows it (a second line would read as something else said)."""
    if not pinned_by.strip():
        return "pinned_by: say who pins the lesson (empty)"
    if pinned_by.splitlines() != [pinned_by]:
        return "pinned_by: a name is one line (no line breaks)"
    return None


def caller_refusal(events: Sequence[NewEvent]) -> str | None:
    """Why a caller's events as lines (`memtape append`, HTTP `POST /events`) cannot be stored (one
    line), or None. None may write Tier 1 text (a seed, a promotion, a pin, or a lesson recorded in a
    Tier 1 category), nor any other decision of the policy, which makes its decisions itself (a log
    holding one no policy made would diverge in every experiment), nor what only one door writes."""
    refusal = door_refusal(events)
    if refusal is not None:
        return refusal
    for i, ev in enumerate(events, 1):
        category = getattr(ev.payload, "category", None) if ev.type == "lesson_recorded" else None
        if ev.type == "lesson_unpinned":
            return (
                f"event {i} (lesson_unpinned): only a person takes a lesson out of Tier 1, "
                "with `memtape lessons unpin LESSON --by NAME --reason TEXT`"
            )
        if ev.type in TIER1_WRITES or (category is not None and tier1_refusal(category)):
            return (
                f"event {i} ({ev.type}): a caller cannot write Tier 1 text (every system prompt); "
                "a person pins a lesson with `memtape lessons pin LESSON --by NAME --reason TEXT`"
            )
        if ev.type in DECISION_TYPES:
            return (
                f"event {i}: {ev.type} is a decision of the memory policy, which makes it itself; "
                "append observations (`memtape append --raw` records a log as given)"
            )
    return None


def pin(
    store: Store,
    lesson_id: str,
    *,
    pinned_by: str,
    reason: str,
    category: str = "best_practice",
    projections_path: Path | None = None,
    policy: Thresholds = DEFAULT_POLICY,
) -> RecordedEvent:
    """Append `lesson_pinned` for `lesson_id` (which memory must hold: the writer checks it again
    inside its transaction) and return it."""
    refusal = pinner_refusal(pinned_by)
    if refusal is not None:
        raise InvalidEvent(refusal)
    if not reason.strip():
        raise InvalidEvent("reason: say why (empty)")
    if category not in TIER1_CATEGORIES:
        raise InvalidEvent(f"category {category!r}: a pin puts a lesson in Tier 1 ({', '.join(TIER1_CATEGORIES)})")
    state = load_state(store, projections_path, policy)
    lesson = state.lessons.lessons.get(lesson_id)
    if lesson is None:
        raise UnknownItem(f"no lesson {lesson_id!r} in memory (list them with `memtape state lessons`)")
    if lesson.category == category:
        raise InvalidEvent(f"lesson {lesson_id!r} is already {category} (Tier 1): nothing to pin")
    event = NewEvent(
        LessonPinned.model_validate(
            {
                "lesson_id": lesson_id,
                "pinned_by": pinned_by,
                "reason": reason,
                "from_category": lesson.category,
                "to_category": category,
            }
        )
    )
    recorded = MemoryWriter(store, policy, projections_path).append([event])
    return next(ev for ev in recorded if ev.type == "lesson_pinned")


def unpin(
    store: Store,
    lesson_id: str,
    *,
    unpinned_by: str,
    reason: str,
    projections_path: Path | None = None,
    policy: Thresholds = DEFAULT_POLICY,
) -> RecordedEvent:
    """Append `lesson_unpinned` for `lesson_id`, a lesson in Tier 1 (a seed, a promoted or a pinned
    lesson), and return it: the lesson stays in memory as Tier 2 (error_recovery), recalled on its error."""
    for what, text in (("unpinned_by", unpinned_by), ("reason", reason)):
        if not text.strip():
            raise InvalidEvent(f"{what}: say {'who unpins the lesson' if what == 'unpinned_by' else 'why'} (empty)")
    state = load_state(store, projections_path, policy)
    lesson = state.lessons.lessons.get(lesson_id)
    if lesson is None:
        raise UnknownItem(f"no lesson {lesson_id!r} in memory (list them with `memtape state lessons`)")
    if lesson.category not in TIER1_CATEGORIES:
        raise InvalidEvent(f"lesson {lesson_id!r} is not in Tier 1 ({lesson.category}): nothing to unpin")
    event = NewEvent(
        LessonUnpinned.model_validate(
            {
                "lesson_id": lesson_id,
                "unpinned_by": unpinned_by,
                "reason": reason,
                "from_category": lesson.category,
            }
        )
    )
    recorded = MemoryWriter(store, policy, projections_path).append([event])
    return next(ev for ev in recorded if ev.type == "lesson_unpinned")
