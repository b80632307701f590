"""The policy step: `decide`, the pure function from (state, new observation) to the decision
events it causes under the memory's parameters (`parameters.Policy`), and `on_open`, the
decisions when memory is opened for a run.

Observations (what the agent saw or did) are always appended as given; the
decisions follow them in the same transaction (see writer.py). The folds in
the projection modules never apply a policy by themselves: a second
`lesson_recorded` with an existing dedup key changes nothing until the
`lesson_deduplicated` decision says so, and a lesson changes tier only through
`lesson_promoted`. Experiments therefore replay the observations under another
`Thresholds` by calling `decide` again and folding what it returns.

A recall counts as a use where it matched a lesson's error pattern or domain
scope: the fold of `error_recall` / `domain_recall` (and of `lessons_used`, the
outcome of a run's recall on error) adds 1 to the use_count of each lesson the
event counts (`lessons.counted`), sets last_used and adds the event's domain to
triggered_domains, so `decide` evaluates promotion on those events too (a
command-only match never promotes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memtape.ledger.envelope import NewEvent
from memtape.ledger.events import (
    FactContradicted,
    FactsPruned,
    LessonDeduplicated,
    LessonDemoted,
    LessonPromoted,
    LessonsPruned,
    PatternsPruned,
    SeedLesson,
    TrajectoriesExpired,
)
from memtape.projections.folds import credit as credit_fold
from memtape.projections.folds import patterns as patterns_mod
from memtape.projections.folds.lessons import RECALL_USES, LessonEntry, counted, dedup_key, key_of, new_lesson, used
from memtape.projections.folds.state import MemoryState
from memtape.projections.folds.trajectories import expired
from memtape.projections.parameters import DEFAULT_POLICY, Thresholds
from memtape.projections.seeds import seed_lessons
from memtape.projections.text import instruction_like, older_than

#: event types that are decisions of the policy step (everything else is an observation)
DECISION_TYPES = frozenset(
    {
        "lesson_deduplicated",
        "lesson_promoted",
        "lesson_demoted",
        "lessons_pruned",
        "fact_contradicted",
        "facts_pruned",
        "trajectories_expired",
        "lesson_seeded",
        "patterns_pruned",
    }
)


def promotable(lesson: LessonEntry, policy: Thresholds) -> bool:
    """Seed 001's gate: error_recovery, use_count ≥ 5, ≥ 3 distinct domains, no scope domain; and
    text that reads as a lesson, not as instructions to the model (`instruction_like`): recorded
    by a caller on enough sites, such text would otherwise reach every system prompt."""
    return (
        lesson.category == "error_recovery"
        and lesson.scope_domain is None
        and lesson.use_count >= policy.promotion_min_uses
        and len(set(lesson.triggered_domains)) >= policy.promotion_min_domains
        and instruction_like(lesson.lesson) is None
    )


def discredited(state: MemoryState, lesson_id: str) -> bool:
    """Whether a lesson's measured credit is negative (`memtape credit`): it never enters Tier 1."""
    found = credit_fold.item_credit(state.credit, lesson_id)
    return found is not None and found.credit < 0


def _demotion(state: MemoryState, new: NewEvent, data: dict[str, Any]) -> list[NewEvent]:
    """A learned Tier 1 lesson whose credit this `item_credited` turns negative leaves Tier 1."""
    lesson = state.lessons.lessons.get(data["item"])
    if lesson is None or lesson.tier != 1 or lesson.source == "seed" or credit_fold.sign_with(state.credit, data) >= 0:
        return []
    entries = {**state.credit.by_item.get(lesson.lesson_id, {})}
    entries.pop(data["credited_run"], None)
    return [
        NewEvent(
            LessonDemoted(
                lesson_id=lesson.lesson_id,
                lesson=lesson.lesson,
                turns_saved=sum(e.turns_saved for e in entries.values()) + int(data.get("turns_saved", 0)),
                success_saved=sum(e.success_saved for e in entries.values()) + int(data.get("success_saved", 0)),
                from_category=lesson.category,  # type: ignore[arg-type]
            ),
            **_envelope(new),
        )
    ]


def _envelope(new: NewEvent) -> dict[str, Any]:
    return {"run_id": new.run_id, "step": new.step, "domain": new.domain, "occurred_at": new.occurred_at}


def _after_use(lesson: LessonEntry, domain: str | None) -> LessonEntry:
    return used(lesson, domain, lesson.last_used, "")


def _promotion(lesson: LessonEntry, new: NewEvent) -> NewEvent:
    return NewEvent(
        LessonPromoted(
            lesson_id=lesson.lesson_id,
            lesson=lesson.lesson,
            use_count=lesson.use_count,
            triggered_domains=list(lesson.triggered_domains),
            from_category="error_recovery",
            to_category="best_practice",
        ),
        **_envelope(new),
    )


