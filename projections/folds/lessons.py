"""Lessons (seed 001): Tier 1 / Tier 2 lessons, their use counts and provenance.

`apply` is the fold; it updates the state in place and returns it. It never applies a policy by itself: dedup and
promotion arrive as their own decision events (`lesson_deduplicated`,
`lesson_promoted`); a person's `lesson_pinned` moves a lesson to Tier 1 the same way. A
recall event counts as a use of each lesson it counts (`counted`: the lessons matched on their error pattern or domain scope, never a command-only match) —
use_count + 1 (saturating at 2^63-1), last_used, the event's domain added to triggered_domains. A recall on
error inside a run leaves its uncredited lessons pending: they count through the run's `lessons_used`,
written at its end only where the decisions after the recall cleared the failure (seed 001 counted every
recall; a tip recalled on an obstacle it did not clear is no use).

Two domains, never confused: `scope_domain` is the site a lesson applies to
(None = universal); an event's `domain` is where it happened, and feeds
`triggered_domains`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from memtape.ledger.envelope import RecordedEvent, constructor
from memtape.ledger.field_rules import INT64_MAX
from memtape.projections.text import add_event_id, build, covered_runs, domain_matches, evolve, normalize_text

TIER1_CATEGORIES = ("tool_fallback", "best_practice")
#: the events whose `counted` lessons each gain a use (a recall, or the outcome of a run's recall)
RECALL_USES = ("error_recall", "domain_recall", "lessons_used")
#: the events of one lesson's own life (the index of mentions files them under the lesson)
LIFE_TYPES = (
    "lesson_seeded",
    "lesson_recorded",
    "lesson_deduplicated",
    "lesson_promoted",
    "lesson_pinned",
    "lesson_unpinned",
    "lesson_demoted",
)
TYPES = (*LIFE_TYPES, "lessons_pruned", *RECALL_USES, "subject_forgotten")


@dataclass(frozen=True, slots=True)
class LessonEntry:
    lesson_id: str
    lesson: str
    category: str
    failed_command: str | None
    error_pattern: str | None
    scope_domain: str | None
    use_count: int
    created_at: str
    last_used: str
    source: str
    triggered_domains: tuple[str, ...]
    event_ids: tuple[str, ...]
    taught_by_run: str | None = None
    taught_at_step: int | None = None
    #: 0, 1, 2... in the order lessons were first recorded: the last tie-break of every ranking
    recorded_order: int = 0

    @property
    def tier(self) -> int:
        return 1 if self.category in TIER1_CATEGORIES else 2


_lesson = constructor(LessonEntry)


def listing_order(lesson: LessonEntry) -> tuple[int, int, int]:
    """Where a lesson sits in a listing of every lesson: Tier 1 first, most used first, then
    first recorded."""
    return (lesson.tier, -lesson.use_count, lesson.recorded_order)


#: what a recall matched of a lesson, and the score it ranks by: recall on error (the error pattern
#: and the failed command, the pattern alone, the command alone) and recall on domain (a scope that is
#: the host itself, a parent domain of it)
MatchKind = Literal["pattern+command", "pattern", "command", "host", "domain"]
MATCH_SCORES: dict[str, float] = {"pattern+command": 5.0, "pattern": 3.0, "command": 2.0, "host": 2.0, "domain": 1.0}


@dataclass(frozen=True, slots=True)
class Match:
    """A lesson a recall offers, what of it matched and its score (`MATCH_SCORES`)."""

    lesson: LessonEntry
    matched: MatchKind

    @property
    def score(self) -> float:
        return MATCH_SCORES[self.matched]

    @property
    def counts(self) -> bool:
        """A recall counts as a use only where it matched the lesson's error pattern or domain scope."""
        return self.matched != "command"


def ranked_matches(matches: Iterable[Match]) -> list[Match]:
    """Recall order: score, use_count, most recently used, then first recorded."""
    out = sorted(matches, key=lambda m: m.lesson.recorded_order)
    out.sort(key=lambda m: (m.score, m.lesson.use_count, m.lesson.last_used), reverse=True)
    return out


