"""Replaying the policy over the log: what experiments and `verify --decisions` share.

Decisions are events the policy step appends after an observation (`decide`) or
when memory is opened for a run (`on_open`). Both experiments (another policy,
what would differ) and `verify --decisions` (the recorded policy, does every
decision follow) walk the log the same way: fold the policy-relevant
projections, and recognise where memory was opened — decision events of
`on_open`'s kinds that follow no observation of their own.

`verify_decisions` replays the log under the policy each run recorded in its
`run_started` (the default policy for events outside runs) and checks that each
decision event is exactly — type, payload, envelope — what the policy yields at
that point, and that none is missing. Decisions appended by an import (the
events after `memory_imported` in its transaction) went through the source's
own rules and are folded, not checked.

Usage::

    result = verify_decisions(store)
    if not result.ok:
        print(result.first_bad_seq, result.reason)
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from memtape.ledger.clock import normalize_ts
from memtape.ledger.envelope import NewEvent, RecordedEvent
from memtape.ledger.events import SeedLesson
from memtape.ledger.store import Store, redacted_envelope, serialize_payload
from memtape.projections.decisions import DECISION_TYPES, decide, on_open, promotable
from memtape.projections.folds import lessons as lessons_projection
from memtape.projections.folds.lessons import TIER1_CATEGORIES, LessonsState
from memtape.projections.folds.state import MemoryState, dispatch
from memtape.projections.parameters import DEFAULT_POLICY, Thresholds
from memtape.projections.pin import TIER1_WRITES, pinner_refusal
from memtape.projections.seeds import seed_lessons, seeds_in
from memtape.projections.writer import WRITER_PROJECTIONS

#: decisions `on_open` makes (the rest come from `decide` after an observation)
OPEN_TYPES = frozenset({"lesson_seeded", "lessons_pruned", "trajectories_expired"})


def opens_run(ev: RecordedEvent, prev: RecordedEvent | None) -> bool:
    """Whether decision `ev` is one of memory's opening for a run: an `on_open` kind, or facts
    pruned right after something other than a fact observation or contradiction."""
    return ev.type in OPEN_TYPES or (
        ev.type == "facts_pruned" and (prev is None or prev.type not in ("fact_contradicted", "fact_observed"))
    )


def as_new(ev: RecordedEvent) -> NewEvent:
    """A stored event as the writer was given it (what `decide` sees)."""
    return NewEvent(
        ev.payload,
        run_id=ev.run_id,
        step=ev.step,
        domain=ev.domain,
        stream=ev.stream,
        occurred_at=ev.occurred_at,
        id=ev.id,
    )


class PolicyMemory:
    """The policy-relevant projections under one policy, folded event by event."""

    def __init__(self, policy: Thresholds, names: tuple[str, ...] = WRITER_PROJECTIONS):
        self.policy = policy
        self.state = MemoryState.empty(names)
        self.table = dispatch(names)

    def fold(self, ev: RecordedEvent) -> None:
        for name, fn in self.table.get(ev.type, ()):
            setattr(self.state, name, fn(getattr(self.state, name), ev, self.policy))
        self.state.head = ev.seq


def recorded_policy(run_started: RecordedEvent) -> Thresholds:
    """The policy a run recorded in its `run_started` (its fields; the default for any left out)."""
    recorded = run_started.data.get("policy") or {}
    return Thresholds.model_validate({k: v for k, v in recorded.items() if k in Thresholds.model_fields})


def run_seeds(store: Store, until: int | None = None) -> dict[str, tuple[SeedLesson, ...] | None]:
    """run id -> the seed lessons its memory was opened with (None: seed 001's), read ahead as
    `run_policies` is."""
    return {
        ev.run_id: seeds_in(ev.data.get("policy"))
        for ev in store.read(to_seq=until, types=["run_started"])
        if ev.run_id
    }


def run_policies(store: Store, until: int | None = None) -> dict[str, Thresholds]:
    """run id -> the policy it recorded (memory is opened before `run_started` is appended, so
    this is read ahead of the replay)."""
    return {ev.run_id: recorded_policy(ev) for ev in store.read(to_seq=until, types=["run_started"]) if ev.run_id}


@dataclass(frozen=True)
class DecisionCheck:
    ok: bool
    decisions: int  # decision events checked (imported ones not included)
    first_bad_seq: int | None = None
    reason: str | None = None
    #: every Tier 1 entry no door of its own made (`tier1_unmade`), whatever else held
    unmade: tuple[str, ...] = ()


def _unmade(
    ev: RecordedEvent, lessons: LessonsState, policy: Thresholds, imported: bool, seeds: set[str]
) -> str | None:
    """Why Tier 1 entry `ev` (an event putting text into every system prompt) was made by none of
    the doors that may make one (one line), or None: a seed as memory seeds itself, a promotion the
    policy makes of the lesson as memory holds it then, a pin as `memtape lessons pin` writes it."""
    d = ev.data
    lesson = lessons.lessons.get(d.get("lesson_id") or "")
    if ev.type == "lesson_recorded":
        return f"a {d['category']} lesson recorded as given (no seed, promotion or pin)"
    if ev.type == "lesson_seeded":
        return None if not imported or d["lesson_id"] in seeds else "a seed lesson of no seed document, imported"
    if ev.type == "lesson_promoted":
        if lesson is None or not promotable(lesson, policy):
            return "a promotion the policy does not make of the lesson as memory held it" + (
                " (imported as given)" if imported else ""
            )
        return None
    refusal = pinner_refusal(d["pinned_by"])
    if imported:
        return "a pin that came with an import (only `memtape lessons pin` pins)"
    if refusal is not None:
        return f"a pin `memtape lessons pin` refuses ({refusal})"
    if lesson is None or lesson.category != d["from_category"]:
        return "a pin of a lesson memory did not hold as it says"
    return None


def tier1_unmade(store: Store) -> list[str]:
    """Every Tier 1 entry of the log that neither the policy, a seed nor a pin command made, as
    `seq N type lesson_id: why`, whatever door it came through (`append --raw`, an import, a hand
    edit of an old log); see `_unmade`."""
    policies = run_policies(store)
    chosen = [None, *{tuple(s) for s in run_seeds(store).values() if s is not None}]  # seed 001's, and each run's
    seeds = {new.payload.lesson_id for choice in chosen for new in seed_lessons(choice)}  # type: ignore[attr-defined]
    lessons = LessonsState()
    found: list[str] = []
    imported_at: str | None = None
    for ev in store.read():
        if ev.type == "memory_imported":
            imported_at = ev.recorded_at
        elif imported_at is not None and ev.recorded_at != imported_at:
            imported_at = None
        tier1 = ev.type in TIER1_WRITES or (ev.type == "lesson_recorded" and ev.data["category"] in TIER1_CATEGORIES)
        if tier1:
            policy = policies.get(ev.run_id or "", DEFAULT_POLICY)
            why = _unmade(ev, lessons, policy, imported_at is not None, seeds)
            if why is not None:
                found.append(f"seq {ev.seq} {ev.type} {ev.data.get('lesson_id', '')}: {why}")
        if ev.type in lessons_projection.TYPES:
            lessons_projection.apply(lessons, ev)
    return found


def _same(ev: RecordedEvent, new: NewEvent, redactor: Any) -> bool:
    """`ev` is exactly `new` as the store would have recorded it (secrets redacted the same way)."""
    new = redacted_envelope(new, redactor)
    return (
        ev.type == new.type
        and ev.schema_version == new.payload.schema_version
        and ev.payload_json == serialize_payload(new.payload, redactor)
        and (ev.run_id, ev.step, ev.domain, ev.stream) == (new.run_id, new.step, new.domain, new.resolved_stream)
        and ev.occurred_at == (normalize_ts(new.occurred_at) if new.occurred_at is not None else ev.occurred_at)
    )


def _describe(new: NewEvent) -> str:
    data = new.payload.model_dump(mode="json")
    item = (
        data.get("lesson_id") or data.get("key") or ",".join(data.get("lesson_ids") or data.get("trajectory_ids") or [])
    )
    return f"{new.type} {item}".strip()


def verify_decisions(store: Store) -> DecisionCheck:
    """Replay the log under each run's recorded policy; the first decision event that is not exactly
    what the policy yields there (or the first place a decision it yields is missing) is named, and
    every Tier 1 entry no door of its own made (`tier1_unmade`)."""
    check = replay_decisions(store)
    unmade = tuple(tier1_unmade(store))
    if not unmade:
        return check
    return DecisionCheck(False, check.decisions, check.first_bad_seq, check.reason, unmade)


def replay_decisions(store: Store) -> DecisionCheck:
    """The replay of `verify_decisions`: the first decision that differs from the policy's."""
    redactor = store.redactor
    policies = run_policies(store)
    seeds = run_seeds(store)
    memories: dict[str, PolicyMemory] = {}

    def memory(run_id: str | None) -> PolicyMemory:
        policy = policies.get(run_id or "", DEFAULT_POLICY)
        fp = policy.fingerprint()
        if fp not in memories:  # a policy first met mid-log folds the log so far (read again)
            memories[fp] = PolicyMemory(policy)
            for past in store.read(to_seq=seen):
                memories[fp].fold(past)
        return memories[fp]

    seen = 0
    memory(None)
    expected: deque[NewEvent] = deque()
    prev: RecordedEvent | None = None
    imported_at: str | None = None  # recorded_at of the import transaction being read
    checked = 0
    for ev in store.read():
        if ev.type == "memory_imported":
            if expected:
                return DecisionCheck(
                    False,
                    checked,
                    ev.seq,
                    f"the policy's decision {_describe(expected[0])} is missing before this event",
                )
            imported_at = ev.recorded_at
        elif imported_at is not None and ev.recorded_at != imported_at:
            imported_at = None
        if ev.type in DECISION_TYPES and imported_at is None:
            if not expected and opens_run(ev, prev) and ev.run_id:
                mem = memory(ev.run_id)
                expected.extend(on_open(mem.state, ev.run_id, ev.occurred_at, mem.policy, seeds.get(ev.run_id)))
            if not expected:
                return DecisionCheck(False, checked, ev.seq, f"{ev.type}: a decision the policy did not make here")
            want = expected.popleft()
            if not _same(ev, want, redactor):
                return DecisionCheck(
                    False, checked, ev.seq, f"{ev.type}: the policy decides {_describe(want)} here, not this"
                )
            checked += 1
        elif ev.type not in DECISION_TYPES and imported_at is None:
            if expected:
                return DecisionCheck(
                    False,
                    checked,
                    ev.seq,
                    f"the policy's decision {_describe(expected[0])} is missing before this event",
                )
            mem = memory(ev.run_id)
            expected.extend(decide(mem.state, as_new(ev), mem.policy))
        for m in memories.values():
            m.fold(ev)
        seen, prev = ev.seq, ev
    if expected:
        return DecisionCheck(
            False, checked, seen + 1, f"the policy's decision {_describe(expected[0])} is missing at the end of the log"
        )
    return DecisionCheck(True, checked)