def lesson_id_taken(state: MemoryState, new: NewEvent) -> str | None:
    """Why a `lesson_recorded`/`lesson_seeded` cannot be stored (one line), or None: its
    caller-chosen lesson_id already names a lesson with another dedup key. Stored, it would
    be dropped by the fold, and its decisions (a promotion) would act on that other lesson."""
    if new.type not in ("lesson_recorded", "lesson_seeded"):
        return None
    data = new.payload.model_dump(mode="json")
    other = state.lessons.lessons.get(data.get("lesson_id") or "")
    if other is None or key_of(other) == dedup_key(
        data.get("failed_command"), data.get("error_pattern"), data.get("scope_domain"), data["lesson"]
    ):
        return None
    return (
        f"{new.type}: lesson_id {other.lesson_id!r} already names another lesson "
        f"({other.lesson[:60]!r}); choose a new id or leave it empty"
    )


def pin_refused(state: MemoryState, new: NewEvent) -> str | None:
    """Why a `lesson_pinned` or `lesson_unpinned` cannot be stored (one line), or None: it must name a
    lesson memory holds, and an unpin one in Tier 1."""
    if new.type not in ("lesson_pinned", "lesson_unpinned"):
        return None
    lesson_id = new.payload.lesson_id  # type: ignore[attr-defined]
    lesson = state.lessons.lessons.get(lesson_id)
    if lesson is None:
        return f"{new.type}: no lesson {lesson_id!r} in memory (list them with `memtape state lessons`)"
    if new.type == "lesson_unpinned" and lesson.tier != 1:
        return f"lesson_unpinned: lesson {lesson_id!r} is not in Tier 1 ({lesson.category}): nothing to unpin"
    return None


def decide(state: MemoryState, new: NewEvent, policy: Thresholds = DEFAULT_POLICY) -> list[NewEvent]:
    """The decision events that observation `new` causes, given memory `state` before it.

    Pure: depends only on its arguments. Decisions passed in as `new` (an
    import of a whole log, say) cause no further decisions except promotion.
    """
    data: dict[str, Any] = new.payload.model_dump(mode="json")
    t = new.type
    out: list[NewEvent] = []
    if lesson_id_taken(state, new) is not None:
        return out  # a stored hijack attempt (raw append, old log) decides nothing for the other lesson
    if t == "lesson_recorded":
        key = dedup_key(data.get("failed_command"), data.get("error_pattern"), data.get("scope_domain"), data["lesson"])
        existing_id = state.lessons.by_key.get(key)
        if existing_id is not None:
            lesson = state.lessons.lessons[existing_id]
            after = _after_use(lesson, new.domain)
            out.append(
                NewEvent(
                    LessonDeduplicated(
                        lesson_id=lesson.lesson_id,
                        lesson=lesson.lesson,
                        category=lesson.category,  # type: ignore[arg-type]
                        failed_command=lesson.failed_command,
                        error_pattern=lesson.error_pattern,
                        scope_domain=lesson.scope_domain,
                        new_use_count=after.use_count,
                        learned_from=list(data.get("learned_from") or []),
                    ),
                    **_envelope(new),
                )
            )
            if promotable(after, policy) and not discredited(state, lesson.lesson_id):
                out.append(_promotion(after, new))
        else:
            fresh = new_lesson(data, new.domain, "", "", "", None, None)
            if promotable(fresh, policy):
                out.append(_promotion(fresh, new))
    elif t == "lesson_deduplicated":
        known = state.lessons.lessons.get(data["lesson_id"])
        if known is not None:
            after = _after_use(known, new.domain)
            if promotable(after, policy) and not discredited(state, known.lesson_id):
                out.append(_promotion(after, new))
    elif t in RECALL_USES:
        for lid in counted(data):
            recalled = state.lessons.lessons.get(lid)
            if recalled is None:
                continue
            after = _after_use(recalled, new.domain)
            if promotable(after, policy) and not discredited(state, lid):
                out.append(_promotion(after, new))
    elif t == "item_credited" and data["kind"] == "lesson":
        out.extend(_demotion(state, new, data))
    elif t == "fact_observed":
        out.extend(_fact_decisions(state, new, data, policy))
    elif t == "pattern_learned":
        out.extend(_pattern_decisions(state, new, data, policy))
    return out


def _pattern_decisions(state: MemoryState, new: NewEvent, data: dict[str, Any], policy: Thresholds) -> list[NewEvent]:
    """Over max_patterns once this pattern is in: prune the bottom 20% (seed 003's LongTermMemory)."""
    if data["pattern_id"] in state.patterns.patterns or len(state.patterns.patterns) + 1 <= policy.max_patterns:
        return []
    gone = patterns_mod.to_prune(state.patterns, policy.max_patterns, adding=1)
    return [
        NewEvent(
            PatternsPruned(
                pattern_ids=gone,
                max_patterns=policy.max_patterns,
                remaining_count=len(state.patterns.patterns) + 1 - len(gone),
            ),
            **_envelope(new),
        )
    ]