def recall_payload(
    matches: Sequence[Match], worth: Callable[[str], int | None] | None = None, *, pending: bool = False
) -> dict[str, Any]:
    """What a recall event records of what it offered: the lessons, and those it counts as a use
    (`Match.counts`; and where `worth` gives a lesson's measured credit, only a positive one: a
    lesson `memtape credit` found changes nothing, or costs, is offered but not counted).

    `pending` (a recall on error inside a run): a lesson without credit is not counted yet: its use
    waits for the run's outcome (`pending_ids`, counted by `lessons_used` where the decisions that
    followed cleared the failure); a lesson whose credit is positive counts now."""
    signs = {m.lesson.lesson_id: None if worth is None else worth(m.lesson.lesson_id) for m in matches if m.counts}
    made: dict[str, Any] = {
        "matched": len(matches),
        "lessons": [m.lesson.lesson for m in matches],
        "lesson_ids": [m.lesson.lesson_id for m in matches],
        "counted_ids": [lid for lid, sign in signs.items() if (sign is None and not pending) or (sign or 0) > 0],
    }
    if pending:
        made["pending_ids"] = [lid for lid, sign in signs.items() if sign is None]
    return made


def counted(data: dict[str, Any]) -> list[str]:
    """The lessons a recall event counts as a use, each once: its `counted_ids`, or every listed
    lesson in a recall written before the field existed."""
    ids = data.get("counted_ids")
    if ids is None:
        ids = data.get("lesson_ids") or ()
    return list(dict.fromkeys(ids))


def tier1_order(lesson: LessonEntry) -> tuple[int, bool, int]:
    """Seed 001's Tier 1 order: most used first; seeds before learned only on equal counts;
    then the order the lessons were first recorded (never a hash)."""
    return (-lesson.use_count, lesson.source != "seed", lesson.recorded_order)


def tier1(lessons: Iterable[LessonEntry], cap: int) -> list[LessonEntry]:
    """The Tier 1 lessons (tool_fallback, best_practice) in `tier1_order`, at most `cap`."""
    return sorted((l for l in lessons if l.category in TIER1_CATEGORIES), key=tier1_order)[:cap]


def ranked(lessons: Iterable[LessonEntry]) -> list[LessonEntry]:
    """Recall order among equal matches: use_count, most recently used, then first recorded."""
    out = sorted(lessons, key=lambda l: l.recorded_order)
    out.sort(key=lambda l: (l.use_count, l.last_used), reverse=True)  # stable: recorded order breaks ties
    return out


@dataclass
class LessonsState:
    lessons: dict[str, LessonEntry] = field(default_factory=dict)
    #: dedup key -> lesson_id (derived from `lessons`, kept for O(1) dedup)
    by_key: dict[str, str] = field(default_factory=dict)
    #: the seed lessons were written once (they are not re-seeded after a forget)
    seeded: bool = False
    #: lessons recorded so far (the next lesson's recorded_order)
    recorded: int = 0


def empty() -> LessonsState:
    return LessonsState()


def dedup_key(failed_command: str | None, error_pattern: str | None, scope_domain: str | None, lesson: str) -> str:
    """(failed_command, error_pattern) when either is set, else (scope domain, normalized text)."""
    fc = (failed_command or "").strip().lower()
    ep = (error_pattern or "").strip().lower()
    if fc or ep:
        return orjson.dumps(["cmd", fc, ep]).decode()
    return orjson.dumps(["text", (scope_domain or "").lower(), normalize_text(lesson)]).decode()


def lesson_id_for(
    failed_command: str | None, error_pattern: str | None, scope_domain: str | None, lesson_text: str
) -> str:
    """The deterministic id of a lesson: sha256 of its dedup key."""
    key = dedup_key(failed_command, error_pattern, scope_domain, lesson_text)
    return "lsn_" + hashlib.sha256(key.encode()).hexdigest()[:16]


def key_in(data: dict[str, Any]) -> str:
    """The dedup key of a lesson payload (`lesson_recorded`, `lesson_seeded`, ...)."""
    return dedup_key(data.get("failed_command"), data.get("error_pattern"), data.get("scope_domain"), data["lesson"])


def lesson_id_in(data: dict[str, Any]) -> str:
    """The lesson a lesson payload names: its `lesson_id`, or when empty the one its dedup key gives."""
    return str(
        data.get("lesson_id")
        or lesson_id_for(
            data.get("failed_command"), data.get("error_pattern"), data.get("scope_domain"), str(data.get("lesson", ""))
        )
    )


def key_of(lesson: LessonEntry) -> str:
    return dedup_key(lesson.failed_command, lesson.error_pattern, lesson.scope_domain, lesson.lesson)


def _domains(initial: list[str] | tuple[str, ...], extra: str | None) -> tuple[str, ...]:
    out: list[str] = []
    for d in [*initial, extra]:
        if d and d not in out:
            out.append(d)
    return tuple(out)