def _fact_decisions(state: MemoryState, new: NewEvent, data: dict[str, Any], policy: Thresholds) -> list[NewEvent]:
    """A different value for a current (type, key) halves the old facts; those then under the floor are pruned."""
    current = state.knowledge.current.get(new.domain or "", {})
    same = [f for f in current.values() if f.fact_type == data["fact_type"] and f.key == data["key"]]
    if not same or any(f.value == data["value"] for f in same):
        return []
    old = sorted(same, key=lambda f: f.fact_id)
    out = [
        NewEvent(
            FactContradicted(
                fact_type=data["fact_type"],
                key=data["key"],
                old_values=[f.value for f in old],
                new_value=data["value"],
                factor=policy.fact_decay,
            ),
            **_envelope(new),
        )
    ]
    dropped = [f for f in old if f.confidence * policy.fact_decay < policy.fact_prune_below]
    if dropped:
        out.append(
            NewEvent(
                FactsPruned(
                    facts=[
                        {
                            "fact_id": f.fact_id,
                            "domain": f.domain,
                            "fact_type": f.fact_type,
                            "key": f.key,
                            "value": f.value,
                            "confidence": f.confidence * policy.fact_decay,
                        }
                        for f in dropped
                    ],
                    threshold=policy.fact_prune_below,
                ),
                **_envelope(new),
            )
        )
    return out


def _zero_credit_since(state: MemoryState, lesson_id: str, started_at: str, days: float) -> bool:
    """Whether a lesson's measured credit is zero (it changed no decision's outcome: no success, no
    turn) and was first measured more than `days` before `started_at`."""
    found = credit_fold.item_credit(state.credit, lesson_id)
    return (
        found is not None
        and found.turns_saved == 0
        and found.success_saved == 0
        and older_than(found.first_credited, started_at, days)
    )


def on_open(
    state: MemoryState,
    run_id: str,
    started_at: str,
    policy: Thresholds = DEFAULT_POLICY,
    seeds: Sequence[SeedLesson] | None = None,
) -> list[NewEvent]:
    """Decisions when memory is opened for a run starting at `started_at` (occurred time):
    the seed lessons on first use (`seeds`, the run's recorded choice; None: seed 001's); learned lessons unused for more than `prune_max_age_days`
    with fewer than `prune_min_uses` uses pruned (seeds never); facts below `fact_prune_below`
    pruned; trajectories older than `trace_ttl_days` expired (all from `policy`)."""
    env: dict[str, Any] = {"run_id": run_id, "occurred_at": started_at}
    out: list[NewEvent] = []
    if not state.lessons.seeded:
        out.extend(NewEvent(e.payload, **env) for e in seed_lessons(seeds))
    lessons = state.lessons.lessons
    worthless = sorted(
        l.lesson_id
        for l in lessons.values()
        if l.source != "seed" and _zero_credit_since(state, l.lesson_id, started_at, policy.prune_max_age_days)
    )
    stale = sorted(
        {
            *worthless,
            *(
                l.lesson_id
                for l in lessons.values()
                if l.source != "seed"
                and l.use_count < policy.prune_min_uses
                and older_than(l.last_used, started_at, policy.prune_max_age_days)
            ),
        }
    )
    if stale:
        out.append(
            NewEvent(
                LessonsPruned(
                    lesson_ids=stale,
                    pruned_count=len(stale),
                    remaining_count=len(lessons) - len(stale),
                    as_of=started_at,
                    max_age_days=int(policy.prune_max_age_days),
                    min_uses=policy.prune_min_uses,
                    zero_credit_ids=worthless,
                ),
                **env,
            )
        )
    low = [
        f
        for facts in state.knowledge.current.values()
        for f in facts.values()
        if f.confidence < policy.fact_prune_below
    ]
    if low:
        low.sort(key=lambda f: (f.domain, f.fact_id))
        out.append(
            NewEvent(
                FactsPruned(
                    facts=[
                        {
                            "fact_id": f.fact_id,
                            "domain": f.domain,
                            "fact_type": f.fact_type,
                            "key": f.key,
                            "value": f.value,
                            "confidence": f.confidence,
                        }
                        for f in low
                    ],
                    threshold=policy.fact_prune_below,
                ),
                **env,
            )
        )
    gone = expired(state.trajectories, started_at, policy.trace_ttl_days)
    if gone:
        out.append(
            NewEvent(TrajectoriesExpired(trajectory_ids=gone, ttl_days=policy.trace_ttl_days, as_of=started_at), **env)
        )
    return out