def new_lesson(
    data: dict[str, Any],
    domain: str | None,
    occurred: str,
    event_id: str,
    source: str,
    run_id: str | None,
    step: int | None,
) -> LessonEntry:
    """The lesson a `lesson_recorded`/`lesson_seeded` payload creates."""
    lid = lesson_id_in(data)
    src = data.get("source") or source or "learned"
    use_count = int(data["use_count"]) if data.get("use_count") is not None else (0 if src == "seed" else 1)
    return _lesson(
        lesson_id=lid,
        lesson=data["lesson"],
        category=data["category"],
        failed_command=data.get("failed_command"),
        error_pattern=data.get("error_pattern"),
        scope_domain=data.get("scope_domain"),
        use_count=use_count,
        created_at=data.get("created_at") or occurred,
        last_used=data.get("last_used") or occurred,
        source=src,
        triggered_domains=_domains(data.get("triggered_domains") or [], domain),
        event_ids=(event_id,) if event_id else (),
        taught_by_run=run_id,
        taught_at_step=step,
    )


def used(lesson: LessonEntry, domain: str | None, when: str, event_id: str) -> LessonEntry:
    """One more use: use_count + 1, last_used, the domain where it happened."""
    tds = lesson.triggered_domains
    if domain and domain not in tds:
        tds = (*tds, domain)
    return evolve(
        lesson,
        use_count=min(lesson.use_count + 1, INT64_MAX),
        last_used=when or lesson.last_used,
        triggered_domains=tds,
        event_ids=add_event_id(lesson.event_ids, event_id) if event_id else lesson.event_ids,
    )


def _add(state: LessonsState, lesson: LessonEntry) -> None:
    """A new lesson, numbered in the order lessons are first recorded."""
    lesson = evolve(lesson, recorded_order=state.recorded)
    state.recorded += 1
    state.lessons[lesson.lesson_id] = lesson
    state.by_key[key_of(lesson)] = lesson.lesson_id


def _remove(state: LessonsState, lesson_id: str) -> None:
    lesson = state.lessons.pop(lesson_id, None)
    if lesson is not None:
        key = key_of(lesson)
        if state.by_key.get(key) == lesson_id:
            del state.by_key[key]


def apply(state: LessonsState, ev: RecordedEvent, policy: Any = None) -> LessonsState:
    """Fold one event into the lessons state (updates `state` in place and returns it)."""
    t, d = ev.type, ev.data
    if t == "lesson_recorded" or t == "lesson_seeded":
        if t == "lesson_seeded":
            state.seeded = True
        key = key_in(d)
        if key in state.by_key:
            return state  # a duplicate observation: only a lesson_deduplicated decision changes it
        lesson = new_lesson(
            d, ev.domain, ev.occurred_at, ev.id, "seed" if t == "lesson_seeded" else "learned", ev.run_id, ev.step
        )
        if lesson.lesson_id not in state.lessons:
            _add(state, lesson)
    elif t == "lesson_deduplicated":
        lid = d["lesson_id"]
        if lid not in state.lessons:
            lid = state.by_key.get(key_in(d), "")
        onto = state.lessons.get(lid)
        if onto is None:  # deduplicated onto a lesson forgotten meanwhile: it comes back
            _add(
                state,
                new_lesson(
                    {**d, "use_count": d.get("new_use_count", 1)},
                    ev.domain,
                    ev.occurred_at,
                    ev.id,
                    "learned",
                    ev.run_id,
                    ev.step,
                ),
            )
        else:
            state.lessons[lid] = used(onto, ev.domain, ev.occurred_at, ev.id)
    elif t in RECALL_USES:
        when = d.get("recalled_at") or ev.occurred_at  # an outcome's use happened at its recall
        for lid in counted(d):
            recalled = state.lessons.get(lid)
            if recalled is not None:
                state.lessons[lid] = used(recalled, ev.domain, when, ev.id)
    elif t in ("lesson_promoted", "lesson_pinned", "lesson_unpinned", "lesson_demoted"):
        promoted = state.lessons.get(d["lesson_id"])
        if promoted is not None:
            state.lessons[promoted.lesson_id] = evolve(
                promoted,
                category=d.get("to_category", "best_practice"),
                event_ids=add_event_id(promoted.event_ids, ev.id),
            )
    elif t == "lessons_pruned":
        for lid in d.get("lesson_ids") or ():
            _remove(state, lid)
    elif t == "subject_forgotten":
        forget(state, d["subject_kind"], d["subject"], covered_runs(d))
    return state


#: how projections/cache/intervals.py files this state (field -> depth)
LAYOUT = {"lessons": 1, "by_key": 1, "seeded": 0, "recorded": 0}


def touched(state: LessonsState, ev: RecordedEvent) -> list[tuple[str, ...]] | None:
    """The paths `apply` may change for this event (None: any)."""
    t, d = ev.type, ev.data
    if t == "lesson_recorded" or t == "lesson_seeded" or t == "lesson_deduplicated":
        key = key_in(d)
        lid = lesson_id_in(d)
        return [("lessons", lid), ("lessons", state.by_key.get(key, lid)), ("by_key", key), ("seeded",), ("recorded",)]
    if t in RECALL_USES:
        return [("lessons", lid) for lid in counted(d)]
    if t in ("lesson_promoted", "lesson_pinned", "lesson_unpinned", "lesson_demoted"):
        return [("lessons", d["lesson_id"])]
    if t == "lessons_pruned":
        ids = d.get("lesson_ids") or ()
        return [
            *(("lessons", lid) for lid in ids),
            *(("by_key", key_of(state.lessons[lid])) for lid in ids if lid in state.lessons),
        ]
    return None


def facet(field: str, item: Any) -> str | None:
    """Tier 1 lessons are looked up on their own (audits show Tier 1 at every step)."""
    return "tier1" if field == "lessons" and item.category in TIER1_CATEGORIES else None


def forget(state: LessonsState, kind: str, subject: str, runs: set[str] | frozenset[str] = frozenset()) -> None:
    """Remove a subject: a lesson; a domain's scoped lessons (and the domain from every
    lesson's triggered_domains); the provenance of every run the subject covers (`runs`)."""
    for lid, lesson in list(state.lessons.items()):
        if lesson.taught_by_run is not None and lesson.taught_by_run in runs:
            state.lessons[lid] = evolve(lesson, taught_by_run=None, taught_at_step=None)
    for lid, lesson in list(state.lessons.items()):
        if removed_by(kind, subject, lid, lesson.scope_domain):
            _remove(state, lid)
        elif kind == "domain" and any(domain_matches(td, subject) for td in lesson.triggered_domains):
            state.lessons[lid] = evolve(
                lesson,
                triggered_domains=tuple(td for td in lesson.triggered_domains if not domain_matches(td, subject)),
            )


def removed_by(kind: str, subject: str, lesson_id: str | None, scope_domain: str | None) -> bool:
    """Does forgetting `subject` (of `kind`) remove this lesson? The lesson itself, or a lesson scoped
    to the forgotten domain or one of its subdomains; a universal lesson survives the forgetting of
    a place it was used. The one rule: this fold and analytics' hiding both ask it."""
    if kind == "lesson":
        return lesson_id is not None and lesson_id == subject
    return kind == "domain" and domain_matches(scope_domain, subject)


def decode(raw: dict[str, Any]) -> LessonsState:
    lessons = {
        lid: build(
            LessonEntry, row, triggered_domains=tuple(row["triggered_domains"]), event_ids=tuple(row["event_ids"])
        )
        for lid, row in raw.get("lessons", {}).items()
    }
    by_key = raw.get("by_key")
    if by_key is None or len(by_key) != len(lessons):
        by_key = {key_of(lesson): lid for lid, lesson in lessons.items()}
    recorded = int(raw.get("recorded", max((l.recorded_order + 1 for l in lessons.values()), default=0)))
    return LessonsState(lessons=lessons, by_key=dict(by_key), seeded=bool(raw.get("seeded")), recorded=recorded)


def tables(state: LessonsState) -> dict[str, list[dict[str, Any]]]:
    rows = []
    for lesson in state.lessons.values():
        rows.append(
            {
                "lesson_id": lesson.lesson_id,
                "lesson": lesson.lesson,
                "category": lesson.category,
                "tier": lesson.tier,
                "failed_command": lesson.failed_command,
                "error_pattern": lesson.error_pattern,
                "scope_domain": lesson.scope_domain,
                "use_count": lesson.use_count,
                "created_at": lesson.created_at,
                "last_used": lesson.last_used,
                "source": lesson.source,
                "triggered_domains": orjson.dumps(lesson.triggered_domains).decode(),
                "event_ids": orjson.dumps(lesson.event_ids).decode(),
                "taught_by_run": lesson.taught_by_run,
                "taught_at_step": lesson.taught_at_step,
                "recorded_order": lesson.recorded_order,
            }
        )
    return {"lessons": rows}
